// expect: typeshard: rule 5 \(elementwise\): the operands' static extents do not broadcast
// [4, 6] + [4]: trailing dimensions are aligned, so 6 meets 4 (NumPy refuses the same). The
// twin adds a [6].
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2 = ts::mesh<ts::axis("x", 2)>;

#ifdef TYPESHARD_COMPILE_FAIL
using bias_extents = ts::extents<4>;
#else
using bias_extents = ts::extents<6>;
#endif

ts::host_tensor<float, 2> add_bias(const ts::device_mesh<mesh_2>& m,
                                   const ts::host_tensor<float, 2>& a,
                                   const ts::host_tensor<float, 1>& bias) {
  auto x = ts::device_put<ts::spec<"x", ts::none>, ts::extents<4, 6>>(m, a);
  auto b = ts::device_put<ts::spec<ts::none>, bias_extents>(m, bias);
  return ts::to_host(x + b);
}
