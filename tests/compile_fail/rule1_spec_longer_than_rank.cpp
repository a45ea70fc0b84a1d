// expect: typeshard: rule 1 \(spec\): the spec has more entries than the array has dimensions
// P('x', 'y', None) for a matrix.
//
// Full output (clang++ 14), one error; the spec's length and the rank are the arguments:
//   diagnostics.hpp:71:5: error: static_assert failed due to requirement
//       'detail::always_false_values<3, 2>' "typeshard: rule 1 (spec): the spec has more
//       entries than the array has dimensions; fix: give at most one entry per dimension
//       (missing trailing entries mean ts::none)"
//   diagnose.hpp:36:45: note: in instantiation of member function
//       'typeshard::diagnostic::spec_longer_than_rank<3, 2>::fire' requested here
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

#ifdef TYPESHARD_COMPILE_FAIL
using tiles = ts::spec<"x", "y", ts::none>;
#else
using tiles = ts::spec<"x", "y">;
#endif

ts::host_tensor<float, 2> round_trip(const ts::device_mesh<mesh_2x2>& m,
                                     const ts::host_tensor<float, 2>& host) {
  auto a = ts::device_put<tiles>(m, host);
  return ts::to_host(ts::sin(a));
}
