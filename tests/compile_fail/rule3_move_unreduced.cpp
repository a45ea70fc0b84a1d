// expect: typeshard: rule 3 \(unreduced\): ts::device_put onto another mesh of a value that is still a partial sum
// Moving a partial sum over "y" onto a mesh of another type would copy one partial sum per
// box, not their sum: reduce it first (the twin reshards, then moves).
#include <cstddef>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_4 = ts::mesh<ts::axis("d", 4)>;

std::size_t row_sums_on_4(const ts::device_mesh<mesh_2x2>& m, const ts::device_mesh<mesh_4>& other,
                          const ts::host_tensor<float, 2>& host) {
  const auto a = ts::device_put<ts::spec<"x", "y">>(m, host);
  const auto rows = ts::sum<1>(a);  // unreduced over "y"
#ifdef TYPESHARD_COMPILE_FAIL
  const auto moved = ts::device_put<ts::spec<"d">>(rows, other);
#else
  const auto moved = ts::device_put<ts::spec<"d">>(ts::reshard<ts::spec<"x">>(rows), other);
#endif
  return moved.extent(0);
}
