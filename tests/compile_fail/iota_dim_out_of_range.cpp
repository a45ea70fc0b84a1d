// expect: typeshard: ts::iota: the counting dimension is out of range for the shape's rank
// Counting along dimension 2 of a rank-2 shape; the twin counts along the last dimension, 1.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

float column(const ts::device_mesh<mesh>& m) {
#ifdef TYPESHARD_COMPILE_FAIL
  auto i = ts::iota<float, ts::spec<"x", "y">, 2>(m, ts::shape<2>{4, 4});
#else
  auto i = ts::iota<float, ts::spec<"x", "y">, 1>(m, ts::shape<2>{4, 4});
#endif
  return ts::to_host(i).data()[1];
}
