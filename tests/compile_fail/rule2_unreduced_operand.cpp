// expect: typeshard: rule 3 \(unreduced\): ts::matmul of a value that is still a partial sum
// The unreduced result of a case-3 matmul fed straight into another matmul: typeshard's
// matmul takes reduced operands only (reduce first, as the twin does).
//
// Full output (clang++ 14):
//   matmul_plan.hpp: error: static_assert failed due to requirement
//       'detail::always_false<typeshard::unreduced<...>>' "typeshard: rule 3 (unreduced):
//       ts::matmul of a value that is still a partial sum over a mesh axis; fix: reduce it
//       first with ts::reshard<Spec>(x) or ts::psum<"axis">(x)"
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

void chain(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<float, 2>& host) {
  auto A = ts::device_put<ts::spec<ts::none, "x">>(m, host);
  auto B = ts::device_put<ts::spec<"x", ts::none>>(m, host);
  auto U = ts::matmul(A, B);  // unreduced over x
#ifdef TYPESHARD_COMPILE_FAIL
  auto C = ts::matmul(U, B);
#else
  auto C = ts::matmul(ts::reshard<ts::spec<ts::none, ts::none>>(U), B);
#endif
  (void)C;
}
