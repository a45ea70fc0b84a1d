// expect: typeshard: rule 4 \(shard_map\): the out spec replicates over a mesh axis that the returned block still varies over
// Seed 000's Megatron MLP with a replicated out spec: after psum_scatter over "model" each
// device holds a different slice, so P(None, None) would claim a replication the value
// does not have. The twin names the out spec the value has, P(None, 'model').
// Issue 18: this gave 2 errors (to_host of the int returned after the diagnostic).
//
// The note names the axis: 'typeshard::diagnostic::out_spec_claims_replication<'m', 'o',
// 'd', 'e', 'l'>' on both compilers.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
using cols = ts::spec<ts::none, "model">;
using rows = ts::spec<"model", ts::none>;
#ifdef TYPESHARD_COMPILE_FAIL
using out = ts::spec<ts::none, ts::none>;
#else
using out = cols;
#endif

auto megatron(const ts::device_mesh<mesh_2x2>& m) {
  const auto x = ts::device_put<cols>(m, ts::host_tensor<float, 2>({4, 10}));
  const auto w1 = ts::device_put<cols>(m, ts::host_tensor<float, 2>({10, 40}));
  const auto w2 = ts::device_put<rows>(m, ts::host_tensor<float, 2>({40, 10}));
  const auto f = ts::shard_map<mesh_2x2, ts::specs<cols, cols, rows>, out>(
      [](const auto& x_block, const auto& a, const auto& b) {
        const auto h = ts::matmul(ts::matmul(ts::all_gather<"model">(x_block, 1), a), b);
        return ts::psum_scatter<"model">(h, 1);
      });
  return ts::to_host(f(x, w1, w2));  // the result keeps its type: no second error
}
