// expect: typeshard: rule 3 \(unreduced\): an axis is both unreduced and sharding a dimension
// A value that is a partial sum over "x" cannot also be split over "x" (the devices of
// "x" would hold different elements, not partial sums of the same ones), so reshard
// refuses it. The twin's partial sum is over "y", which the spec leaves free.
//
// The note names the axis: 'typeshard::diagnostic::unreduced_axis_also_shards<'x'>'.
#include <utility>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using rows = ts::spec<"x", ts::none>;
#ifdef TYPESHARD_COMPILE_FAIL
using partial_axes = ts::unreduced<"x">;
#else
using partial_axes = ts::unreduced<"y">;
#endif
using partial = ts::sharded_array<float, mesh_2x2, rows, ts::dextents<2>, partial_axes>;

auto reduce(const ts::device_mesh<mesh_2x2>& m) {
  std::vector<ts::detail::buffer<float>> blocks;
  for (std::size_t p = 0; p < mesh_2x2::size; ++p) blocks.emplace_back(2);
  const partial u(ts::adopt_shards, m, {2, 2}, std::move(blocks));
  return ts::reshard<ts::spec<ts::none, ts::none>>(u);
}
