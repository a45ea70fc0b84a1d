// expect: typeshard: ts::concat: the operands differ in element type, rank, mesh, spec or
// Joining an array sharded over "x" in its rows with one sharded over "x" in its columns;
// the twin reshards the second to the first's spec first.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

double first(const ts::device_mesh<mesh>& m) {
  const auto a = ts::device_put<ts::spec<"x", ts::none>>(m, ts::host_tensor<double, 2>({4, 4}));
  const auto b = ts::device_put<ts::spec<ts::none, "x">>(m, ts::host_tensor<double, 2>({4, 4}));
#ifdef TYPESHARD_COMPILE_FAIL
  const auto c = ts::concat<0>(a, b);
#else
  const auto c = ts::concat<0>(a, ts::reshard<ts::spec<"x", ts::none>>(b));
#endif
  return ts::to_host(c).data()[0];
}
