// expect: typeshard: rule 2 \(matmul\): ts::matmul of blocks: a has rank >= 2, b has rank 2 or a's rank
// Inside shard_map, a local product needs matrices (or a batch of them, times a matrix or a
// batch of the same rank): a rank-1 block is not one. The twin multiplies rank-2 blocks.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using rows = ts::spec<"x", ts::none>;

#ifdef TYPESHARD_COMPILE_FAIL
constexpr std::size_t weight_rank = 1;
using weight_spec = ts::spec<ts::none>;
#else
constexpr std::size_t weight_rank = 2;
using weight_spec = ts::spec<ts::none, ts::none>;
#endif

auto forward(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<float, 2>& x,
             const ts::host_tensor<float, weight_rank>& w) {
  const auto X = ts::device_put<rows>(m, x);
  const auto W = ts::device_put<weight_spec>(m, w);
  const auto f = ts::shard_map<mesh_2x2, ts::specs<rows, weight_spec>, rows>(
      [](const auto& xb, const auto& wb) { return ts::matmul(xb, wb); });
  return f(X, W);
}
