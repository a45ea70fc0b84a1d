// expect: typeshard: rule 2 \(matmul\): a batch \(leading\) dimension is sharded differently in the two operands
// Batched matmul (seed 004's 8 x N x N): the batch dimension must not be sharded over
// different axes in the two operands, here over "x" in lhs and "y" in rhs (sharded in one
// operand only, it would keep its sharding: the twin's case, alike in both, also compiles).
//
// Full output (clang++ 14): the batch dimension is the diagnostic's argument:
//   matmul_plan.hpp: error: static_assert failed due to requirement
//       'detail::always_false_values<0UL>' "typeshard: rule 2 (matmul): a batch (leading)
//       dimension is sharded differently in the two operands; fix: reshard one operand ..."
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

void batches(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<float, 3>& host) {
  auto A = ts::device_put<ts::spec<"x", ts::none, ts::none>>(m, host);
#ifdef TYPESHARD_COMPILE_FAIL
  auto B = ts::device_put<ts::spec<"y", ts::none, ts::none>>(m, host);
#else
  auto B = ts::device_put<ts::spec<"x", ts::none, "y">>(m, host);
#endif
  auto C = ts::matmul(A, B);
  (void)C;
}
