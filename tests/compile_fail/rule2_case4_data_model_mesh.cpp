// expect: typeshard: rule 2 \(matmul\): lhs's rows I and rhs's columns K are sharded over the same mesh axis
// Issue 18: case 4 on a (data, model) mesh. The message spells the clashing axis (clashing_axis<'m', 'o', ...>) and its fix, pasted in the twin with that axis, compiles and runs one all_gather.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_dm = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;

void f(const ts::device_mesh<mesh_2x2>& m, const ts::device_mesh<mesh_dm>& dm,
       const ts::host_tensor<float, 2>& host, const ts::host_tensor<double, 2>& host_d,
       const ts::host_tensor<int, 2>& host_i) {
  (void)m; (void)dm; (void)host; (void)host_d; (void)host_i;
  auto A = ts::device_put<ts::spec<"model", ts::none>>(dm, host);
  auto B = ts::device_put<ts::spec<ts::none, "model">>(dm, host);
#ifdef TYPESHARD_COMPILE_FAIL
  auto C = ts::matmul(A, B);
#else
  auto C = ts::matmul<ts::spec<"model", ts::none>>(A, B);
  static_assert(ts::matmul_plan_for<decltype(A), decltype(B), ts::spec<"model", ts::none>>::collectives == 1);
#endif
  (void)C;
}
