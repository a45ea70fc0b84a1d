// expect: typeshard: rule 7 \(reductions\): a dimension index is out of range for the array's rank
// ts::sum<2> of a matrix: its dimensions are 0 and 1 (or -1 and -2, counted from the last).
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

#ifdef TYPESHARD_COMPILE_FAIL
constexpr int dim = 2;
#else
constexpr int dim = -1;
#endif

ts::host_tensor<float, 1> row_sums(const ts::device_mesh<mesh_2x2>& m,
                                   const ts::host_tensor<float, 2>& host) {
  auto a = ts::device_put<ts::spec<"x", ts::none>>(m, host);
  return ts::to_host(ts::sum<dim>(a));
}
