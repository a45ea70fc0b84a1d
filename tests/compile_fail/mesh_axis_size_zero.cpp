// expect: typeshard: mesh: an axis has size 0. fix: every mesh axis needs size >= 1
// A mesh axis of size 0 would make a mesh of no devices.
//
// Full output (clang++ 14): the position of the empty axis is the diagnostic's argument:
//   diagnostics.hpp:30:5: error: static_assert failed due to requirement
//       'detail::always_false_values<1>' "typeshard: mesh: an axis has size 0; fix: every mesh
//       axis needs size >= 1"
//   diagnose.hpp:36:45: note: in instantiation of member function
//       'typeshard::diagnostic::mesh_axis_of_size_zero<1>::fire' requested here
#include <typeshard/core/mesh.hpp>

namespace ts = typeshard;

#ifdef TYPESHARD_COMPILE_FAIL
using mesh_2xN = ts::mesh<ts::axis("x", 2), ts::axis("y", 0)>;
#else
using mesh_2xN = ts::mesh<ts::axis("x", 2), ts::axis("y", 1)>;
#endif

static_assert(mesh_2xN::rank == 2);
