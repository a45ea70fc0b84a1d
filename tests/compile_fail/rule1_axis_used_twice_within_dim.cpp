// expect: typeshard: rule 1 \(spec\): a mesh axis appears more than once in the spec
// P(('x', 'x'),): one dimension sharded twice over the same axis.
//
// Full output (clang++ 14), one error; the repeated axis is spelled in the first note:
//   diagnostics.hpp:60:5: error: static_assert failed due to requirement
//       'detail::always_false_chars<'x'>' "typeshard: rule 1 (spec): a mesh axis appears more
//       than once in the spec; fix: ..."
//   diagnose.hpp:46:84: note: in instantiation of member function
//       'typeshard::diagnostic::axis_used_twice<'x'>::fire' requested here
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

#ifdef TYPESHARD_COMPILE_FAIL
using rows = ts::spec<ts::axes("x", "x"), ts::none>;
#else
using rows = ts::spec<ts::axes("x", "y"), ts::none>;
#endif

ts::host_tensor<float, 2> round_trip(const ts::device_mesh<mesh_2x2>& m,
                                     const ts::host_tensor<float, 2>& host) {
  auto a = ts::device_put<rows>(m, host);
  return ts::to_host(a * 2.0f);
}
