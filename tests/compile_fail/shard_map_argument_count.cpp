// expect: typeshard: shard_map: the number of arguments differs from the number of in specs
// Two in specs, one argument; the twin passes both.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2 = ts::mesh<ts::axis("x", 2)>;
using rows = ts::spec<"x", ts::none>;

auto twice(const ts::device_mesh<mesh_2>& m, const ts::host_tensor<float, 2>& h) {
  const auto a = ts::device_put<rows>(m, h);
  const auto f = ts::shard_map<mesh_2, ts::specs<rows, rows>, rows>(
      [](const auto& x, const auto& y) { return x + y; });
#ifdef TYPESHARD_COMPILE_FAIL
  return f(a);
#else
  return f(a, a);
#endif
}
