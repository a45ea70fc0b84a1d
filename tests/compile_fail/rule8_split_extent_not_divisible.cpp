// expect: typeshard: rule 8 \(dimension moves\): ts::split_dim<Dim, Parts>: the dimension's static extent is not a multiple of Parts
// A model dimension of 512 split into 6 heads: 512 / 6 is no extent. The twin splits it into
// 8 heads of 64.
//
// The note names dimension, extent and parts: 'split_extent_not_divisible<2, 512, 6>'.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
using E = ts::extents<ts::dyn, ts::dyn, 512>;

auto heads(const ts::device_mesh<mesh>& m) {
  const auto x = ts::device_put<ts::spec<"data", ts::none, "model">, E>(
      m, ts::host_tensor<float, 3>({2, 3, 512}));
#ifdef TYPESHARD_COMPILE_FAIL
  const auto h = ts::split_dim<2, 6>(x);
#else
  const auto h = ts::split_dim<2, 8>(x);
#endif
  return ts::to_host(h);
}
