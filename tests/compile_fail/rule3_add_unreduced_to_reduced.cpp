// expect: typeshard: rule 3 \(unreduced\): adding values that are unreduced over different mesh axes
// A partial sum over "y" plus a full value: adding the full value on every device would
// count it twice once the partial sums are reduced.
//
// Full output (clang++ 14), one error: the note names
//   'typeshard::diagnostic::unreduced_axes_differ<typeshard::unreduced<{{121, 0, ...}, 1}>,
//    typeshard::unreduced<>>' (121 is 'y').
#include <utility>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using rows = ts::spec<"x", ts::none>;
using partial_y = ts::sharded_array<float, mesh_2x2, rows, ts::dextents<2>, ts::unreduced<"y">>;

partial_y adopt(const ts::device_mesh<mesh_2x2>& m, const ts::shape<2>& extents) {
  std::vector<ts::detail::buffer<float>> blocks;
  for (std::size_t p = 0; p < mesh_2x2::size; ++p) {
    const ts::shape<2> local = partial_y::layout_type::local_shape(extents, p);
    blocks.emplace_back(local[0] * local[1]);
  }
  return partial_y(ts::adopt_shards, m, extents, std::move(blocks));
}

auto add(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<float, 2>& host) {
  const partial_y u = adopt(m, host.extents());
#ifdef TYPESHARD_COMPILE_FAIL
  const auto other = ts::device_put<rows>(m, host);  // fully reduced
#else
  const partial_y other = adopt(m, host.extents());  // unreduced over the same axis
#endif
  auto sum = u + other;
  return sum * 0.5f;
}
