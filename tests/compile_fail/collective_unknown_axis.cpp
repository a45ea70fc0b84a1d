// expect: typeshard: rule 4 \(shard_map\): a collective names an axis the mesh does not have
// A collective over an axis the mesh does not have (psum<"batch"> on an ("x", "y") mesh) is
// caught at compile time, with the axis named, and is the only error: the block it returns
// claims no varying axis (so the replicated out spec adds no rule 4 error) and the
// shard_map's result keeps its array type (so to_host compiles on). Issue 18's reproducer,
// which gave 3 errors. The twin sums over "y".
//
// The note names the axis: 'typeshard::diagnostic::collective_unknown_axis<'b', 'a', 't',
// 'c', 'h'>'.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using rows = ts::spec<"x", ts::none>;
using cols = ts::spec<ts::none, "y">;

auto sum(const ts::device_mesh<mesh_2x2>& m) {
  const auto a = ts::device_put<rows>(m, ts::host_tensor<float, 2>({4, 4}));
  const auto f = ts::shard_map<mesh_2x2, cols, ts::spec<ts::none, ts::none>>([](const auto& b) {
#ifdef TYPESHARD_COMPILE_FAIL
    return ts::psum<"batch">(b);
#else
    return ts::psum<"y">(b);
#endif
  });
  return ts::to_host(f(a));
}
