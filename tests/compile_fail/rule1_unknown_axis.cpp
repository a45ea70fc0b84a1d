// expect: typeshard: rule 1 \(spec\): the spec names an axis the mesh does not have
// device_put with P('z', None) on a mesh of axes x and y.
//
// Full output (clang++ 14), one error; the offending axis is spelled in the first note:
//   diagnostics.hpp:50:5: error: static_assert failed due to requirement
//       'detail::always_false_chars<'z'>' "typeshard: rule 1 (spec): the spec names an axis
//       the mesh does not have; fix: use one of the mesh's axis names, or add the axis to the
//       mesh"
//   diagnose.hpp:46:84: note: in instantiation of member function
//       'typeshard::diagnostic::axis_not_in_mesh<'z'>::fire' requested here
//   spec.hpp:163:62: note: in instantiation of static data member
//       'typeshard::detail::require_named<false, {{122, 0, ...}, 1}, ...>::value' requested here
//   sharded_array.hpp:76:25: note: in instantiation of function template specialization
//       'typeshard::detail::check_spec<...>' requested here
// g++ 12 prints the name in its "required from" line:
//   require_named<false, typeshard::detail::axis_name{"z", 1}, ...axis_not_in_mesh>::value
// The uses of the array after device_put must add no further error.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

#ifdef TYPESHARD_COMPILE_FAIL
using rows = ts::spec<"z", ts::none>;
#else
using rows = ts::spec<"y", ts::none>;
#endif

ts::host_tensor<float, 2> round_trip(const ts::device_mesh<mesh_2x2>& m,
                                     const ts::host_tensor<float, 2>& host) {
  auto a = ts::device_put<rows>(m, host);
  auto b = a + a;
  return ts::to_host(b);
}
