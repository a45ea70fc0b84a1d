// expect: typeshard: rule 2 \(einsum\): a batch letter sharded in one operand only keeps that sharding
// "bij,bjk->bik": b over x in rhs only keeps x (lhs reads its block), but lhs's free letter i
// is over x too: the result would use x twice. The twin names the output spec the message
// suggests, which picks the cheapest plan (one all_gather of lhs's i).
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

void f(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<float, 3>& host) {
  auto A = ts::device_put<ts::spec<ts::none, "x", ts::none>>(m, host);
  auto B = ts::device_put<ts::spec<"x", ts::none, ts::none>>(m, host);
#ifdef TYPESHARD_COMPILE_FAIL
  auto C = ts::einsum<"bij,bjk->bik">(A, B);
#else
  auto C = ts::einsum<"bij,bjk->bik", ts::spec<"x", ts::none, ts::none>>(A, B);
#endif
  (void)C;
}
