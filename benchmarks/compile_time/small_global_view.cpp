// Compile-time report, small program 5: a transformer-style layer in the global view (issue
// 15's ops): an einsum over a rank-3 activation, a bias added by broadcasting, a softmax along
// the feature dimension and a mean loss over everything, on a ("data", "model") mesh.
#include <cstdio>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x4 = ts::mesh<ts::axis("data", 2), ts::axis("model", 4)>;

int main() {
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_2x4> m{devices};
  ts::host_tensor<float, 3> x({4, 8, 16}, 0.5f);
  ts::host_tensor<float, 2> w({16, 32}, 0.25f);
  ts::host_tensor<float, 1> b({32}, 0.125f);
  const auto X = ts::device_put<ts::spec<"data", ts::none, ts::none>>(m, x);
  const auto W = ts::device_put<ts::spec<ts::none, "model">>(m, w);
  const auto B = ts::device_put<ts::spec<"model">>(m, b);
  const auto H = ts::einsum<"bsd,df->bsf">(X, W) + B;  // column-parallel, bias broadcast
  const auto P = ts::softmax<2>(H);                    // row statistics over "model"
  const auto loss = ts::to_host(ts::reshard<ts::spec<>>(ts::mean(P)));
  std::printf("loss = %g\n", double(loss()));
  return 0;
}
