// expect: typeshard: rule 5 \(elementwise\): a dimension of static extent 1 that stretches to the other operand's extent is sharded
// A [1, 6] row sharded over x along its extent-1 dimension: only one device holds the row,
// so it cannot stretch over [4, 6] without communication. The twin leaves it unsharded.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2 = ts::mesh<ts::axis("x", 2)>;

#ifdef TYPESHARD_COMPILE_FAIL
using row_spec = ts::spec<"x", ts::none>;
#else
using row_spec = ts::spec<ts::none, ts::none>;
#endif

ts::host_tensor<float, 2> add_row(const ts::device_mesh<mesh_2>& m,
                                  const ts::host_tensor<float, 2>& a,
                                  const ts::host_tensor<float, 2>& row) {
  auto x = ts::device_put<ts::spec<"x", ts::none>, ts::extents<4, 6>>(m, a);
  auto r = ts::device_put<row_spec, ts::extents<1, 6>>(m, row);
  return ts::to_host(x * r);
}
