// expect: typeshard: rule 8 \(dimension moves\): ts::permute<Perm...> needs a permutation of the array's dimensions
// ts::permute<0, 0, 1> names dimension 0 twice and forgets dimension 2. The twin names each
// dimension once.
//
// The note names the rank and how many dimensions were given:
// 'typeshard::diagnostic::permutation_invalid<3, 3>'.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

auto moved(const ts::device_mesh<mesh_2x2>& m) {
  const auto x = ts::device_put<ts::spec<"x", ts::none, "y">>(m, ts::host_tensor<float, 3>({2, 3, 4}));
#ifdef TYPESHARD_COMPILE_FAIL
  const auto y = ts::permute<0, 0, 1>(x);
#else
  const auto y = ts::permute<0, 2, 1>(x);
#endif
  return ts::to_host(y);
}
