// expect: typeshard: rule 5 \(elementwise\): the operands have different ranks
// A vector plus a matrix: typeshard has no implicit broadcasting; the twin adds two vectors.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2 = ts::mesh<ts::axis("x", 2)>;

void sum(const ts::device_mesh<mesh_2>& m, const ts::host_tensor<float, 1>& v,
         const ts::host_tensor<float, 2>& a) {
  auto x = ts::device_put<ts::spec<"x">>(m, v);
#ifdef TYPESHARD_COMPILE_FAIL
  auto y = ts::device_put<ts::spec<"x", ts::none>>(m, a);
#else
  (void)a;
  auto y = ts::device_put<ts::spec<"x">>(m, v);
#endif
  auto z = x + y;
  (void)z;
}
