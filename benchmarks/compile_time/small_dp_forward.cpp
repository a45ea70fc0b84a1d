// Compile-time report, small program 2: a data-parallel forward step (batch sharded over
// "data", weights replicated): two products and an elementwise activation.
#include <cstdio>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_8 = ts::mesh<ts::axis("data", 8)>;

int main() {
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_8> m{devices};
  ts::host_tensor<float, 2> x({64, 32}, 0.5f), w1({32, 64}, 0.25f), w2({64, 16}, 0.125f);
  const auto X = ts::device_put<ts::spec<"data", ts::none>>(m, x);
  const auto W1 = ts::device_put<ts::spec<>>(m, w1);
  const auto W2 = ts::device_put<ts::spec<>>(m, w2);
  const auto H = ts::tanh(ts::matmul(X, W1));
  const auto Y = ts::to_host(ts::matmul(H, W2));
  std::printf("y[0,0] = %g\n", double(Y(0, 0)));
  return 0;
}
