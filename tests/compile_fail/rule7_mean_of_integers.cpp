// expect: typeshard: rule 7 \(reductions\): ts::mean, ts::softmax and ts::log_softmax need floating-point elements
// The mean of integers would truncate each partial sum's share: convert first.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

#ifdef TYPESHARD_COMPILE_FAIL
using element = int;
#else
using element = double;
#endif

ts::host_tensor<element, 1> row_means(const ts::device_mesh<mesh_2x2>& m,
                                      const ts::host_tensor<element, 2>& host) {
  auto a = ts::device_put<ts::spec<"x", ts::none>>(m, host);
  return ts::to_host(ts::mean<1>(a));
}
