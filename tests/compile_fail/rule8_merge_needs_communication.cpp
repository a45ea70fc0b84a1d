// expect: typeshard: rule 8 \(dimension moves\): ts::merge_dims<Dim>: dimension Dim is unevenly sharded
// 3 heads of 4 over "model" (2 shards: 2 heads and 1) merged into 12: the merged dimension's
// blocks would be 6 and 6, the devices hold 8 and 4. The twin has 4 heads.
//
// The note names dimension, extent and shards: 'merge_needs_communication<0, 3, 2>'.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;

#ifdef TYPESHARD_COMPILE_FAIL
using E = ts::extents<3, 4>;
#else
using E = ts::extents<4, 4>;
#endif

auto merged(const ts::device_mesh<mesh>& m) {
  const auto h = ts::device_put<ts::spec<"model", ts::none>, E>(
      m, ts::host_tensor<float, 2>({E::static_extents[0], 4}));
  return ts::to_host(ts::merge_dims<0>(h));
}
