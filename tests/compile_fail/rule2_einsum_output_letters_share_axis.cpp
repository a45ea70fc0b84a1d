// expect: typeshard: rule 2 \(einsum\): a free letter of lhs and a free letter of rhs are sharded over the same mesh axis
// "bsd,df->bsf" with S and F both over model: the result would use model twice. The twin pastes the fix the message gives (the axis spelled by clashing_output_axis<...>): one all_gather.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_dm = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;

void f(const ts::device_mesh<mesh_2x2>& m, const ts::device_mesh<mesh_dm>& dm,
       const ts::host_tensor<float, 2>& host, const ts::host_tensor<double, 2>& host_d,
       const ts::host_tensor<int, 2>& host_i) {
  (void)m; (void)dm; (void)host; (void)host_d; (void)host_i;
  ts::host_tensor<float, 3> x({2, 4, 4});
  auto X = ts::device_put<ts::spec<ts::none, "model", ts::none>>(dm, x);
  auto W = ts::device_put<ts::spec<ts::none, "model">>(dm, host);
#ifdef TYPESHARD_COMPILE_FAIL
  auto C = ts::einsum<"bsd,df->bsf">(X, W);
#else
  auto C = ts::einsum<"bsd,df->bsf", ts::spec<ts::none, "model", ts::none>>(X, W);
  static_assert(ts::einsum_plan_for<"bsd,df->bsf", decltype(X), decltype(W),
                                    ts::spec<ts::none, "model", ts::none>>::collectives == 1);
#endif
  (void)C;
}
