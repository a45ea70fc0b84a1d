// expect: typeshard: shard_map: an argument lives on a different mesh type than the shard_map's
// The shard_map is declared on a 1-D mesh but given an array of a 2x2 mesh.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_4 = ts::mesh<ts::axis("x", 4)>;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using rows = ts::spec<"x", ts::none>;

#ifdef TYPESHARD_COMPILE_FAIL
using array_mesh = mesh_2x2;
#else
using array_mesh = mesh_4;
#endif

auto negate(const ts::device_mesh<array_mesh>& m, const ts::host_tensor<float, 2>& h) {
  const auto a = ts::device_put<rows>(m, h);
  const auto f = ts::shard_map<mesh_4, rows, rows>([](const auto& x) { return x * 2.0f; });
  return f(a);
}
