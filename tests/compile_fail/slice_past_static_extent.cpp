// expect: typeshard: ts::slice_in_dim<Dim, Start, Size>: the range \[Start, Start \+ Size\) ends past
// The static range [10, 13) of a dimension of static extent 12; the twin takes [9, 12).
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

double first(const ts::device_mesh<mesh>& m) {
  const auto x = ts::device_put<ts::spec<"x", "y">, ts::extents<6, 12>>(
      m, ts::host_tensor<double, 2>({6, 12}));
#ifdef TYPESHARD_COMPILE_FAIL
  const auto y = ts::slice_in_dim<1, 10, 3>(x);
#else
  const auto y = ts::slice_in_dim<1, 9, 3>(x);
#endif
  return ts::to_host(y).data()[0];
}
