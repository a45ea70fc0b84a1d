// expect: typeshard: rule 2 \(matmul\): the per-shard GEMM supports float, double and bfloat16 elements
// An int matmul has no per-shard GEMM; the twin converts to float.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2 = ts::mesh<ts::axis("x", 2)>;

void product(const ts::device_mesh<mesh_2>& m, const ts::host_tensor<int, 2>& a) {
  auto A = ts::device_put<ts::spec<"x", ts::none>>(m, a);
#ifdef TYPESHARD_COMPILE_FAIL
  auto C = ts::matmul(A, A);
#else
  auto F = ts::map(A, [](int v) { return static_cast<float>(v); });
  auto C = ts::matmul(F, ts::reshard<ts::spec<ts::none, ts::none>>(F));
#endif
  (void)C;
}
