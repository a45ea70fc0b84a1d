// expect: typeshard: rule 2 \(matmul\): a batch \(leading\) dimension sharded in one operand only keeps that sharding
// Batched matmul: the batch dimension over x in lhs only keeps x (rhs reads its block), but
// rhs's columns K are over x too: the result would use x twice. The twin names the output
// spec, which picks the cheapest plan.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

void f(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<float, 3>& host) {
  auto A = ts::device_put<ts::spec<"x", ts::none, ts::none>>(m, host);
  auto B = ts::device_put<ts::spec<ts::none, ts::none, "x">>(m, host);
#ifdef TYPESHARD_COMPILE_FAIL
  auto C = ts::matmul(A, B);
#else
  auto C = ts::matmul<ts::spec<"x", ts::none, ts::none>>(A, B);
#endif
  (void)C;
}
