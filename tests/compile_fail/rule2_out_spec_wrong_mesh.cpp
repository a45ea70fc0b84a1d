// expect: typeshard: rule 2 \(matmul\): the output spec names an axis the operands' mesh does not have
// An output spec written for another mesh ("data", "model") on arrays of the ("x", "y") mesh.
//
// Full output (clang++ 14): the axis name is the diagnostic's argument:
//   matmul_plan.hpp: error: static_assert failed due to requirement
//       'detail::always_false_chars<'m', 'o', 'd', 'e', 'l'>' "typeshard: rule 2 (matmul): the
//       output spec names an axis the operands' mesh does not have (a spec written for
//       another mesh?); fix: name the output sharding with the axes of the operands' mesh"
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

void wrong_mesh(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<float, 2>& host) {
  auto A = ts::device_put<ts::spec<ts::none, "x">>(m, host);
  auto B = ts::device_put<ts::spec<"x", ts::none>>(m, host);
#ifdef TYPESHARD_COMPILE_FAIL
  auto C = ts::matmul<ts::spec<"model", ts::none>>(A, B);
#else
  auto C = ts::matmul<ts::spec<"y", ts::none>>(A, B);
#endif
  (void)C;
}
