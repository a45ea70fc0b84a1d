// expect: typeshard: rule 3 \(unreduced\): to_host of a value that is still a partial sum
// A matmul's local product over a sharded contracting dimension is unreduced over "x"
// (each device holds a partial sum): copying it to the host would hand out one partial
// sum as if it were the value. The twin reduces it first with reshard, which all-reduces.
#include <utility>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using replicated = ts::spec<ts::none, ts::none>;
using partial = ts::sharded_array<float, mesh_2x2, replicated, ts::dextents<2>, ts::unreduced<"x">>;

auto fetch(const ts::device_mesh<mesh_2x2>& m) {
  std::vector<ts::detail::buffer<float>> blocks;
  for (std::size_t p = 0; p < mesh_2x2::size; ++p) blocks.emplace_back(4);
  const partial u(ts::adopt_shards, m, {2, 2}, std::move(blocks));
#ifdef TYPESHARD_COMPILE_FAIL
  return ts::to_host(u);
#else
  return ts::to_host(ts::reshard<replicated>(u));
#endif
}
