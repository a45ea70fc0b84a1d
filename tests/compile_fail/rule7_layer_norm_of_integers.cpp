// expect: typeshard: rule 7 \(reductions\): ts::layer_norm needs floating-point elements
// The mean and variance of integers would truncate: convert first.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

#ifdef TYPESHARD_COMPILE_FAIL
using element = int;
#else
using element = double;
#endif

ts::host_tensor<element, 2> normalized_rows(const ts::device_mesh<mesh_2x2>& m,
                                            const ts::host_tensor<element, 2>& host) {
  auto a = ts::device_put<ts::spec<"x", "y">>(m, host);
  return ts::to_host(ts::layer_norm<1>(a));
}
