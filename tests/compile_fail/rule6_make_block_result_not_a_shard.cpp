// expect: typeshard: rule 6 \(extents\): device_put\(mesh, shape, make_block\): make_block\(index\) must return a ts::host_tensor<T, Rank> of the array's rank
// make_block returns a std::vector, not the shard as a host_tensor. The twin returns one.
#include <vector>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

auto put(const ts::device_mesh<mesh_2x2>& m) {
  const auto a = ts::device_put<ts::spec<"x">>(m, ts::shape<2>{4, 3},
                                               [](const ts::index_slices<2>& ix) {
#ifdef TYPESHARD_COMPILE_FAIL
                                                 return std::vector<float>(ix[0].size() * ix[1].size());
#else
                                                 return ts::host_tensor<float, 2>(
                                                     {ix[0].size(), ix[1].size()});
#endif
                                               });
  return ts::to_host(a);
}
