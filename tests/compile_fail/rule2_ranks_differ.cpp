// expect: typeshard: rule 2 \(matmul\): the operands need the same rank, at least 2
// A batch of matrices times one matrix: typeshard's matmul wants the batch dimensions on
// both operands (seed 004's x @ x); the twin multiplies two batches.
//
// Full output (clang++ 14): both ranks are the diagnostic's arguments:
//   matmul_plan.hpp: error: static_assert failed due to requirement
//       'detail::always_false_values<3, 2>' "typeshard: rule 2 (matmul): the operands need
//       the same rank, at least 2 (...); fix: reshape the operands so both are matrices or
//       both are batches of matrices with the same batch dimensions"
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

void ranks(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<float, 3>& batch,
           const ts::host_tensor<float, 2>& matrix) {
  auto A = ts::device_put<ts::spec<"x">>(m, batch);
#ifdef TYPESHARD_COMPILE_FAIL
  auto B = ts::device_put<ts::spec<ts::none, "y">>(m, matrix);
#else
  auto B = ts::device_put<ts::spec<"x", ts::none, "y">>(m, batch);
  (void)matrix;
#endif
  auto C = ts::matmul(A, B);
  (void)C;
}
