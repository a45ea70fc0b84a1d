// expect: typeshard: rule 2 \(matmul\): the contracting dimension J has different static extents
// A[4, 8] . B[6, 4] with static extents: J is 8 in lhs and 6 in rhs, caught at compile time
// (with dynamic extents the same mistake is a shape_error at run time).
//
// Full output (clang++ 14): both extents are the diagnostic's arguments:
//   matmul_plan.hpp: error: static_assert failed due to requirement
//       'detail::always_false_values<8UL, 6UL>' "typeshard: rule 2 (matmul): the contracting
//       dimension J has different static extents in lhs (its last dimension) and rhs (its
//       second-to-last); fix: A[..., I, J] . B[..., J, K] needs the same J in both operands"
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

void extents(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<float, 2>& a,
             const ts::host_tensor<float, 2>& b) {
  auto A = ts::device_put<ts::spec<"x", ts::none>, ts::extents<4, 8>>(m, a);
#ifdef TYPESHARD_COMPILE_FAIL
  auto B = ts::device_put<ts::spec<ts::none, "y">, ts::extents<6, 4>>(m, b);
#else
  auto B = ts::device_put<ts::spec<ts::none, "y">, ts::extents<8, 4>>(m, b);
#endif
  auto C = ts::matmul(A, B);
  (void)C;
}
