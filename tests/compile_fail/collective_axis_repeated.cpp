// expect: typeshard: rule 4 \(shard_map\): a collective names a mesh axis twice
// all_gather<"x", "x"> would gather over x twice; the note names the axis: collective_axis_repeated<'x'>.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using rows = ts::spec<"x", ts::none>;

auto total(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<float, 2>& h) {
  const auto a = ts::device_put<rows>(m, h);
  const auto f = ts::shard_map<mesh_2x2, rows, ts::spec<ts::none, ts::none>>([](const auto& b) {
#ifdef TYPESHARD_COMPILE_FAIL
    return ts::all_gather<"x", "x">(b, 0);
#else
    return ts::all_gather<"x">(b, 0);
#endif
  });
  return ts::to_host(f(a));
}
