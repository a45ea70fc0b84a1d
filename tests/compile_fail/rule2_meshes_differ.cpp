// expect: typeshard: rule 2 \(matmul\): the operands live on different mesh types
// lhs on a 2x2 mesh, rhs on a 1-D mesh of 4: their specs cannot be related.
//
// Full output (clang++ 14): both mesh types are the diagnostic's arguments:
//   matmul_plan.hpp: error: static_assert failed due to requirement
//       'detail::always_false<typeshard::mesh<...>, typeshard::mesh<...>>' "typeshard: rule 2
//       (matmul): the operands live on different mesh types; fix: put both arrays on the same
//       mesh"
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_4 = ts::mesh<ts::axis("x", 4)>;

void meshes(const ts::device_mesh<mesh_2x2>& m, const ts::device_mesh<mesh_4>& m4,
            const ts::host_tensor<float, 2>& host) {
  auto A = ts::device_put<ts::spec<"x", ts::none>>(m, host);
#ifdef TYPESHARD_COMPILE_FAIL
  auto B = ts::device_put<ts::spec<ts::none, "x">>(m4, host);
#else
  auto B = ts::device_put<ts::spec<ts::none, "y">>(m, host);
  (void)m4;
#endif
  auto C = ts::matmul(A, B);
  (void)C;
}
