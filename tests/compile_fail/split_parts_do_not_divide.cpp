// expect: typeshard: ts::split<Dim, N>: the dimension's static extent is not a multiple of N
// Splitting a dimension of static extent 6 into 4 equal parts; the twin splits it into 3.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

double first(const ts::device_mesh<mesh>& m) {
  const auto x = ts::device_put<ts::spec<"x", "y">, ts::extents<6, 12>>(
      m, ts::host_tensor<double, 2>({6, 12}));
#ifdef TYPESHARD_COMPILE_FAIL
  const auto parts = ts::split<0, 4>(x);
#else
  const auto parts = ts::split<0, 3>(x);
#endif
  return ts::to_host(parts[0]).data()[0];
}
