// expect: typeshard: rule 2 \(einsum\): subscripts too long: at most 63 characters
// The subscripts are a structural string of at most 63 characters (8 letters per operand
// fit with room to spare: "abcdefgh,abcdefgh->abcdefgh" is 27). Padding them with spaces
// past that is refused where the string is made. The twin writes them without the padding.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

auto product(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<float, 2>& host) {
  const auto A = ts::device_put<ts::spec<"x", ts::none>>(m, host);
  const auto B = ts::device_put<ts::spec<ts::none, "y">>(m, host);
#ifdef TYPESHARD_COMPILE_FAIL
  return ts::einsum<"ij,jk->ik                                                          ">(A, B);
#else
  return ts::einsum<"ij,jk->ik">(A, B);
#endif
}
