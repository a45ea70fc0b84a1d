// expect: typeshard: rule 2 \(matmul\): lhs's rows I and rhs's columns K are sharded over the same mesh axis
// Seed 001 case 4: A[I_X, J] . B[J, K_X]. Each device holds rows of A and columns of B for
// the same x, so C[I_X, K_X] would need x twice; one operand must be gathered, and which one
// is the caller's choice: naming the output spec makes it (the twin gathers B).
//
// Full output (clang++ 14; g++ 12 spells the axis axis_name{"x", 1} in a "required from" line):
//   matmul_plan.hpp: error: static_assert failed due to requirement
//       'detail::always_false_chars<'x'>' "typeshard: rule 2 (matmul): lhs's rows I and rhs's
//       columns K are sharded over the same mesh axis (A[I_X, J] . B[J, K_X], case 4), ...;
//       fix: name the output spec, which decides the operand to gather: ..."
//   note: in instantiation of member function
//       'typeshard::diagnostic::matmul_free_dims_share_axis<'x'>::fire' requested here
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

void case4(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<float, 2>& host) {
  auto A = ts::device_put<ts::spec<"x", ts::none>>(m, host);
  auto B = ts::device_put<ts::spec<ts::none, "x">>(m, host);
#ifdef TYPESHARD_COMPILE_FAIL
  auto C = ts::matmul(A, B);
#else
  auto C = ts::matmul<ts::spec<"x", ts::none>>(A, B);
#endif
  (void)C;
}
