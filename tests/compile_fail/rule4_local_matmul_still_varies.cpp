// expect: typeshard: rule 4 \(shard_map\): the out spec replicates over a mesh axis that the returned block still varies over
// Seed 001's case 3 without its psum: the local product of A[I, J_x] and B[J_x, K] is a
// partial sum that differs between the devices of "x", so P(None, None) is wrong until
// it is reduced. The twin reduces it with psum over "x" first.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using cols = ts::spec<ts::none, "x">;
using rows = ts::spec<"x", ts::none>;
using replicated = ts::spec<ts::none, ts::none>;

auto case3(const ts::device_mesh<mesh_2x2>& m) {
  const auto a = ts::device_put<cols>(m, ts::host_tensor<float, 2>({4, 4}));
  const auto b = ts::device_put<rows>(m, ts::host_tensor<float, 2>({4, 4}));
  const auto f = ts::shard_map<mesh_2x2, ts::specs<cols, rows>, replicated>(
      [](const auto& a_shard, const auto& b_shard) {
        const auto c_partial = ts::matmul(a_shard, b_shard);
#ifdef TYPESHARD_COMPILE_FAIL
        return c_partial;
#else
        return ts::psum<"x">(c_partial);
#endif
      });
  return f(a, b);
}
