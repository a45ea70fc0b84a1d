// expect: typeshard: rule 9 \(gradients\): an optimizer step takes a gradient of the parameter's element type, or a bfloat16 gradient for a float parameter
// A bfloat16 parameter with a float gradient: the update would round the float master copy's
// work away. The twin updates a float master copy from the bfloat16 gradient (mixed precision).
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2 = ts::mesh<ts::axis("data", 2)>;

void step(const ts::device_mesh<mesh_2>& m, const ts::host_tensor<ts::bfloat16, 2>& x) {
  using rows = ts::spec<ts::none, ts::none>;
  const auto g = ts::matmul(ts::device_put<ts::spec<ts::none, "data">>(m, x),
                            ts::device_put<ts::spec<"data", ts::none>>(m, x));
#ifdef TYPESHARD_COMPILE_FAIL
  const auto w = ts::device_put<rows>(m, x);
  const auto w1 = ts::zero_sgd_update<ts::spec<"data", ts::none>>(w, ts::astype<float>(g),
                                                                   ts::bfloat16(0.1f));
#else
  const auto w = ts::astype<float>(ts::device_put<rows>(m, x));
  const auto w1 = ts::zero_sgd_update<ts::spec<"data", ts::none>>(w, g, 0.1f);
#endif
  (void)w1;
}
