// expect: typeshard: mesh: an axis name appears twice in the mesh. fix: give every mesh axis a distinct name
// A mesh whose two axes share a name: which one would spec<"x"> mean?
//
// Full output (clang++ 14; g++ 12 shows the name as axis_name{"x", 1} in its "required from"
// line instead):
//   diagnostics.hpp:20:5: error: static_assert failed due to requirement
//       'detail::always_false_chars<'x'>' "typeshard: mesh: an axis name appears twice in the
//       mesh; fix: give every mesh axis a distinct name"
//   diagnose.hpp:46:84: note: in instantiation of member function
//       'typeshard::diagnostic::duplicate_mesh_axis<'x'>::fire' requested here
//   mesh.hpp:77:73: note: in instantiation of static data member ...
//   mesh_duplicate_axis.cpp: note: in instantiation of template class 'typeshard::mesh<...>'
#include <typeshard/core/mesh.hpp>

namespace ts = typeshard;

#ifdef TYPESHARD_COMPILE_FAIL
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("x", 2)>;
#else
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
#endif

static_assert(mesh_2x2::size == 4);
