// expect: typeshard: rule 2 \(einsum\): the per-shard GEMM supports float, double and bfloat16
// int elements: the local product is a GEMM of float or double.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_dm = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;

void f(const ts::device_mesh<mesh_2x2>& m, const ts::device_mesh<mesh_dm>& dm,
       const ts::host_tensor<float, 2>& host, const ts::host_tensor<double, 2>& host_d,
       const ts::host_tensor<int, 2>& host_i) {
  (void)m; (void)dm; (void)host; (void)host_d; (void)host_i;

#ifdef TYPESHARD_COMPILE_FAIL
  auto A = ts::device_put<ts::spec<"x", ts::none>>(m, host_i);
  auto C = ts::einsum<"ij,jk->ik">(A, A);
#else
  auto A = ts::device_put<ts::spec<"x", ts::none>>(m, host);
  auto C = ts::einsum<"ij,jk->ik">(A, A);
#endif
  (void)C;
}
