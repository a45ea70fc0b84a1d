// expect: typeshard: rule 3 \(unreduced\): a non-linear operation on a value that is still a partial sum
// x + 1 on a partial sum over "y" would add 1 once per partial sum (twice on a mesh with
// y = 2): not linear, so reduce first. (2 * x is linear and compiles.)
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

ts::host_tensor<float, 1> row_sums_plus_one(const ts::device_mesh<mesh_2x2>& m,
                                            const ts::host_tensor<float, 2>& host) {
  auto a = ts::device_put<ts::spec<"x", "y">>(m, host);
  auto rows = ts::sum<1>(a);  // unreduced over "y"
#ifdef TYPESHARD_COMPILE_FAIL
  auto shifted = rows + 1.0f;
#else
  auto shifted = ts::reshard<ts::spec<"x">>(rows) + 1.0f;
#endif
  return ts::to_host(ts::reshard<ts::spec<"x">>(shifted));
}
