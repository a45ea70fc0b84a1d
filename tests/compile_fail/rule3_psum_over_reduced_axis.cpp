// expect: typeshard: rule 3 \(unreduced\): ts::psum<.*>\(array\) over an axis the array is not unreduced over
// On a global array, psum reduces unreduced axes; "y" is not one of them (the value is
// already whole over "y"), and summing its copies would multiply it by 2. The twin sums
// over the unreduced axis "x".
//
// The note names the axis: 'typeshard::diagnostic::psum_over_reduced_axis<'y'>'.
#include <utility>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using replicated = ts::spec<ts::none, ts::none>;
using partial = ts::sharded_array<float, mesh_2x2, replicated, ts::dextents<2>, ts::unreduced<"x">>;

auto reduce(const ts::device_mesh<mesh_2x2>& m) {
  std::vector<ts::detail::buffer<float>> blocks;
  for (std::size_t p = 0; p < mesh_2x2::size; ++p) blocks.emplace_back(4);
  const partial u(ts::adopt_shards, m, {2, 2}, std::move(blocks));
#ifdef TYPESHARD_COMPILE_FAIL
  return ts::psum<"y">(u);
#else
  return ts::psum<"x">(u);
#endif
}
