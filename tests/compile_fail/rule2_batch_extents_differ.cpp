// expect: typeshard: rule 2 \(matmul\): a batch \(leading\) dimension has different static extents
// Static extents make the batch mismatch (8 against 4 matrices) a compile error.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2 = ts::mesh<ts::axis("x", 2)>;
using batch_spec = ts::spec<"x", ts::none, ts::none>;

void product(const ts::device_mesh<mesh_2>& m, const ts::host_tensor<float, 3>& a,
             const ts::host_tensor<float, 3>& b) {
  auto A = ts::device_put<batch_spec, ts::extents<8, 16, 16>>(m, a);
#ifdef TYPESHARD_COMPILE_FAIL
  auto B = ts::device_put<batch_spec, ts::extents<4, 16, 16>>(m, b);
#else
  auto B = ts::device_put<batch_spec, ts::extents<8, 16, 16>>(m, b);
#endif
  auto C = ts::matmul(A, B);
  (void)C;
}
