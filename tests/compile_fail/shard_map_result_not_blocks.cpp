// expect: typeshard: shard_map: the function must return a block of the mesh
// The per-device function returns a number (the block's sum), not a block: shard_map needs a
// block per out spec to assemble the result. The twin returns the block.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using rows = ts::spec<"x", ts::none>;

auto run(const ts::device_mesh<mesh_2x2>& m) {
  const auto a = ts::device_put<rows>(m, ts::host_tensor<float, 2>({4, 4}));
  const auto f = ts::shard_map<mesh_2x2, rows, rows>([](const auto& b) {
#ifdef TYPESHARD_COMPILE_FAIL
    float total = 0;
    for (float v : b.values()) total += v;
    return total;
#else
    return b * 2.0f;
#endif
  });
  return f(a);
}
