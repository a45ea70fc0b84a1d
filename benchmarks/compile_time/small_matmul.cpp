// Compile-time report, small program 1: a sharded matmul on a 2x4 mesh, checked against a
// serial product.
#include <cmath>
#include <cstdio>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;

int main() {
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_2x4> m{devices};
  ts::host_tensor<float, 2> a({64, 32}), b({32, 48});
  for (std::size_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<float>(i % 7) - 3.0f;
  for (std::size_t i = 0; i < b.size(); ++i) b.data()[i] = static_cast<float>(i % 5) - 2.0f;
  const auto A = ts::device_put<ts::spec<"x", ts::none>>(m, a);
  const auto B = ts::device_put<ts::spec<ts::none, "y">>(m, b);
  const auto C = ts::to_host(ts::matmul(A, B));
  double err = 0;
  for (std::size_t i = 0; i < 64; ++i)
    for (std::size_t j = 0; j < 48; ++j) {
      double s = 0;
      for (std::size_t k = 0; k < 32; ++k) s += double(a(i, k)) * double(b(k, j));
      err = std::fmax(err, std::fabs(s - double(C(i, j))));
    }
  std::printf("max error %g\n", err);
  return err < 1e-3 ? 0 : 1;
}
