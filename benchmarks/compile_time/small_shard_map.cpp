// Compile-time report, small program 3: a shard_map body with psum and all_gather.
#include <cstdio>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_4 = ts::mesh<ts::axis("i", 4)>;

int main() {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_4> m{devices};
  ts::host_tensor<float, 1> x({16}, 1.0f);
  const auto X = ts::device_put<ts::spec<"i">>(m, x);
  const auto f = ts::shard_map<mesh_4, ts::spec<"i">, ts::spec<>>([](const auto& block) {
    const auto summed = ts::psum<"i">(block);
    return ts::all_gather<"i">(summed, 0);
  });
  const auto y = ts::to_host(f(X));
  std::printf("y[0] = %g\n", double(y(0)));
  return 0;
}
