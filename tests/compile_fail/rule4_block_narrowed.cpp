// expect: typeshard: rule 4 \(shard_map\): a block cannot be retyped as varying over fewer axes
// Retyping a block that varies over "x" as one that does not would let it pass as
// replicated; only widening is allowed (JAX's pvary). The twin widens instead.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using rows = ts::spec<"x", ts::none>;

auto narrow(const ts::device_mesh<mesh_2x2>& m) {
  const auto a = ts::device_put<rows>(m, ts::host_tensor<float, 2>({4, 4}));
  const auto f = ts::shard_map<mesh_2x2, rows, rows>([](const auto& b) {
#ifdef TYPESHARD_COMPILE_FAIL
    return b.template as_varying<ts::vary<mesh_2x2>>();  // varying over nothing
#else
    return b.template as_varying<ts::vary<mesh_2x2, "x">>();  // what it is: allowed
#endif
  });
  return f(a);
}
