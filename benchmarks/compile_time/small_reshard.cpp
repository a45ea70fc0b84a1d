// Compile-time report, small program 4: a reshard and its picture.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

int main() {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  ts::host_tensor<float, 2> a({8, 8}, 1.0f);
  const auto A = ts::device_put<ts::spec<"x", "y">>(m, a);
  const auto B = ts::reshard<ts::spec<"y", ts::none>>(A);
  ts::visualize(B);
  return 0;
}
