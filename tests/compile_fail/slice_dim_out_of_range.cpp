// expect: typeshard: ts::slice_in_dim / ts::split / ts::concat: the dimension is out of range
// Slicing dimension 2 of a rank-2 array; the twin slices its last dimension, 1.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

double first(const ts::device_mesh<mesh>& m) {
  const auto x = ts::device_put<ts::spec<"x", "y">>(m, ts::host_tensor<double, 2>({4, 4}));
#ifdef TYPESHARD_COMPILE_FAIL
  const auto y = ts::slice_in_dim<2>(x, 0, 1);
#else
  const auto y = ts::slice_in_dim<1>(x, 0, 1);
#endif
  return ts::to_host(y).data()[0];
}
