// expect: typeshard: rule 8 \(dimension moves\): the dimension named is not one of the array's
// ts::merge_dims<1> on a rank-2 array: there is no dimension 2 to merge dimension 1 with.
// The twin merges dimensions 0 and 1.
//
// The note names the dimension and the rank: 'typeshard::diagnostic::dimension_out_of_range<1, 2>'.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

auto moved(const ts::device_mesh<mesh_2x2>& m) {
  const auto x = ts::device_put<ts::spec<"x", ts::none>>(m, ts::host_tensor<float, 2>({4, 3}));
#ifdef TYPESHARD_COMPILE_FAIL
  const auto y = ts::merge_dims<1>(x);
#else
  const auto y = ts::merge_dims<0>(x);
#endif
  return ts::to_host(y);
}
