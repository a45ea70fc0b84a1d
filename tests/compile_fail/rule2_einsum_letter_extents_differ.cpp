// expect: typeshard: rule 2 \(einsum\): a letter of both operands has different static extents
// j is 8 in lhs and 6 in rhs, static: clang++ prints letter_lhs_extent_rhs_extent<'j', 8, 6> on the error line, g++ in the note under it.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_dm = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;

void f(const ts::device_mesh<mesh_2x2>& m, const ts::device_mesh<mesh_dm>& dm,
       const ts::host_tensor<float, 2>& host, const ts::host_tensor<double, 2>& host_d,
       const ts::host_tensor<int, 2>& host_i) {
  (void)m; (void)dm; (void)host; (void)host_d; (void)host_i;
  auto A = ts::device_put<ts::spec<"x", ts::none>, ts::extents<4, 8>>(m, host);
#ifdef TYPESHARD_COMPILE_FAIL
  auto B = ts::device_put<ts::spec<ts::none, "y">, ts::extents<6, 4>>(m, host);
  auto C = ts::einsum<"ij,jk->ik">(A, B);
#else
  auto B = ts::device_put<ts::spec<ts::none, "y">, ts::extents<8, 4>>(m, host);
  auto C = ts::einsum<"ij,jk->ik">(A, B);
#endif
  (void)C;
}
