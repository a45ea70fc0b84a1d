// A program using typeshard as an installed package (or through add_subdirectory), built
// twice: header-only (typeshard_consumer) and with the separately compiled runtime
// (typeshard_consumer_runtime). It runs one sharded product and checks it.
#include <typeshard/typeshard.hpp>

#include <cstdio>

namespace ts = typeshard;
using mesh_2 = ts::mesh<ts::axis("x", 2)>;
static_assert(mesh_2::size == 2);

int main() {
  ts::cpu_devices devices{2};
  ts::device_mesh<mesh_2> m{devices};
  ts::host_tensor<float, 2> a({4, 3}, 1.0f), b({3, 2}, 2.0f);
  const auto c = ts::to_host(ts::matmul(ts::device_put<ts::spec<"x", ts::none>>(m, a),
                                        ts::device_put<ts::spec<>>(m, b)));
  for (float v : c.values())
    if (v != 6.0f) {
      std::puts("typeshard consumer: wrong product");
      return 1;
    }
#if defined(TYPESHARD_SEPARATE_COMPILATION)
  std::puts("typeshard consumer (typeshard::runtime): ok");
#else
  std::puts("typeshard consumer (header-only): ok");
#endif
  return 0;
}
