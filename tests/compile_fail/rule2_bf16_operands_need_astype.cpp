// expect: typeshard: rule 2 \(matmul\): the operands have different element types; fix: convert one so both match, e\.g\. ts::astype<float>\(x\)
// bfloat16 times float: no silent promotion in a sharded product (which precision would each
// device's GEMM and the collectives run in?); the message names the cast, and the twin makes it.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

void mixed(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<ts::bfloat16, 2>& a,
           const ts::host_tensor<float, 2>& b) {
  auto A = ts::device_put<ts::spec<"x", ts::none>>(m, a);
  auto B = ts::device_put<ts::spec<ts::none, "y">>(m, b);
#ifdef TYPESHARD_COMPILE_FAIL
  auto C = ts::matmul(A, B);
#else
  auto C = ts::matmul(ts::astype<float>(A), B);
#endif
  (void)C;
}
