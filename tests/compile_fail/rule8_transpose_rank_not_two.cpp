// expect: typeshard: rule 8 \(dimension moves\): ts::transpose\(x\) needs a rank-2 array
// ts::transpose of a rank-3 array: which two dimensions? The twin says, with ts::permute.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

auto moved(const ts::device_mesh<mesh_2x2>& m) {
  const auto x = ts::device_put<ts::spec<"x", ts::none, "y">>(m, ts::host_tensor<float, 3>({2, 3, 4}));
#ifdef TYPESHARD_COMPILE_FAIL
  const auto y = ts::transpose(x);
#else
  const auto y = ts::permute<0, 2, 1>(x);
#endif
  return ts::to_host(y);
}
