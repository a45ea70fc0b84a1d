// expect: typeshard: rule 6 \(extents\): device_put: the Extents given have a different rank than the global shape
// device_put(mesh, shape, make_block) of a matrix with three static extents. The twin gives two.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
#ifdef TYPESHARD_COMPILE_FAIL
using E = ts::extents<4, 3, 1>;
#else
using E = ts::extents<4, 3>;
#endif

auto put(const ts::device_mesh<mesh_2x2>& m) {
  const auto a = ts::device_put<ts::spec<"x">, E>(m, ts::shape<2>{4, 3},
                                                  [](const ts::index_slices<2>& ix) {
                                                    return ts::host_tensor<float, 2>(
                                                        {ix[0].size(), ix[1].size()});
                                                  });
  return ts::to_host(a);
}
