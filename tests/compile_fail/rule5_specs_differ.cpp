// expect: typeshard: rule 5 \(elementwise\): the operands have different specs \(a dimension is sharded over different mesh axes in the two\); fix: bring one to the other's spec first with ts::reshard
// P('x', None) + P('y', None): rows sharded over x in one, over y in the other; JAX's explicit
// mode refuses to pick a sharding for the result.
//
// Full output (clang++ 14), one error: the note names
//   'typeshard::diagnostic::elementwise_specs_differ<typeshard::spec<...>, typeshard::spec<...>>'
// with both specs' axis names printed as character codes ({{120, 0, ...}, 1} is "x").
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

#ifdef TYPESHARD_COMPILE_FAIL
using other = ts::spec<"y", ts::none>;
#else
using other = ts::spec<"x", ts::none>;
#endif

ts::host_tensor<float, 2> sum(const ts::device_mesh<mesh_2x2>& m,
                              const ts::host_tensor<float, 2>& host) {
  auto a = ts::device_put<ts::spec<"x", ts::none>>(m, host);
  auto b = ts::device_put<other>(m, host);
  auto c = a + b;
  return ts::to_host(ts::exp(c));
}
