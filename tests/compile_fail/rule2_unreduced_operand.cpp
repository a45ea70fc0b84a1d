// expect: typeshard: rule 3 \(unreduced\): one operand of ts::matmul is a partial sum over a mesh axis the other operand is sharded or unreduced over
// Matmul is linear in each operand, so a partial sum over x may be multiplied (rule 3), but
// not by an operand sharded over x: device x would pair its partial sum with block x
// of the other, and the blocks' sums would not be the product. The twin multiplies by an
// operand sharded over y instead, which gives a product still partial over x.
//
// Full output (clang++ 14): the axis is the diagnostic's argument:
//   matmul_plan.hpp: error: static_assert failed due to requirement
//       'detail::always_false_chars<'x'>' "typeshard: rule 3 (unreduced): one operand of
//       ts::matmul is a partial sum over a mesh axis the other operand is sharded or
//       unreduced over, so the local products would not add up to the product; fix: reduce
//       the partial operand first with ts::reshard<Spec>(x) or ts::psum<"axis">(x)"
#include <typeshard/typeshard.hpp>

#include <type_traits>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

void chain(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<float, 2>& host) {
  auto A = ts::device_put<ts::spec<ts::none, "x">>(m, host);
  auto B = ts::device_put<ts::spec<"x", ts::none>>(m, host);
  auto U = ts::matmul(A, B);  // unreduced over x
#ifdef TYPESHARD_COMPILE_FAIL
  auto W = ts::device_put<ts::spec<ts::none, "x">>(m, host);
#else
  auto W = ts::device_put<ts::spec<ts::none, "y">>(m, host);
#endif
  auto C = ts::matmul(U, W);
  static_assert(std::is_same_v<decltype(C)::unreduced_type, ts::unreduced<"x">>);
}
