// expect: typeshard: rule 8 \(dimension moves\): ts::merge_dims<Dim>: dimension Dim \+ 1 \(the minor one\) is sharded
// [H, Dh] with Dh sharded over "model" merged into D: each device would hold a strided
// slice of D, not a block. The twin shards the heads instead.
//
// The note names the dimension: 'merge_minor_sharded<0>'.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;

#ifdef TYPESHARD_COMPILE_FAIL
using heads_spec = ts::spec<ts::none, "model">;
#else
using heads_spec = ts::spec<"model", ts::none>;
#endif

auto merged(const ts::device_mesh<mesh>& m) {
  const auto h = ts::device_put<heads_spec>(m, ts::host_tensor<float, 2>({8, 4}));
  return ts::to_host(ts::merge_dims<0>(h));
}
