// expect: typeshard: rule 3 \(unreduced\): a non-linear operation on a value that is still a partial sum
// ts::max of a partial sum: the maximum of the partial sums is not the maximum of their sum,
// so the plan has no collective that could give it; reduce first (ts::sum is fine: linear).
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

ts::host_tensor<float, 0> max_of_row_sums(const ts::device_mesh<mesh_2x2>& m,
                                          const ts::host_tensor<float, 2>& host) {
  auto a = ts::device_put<ts::spec<"x", "y">>(m, host);
  auto row_sums = ts::sum<1>(a);  // unreduced over "y"
#ifdef TYPESHARD_COMPILE_FAIL
  auto top = ts::max(row_sums);
#else
  auto top = ts::max(ts::reshard<ts::spec<"x">>(row_sums));
#endif
  return ts::to_host(top);
}
