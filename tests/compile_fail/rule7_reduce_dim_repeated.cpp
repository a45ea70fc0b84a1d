// expect: typeshard: rule 7 \(reductions\): a dimension is named more than once
// ts::max<1, -1> of a matrix names dimension 1 twice (-1 is the last dimension).
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

ts::host_tensor<float, 1> column_max(const ts::device_mesh<mesh_2x2>& m,
                                     const ts::host_tensor<float, 2>& host) {
  auto a = ts::device_put<ts::spec<"x", "y">>(m, host);
#ifdef TYPESHARD_COMPILE_FAIL
  return ts::to_host(ts::max<1, -1>(a));
#else
  return ts::to_host(ts::max<1>(a));
#endif
}
