// expect: typeshard: rule 2 \(einsum\): preferred_element<U> is the operands' element type, or float for bfloat16 operands
// bfloat16 operands asking for a double result: the per-device GEMM sums in float. The twin
// asks for float.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

void preferred(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<ts::bfloat16, 2>& a) {
  auto A = ts::device_put<ts::spec<"x", ts::none>>(m, a);
  auto B = ts::device_put<ts::spec<ts::none, ts::none>>(m, a);
#ifdef TYPESHARD_COMPILE_FAIL
  auto C = ts::einsum<"ij,kj->ik">(A, B, ts::preferred_element<double>);
#else
  auto C = ts::einsum<"ij,kj->ik">(A, B, ts::preferred_element<float>);
#endif
  (void)C;
}
