// expect: typeshard: collectives \(all_gather, psum_scatter, all_to_all, pmax, pmin, pmean, ppermute, shift\) take a block inside ts::shard_map, not a global array
// ts::all_gather on a global array (a collective is a per-device operation): the twin names
// the spec it wants and lets the plan pick the all-gather.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using X = ts::sharded_array<float, mesh, ts::spec<"x", ts::none>, ts::dextents<2>>;

float gathered(const X& x) {
#ifdef TYPESHARD_COMPILE_FAIL
  auto g = ts::all_gather<"x">(x);
#else
  auto g = ts::reshard<ts::spec<ts::none, ts::none>>(x);
#endif
  return ts::to_host(g).data()[0];
}
