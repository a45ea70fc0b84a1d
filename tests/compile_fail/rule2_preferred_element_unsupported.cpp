// expect: typeshard: rule 2 \(matmul\): preferred_element<U> is the operands' element type, or float for bfloat16 operands
// float operands asking for a double result: the per-device GEMM of float sums in float, so a
// double result would only pretend to more precision. The twin asks for bfloat16 operands'
// float result.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

void preferred(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<float, 2>& a,
               const ts::host_tensor<ts::bfloat16, 2>& b) {
#ifdef TYPESHARD_COMPILE_FAIL
  auto A = ts::device_put<ts::spec<"x", ts::none>>(m, a);
  auto C = ts::matmul(A, A, ts::preferred_element<double>);
#else
  (void)a;
  auto B = ts::device_put<ts::spec<"x", ts::none>>(m, b);
  auto C = ts::matmul(B, ts::reshard<ts::spec<ts::none, ts::none>>(B),
                      ts::preferred_element<float>);
#endif
  (void)C;
}
