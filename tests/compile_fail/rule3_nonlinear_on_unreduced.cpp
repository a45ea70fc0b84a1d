// expect: typeshard: rule 3 \(unreduced\): a non-linear operation on a value that is still a partial sum
// sin of a value unreduced over "y" (each device holds a partial sum): sin of the sum is not
// the sum of the sines, so the value must be reduced first.
//
// Full output (clang++ 14), one error: the note names
//   'typeshard::diagnostic::nonlinear_op_on_unreduced<typeshard::unreduced<{{121, 0, ...}, 1}>>'
// (121 is 'y'); g++ 12 prints unreduced<typeshard::detail::axis_name{"y", 1}>.
#include <utility>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using rows = ts::spec<"x", ts::none>;

#ifdef TYPESHARD_COMPILE_FAIL
using partial = ts::unreduced<"y">;
#else
using partial = ts::unreduced<>;
#endif

using array = ts::sharded_array<float, mesh_2x2, rows, ts::dextents<2>, partial>;

// The blocks of an array of the given extents, as device_put would lay them out.
array adopt(const ts::device_mesh<mesh_2x2>& m, const ts::shape<2>& extents) {
  std::vector<ts::detail::buffer<float>> blocks;
  for (std::size_t p = 0; p < mesh_2x2::size; ++p) {
    const ts::shape<2> local = array::layout_type::local_shape(extents, p);
    blocks.emplace_back(local[0] * local[1]);
  }
  return array(ts::adopt_shards, m, extents, std::move(blocks));
}

auto sine(const ts::device_mesh<mesh_2x2>& m) {
  const array u = adopt(m, {4, 4});
  auto s = ts::sin(u);
  return s * 2.0f;
}
