// expect: typeshard: rule 8 \(dimension moves\): ts::split_dim<Dim, Parts>: Parts is not a multiple of the dimension's number of shards
// D = 12 sharded over "model" (2 shards of 6) split into 3 heads of 4: device 0 would hold
// heads 0 and 1 (8 elements) but holds 6; data would move. The twin splits into 6 heads of 2.
//
// The note names dimension, parts and shards: 'split_needs_communication<1, 3, 2>'.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
using E = ts::extents<ts::dyn, 12>;

auto heads(const ts::device_mesh<mesh>& m) {
  const auto x = ts::device_put<ts::spec<"data", "model">, E>(m, ts::host_tensor<float, 2>({4, 12}));
#ifdef TYPESHARD_COMPILE_FAIL
  const auto h = ts::split_dim<1, 3>(x);
#else
  const auto h = ts::split_dim<1, 6>(x);
#endif
  return ts::to_host(h);
}
