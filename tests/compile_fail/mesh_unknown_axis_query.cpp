// expect: typeshard: mesh: no axis of that name in the mesh. fix: query one of the names the mesh was declared with
// mesh::axis_size<"z"> / axis_index<"z"> on a mesh without a "z" axis.
//
// Full output (clang++ 14): the queried name is readable in the note:
//   diagnostics.hpp:39:5: error: static_assert failed due to requirement
//       'detail::always_false_chars<'z'>' "typeshard: mesh: no axis of that name in the mesh;
//       fix: query one of the names the mesh was declared with"
//   diagnose.hpp:46:84: note: in instantiation of member function
//       'typeshard::diagnostic::mesh_has_no_such_axis<'z'>::fire' requested here
// (g++ 12: "required from ... require_named<false, typeshard::detail::axis_name{"z", 1}, ...").
#include <cstddef>

#include <typeshard/core/mesh.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

#ifdef TYPESHARD_COMPILE_FAIL
constexpr std::size_t model_axis_size = mesh_2x2::axis_size<"z">;
#else
constexpr std::size_t model_axis_size = mesh_2x2::axis_size<"y">;
#endif

static_assert(model_axis_size >= 1);
