// expect: typeshard: rule 2 \(matmul\): the operands have different element types
// float times double: no implicit promotion across a sharded product (the per-device GEMM
// is one precision); the twin converts first.
//
// Full output (clang++ 14): both element types are the diagnostic's arguments:
//   matmul_plan.hpp: error: static_assert failed due to requirement
//       'detail::always_false<float, double>' "typeshard: rule 2 (matmul): the operands have
//       different element types; fix: convert one so both match, e.g. ts::astype<float>(x)"
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

void types(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<float, 2>& a,
           const ts::host_tensor<double, 2>& b) {
  auto A = ts::device_put<ts::spec<"x", ts::none>>(m, a);
  auto B = ts::device_put<ts::spec<ts::none, "y">>(m, b);
#ifdef TYPESHARD_COMPILE_FAIL
  auto C = ts::matmul(A, B);
#else
  auto C = ts::matmul(A, ts::astype<float>(B));
#endif
  (void)C;
}
