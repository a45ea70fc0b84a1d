// expect: typeshard: mesh: no axis of that name in the mesh
// A collective over an axis the mesh does not have ("z" on an ("x", "y") mesh) is caught
// at compile time, with the axis named. The twin sums over "y".
//
// The note names the axis: 'typeshard::diagnostic::mesh_has_no_such_axis<'z'>'.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using rows = ts::spec<"x", ts::none>;

auto sum(const ts::device_mesh<mesh_2x2>& m) {
  const auto a = ts::device_put<rows>(m, ts::host_tensor<float, 2>({4, 4}));
  const auto f = ts::shard_map<mesh_2x2, rows, rows>([](const auto& b) {
#ifdef TYPESHARD_COMPILE_FAIL
    return ts::psum<"z">(b);
#else
    return ts::psum<"y">(b);
#endif
  });
  return f(a);
}
