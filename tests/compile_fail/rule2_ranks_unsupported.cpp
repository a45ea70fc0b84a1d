// expect: typeshard: rule 2 \(matmul\): the operands need the same rank, at least 2
// A batch of matrices times a matrix of another rank: typeshard asks for equal ranks (the
// leading dimensions are batch dimensions of both operands); the twin multiplies matrices.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2 = ts::mesh<ts::axis("x", 2)>;

void product(const ts::device_mesh<mesh_2>& m, const ts::host_tensor<float, 3>& batch,
             const ts::host_tensor<float, 2>& matrix) {
  auto W = ts::device_put<ts::spec<ts::none, ts::none>>(m, matrix);
#ifdef TYPESHARD_COMPILE_FAIL
  auto X = ts::device_put<ts::spec<"x", ts::none, ts::none>>(m, batch);
#else
  (void)batch;
  auto X = ts::device_put<ts::spec<"x", ts::none>>(m, matrix);
#endif
  auto C = ts::matmul(X, W);
  (void)C;
}
