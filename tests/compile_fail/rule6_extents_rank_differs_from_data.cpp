// expect: typeshard: rule 6 \(extents\): device_put: the Extents given have a different rank than the host data
// device_put of a matrix with one static extent: give one per dimension. The twin gives two.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
#ifdef TYPESHARD_COMPILE_FAIL
using E = ts::extents<4>;
#else
using E = ts::extents<4, 3>;
#endif

auto put(const ts::device_mesh<mesh_2x2>& m) {
  const auto a = ts::device_put<ts::spec<"x">, E>(m, ts::host_tensor<float, 2>({4, 3}));
  return ts::to_host(a);
}
