// expect: typeshard: rule 2 \(matmul\): ts::transpose\(block\) needs a rank-2 block
// ts::transpose views a matrix as its transpose for block-level matmul; a rank-3 block has
// no single transpose (which two dimensions?), so it is refused where the view is made. The
// twin transposes a rank-2 block, one matrix of the batch.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

#ifdef TYPESHARD_COMPILE_FAIL
constexpr std::size_t rank = 3;
#else
constexpr std::size_t rank = 2;
#endif

auto gram(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<float, rank>& host) {
  const auto a = ts::device_put<ts::spec<"x">>(m, host);
  const auto f = ts::shard_map<mesh_2x2, ts::spec<"x">, ts::spec<"x">>(
      [](const auto& b) { return ts::matmul(ts::transpose(b), b); });
  return f(a);
}
