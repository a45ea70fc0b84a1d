// spec<...>: entries, padding to a rank, uses / dimension_of, and valid_spec (rule 1)
// positives and negatives, all at compile time.
#include <cstddef>
#include <type_traits>

#include <typeshard/core/spec.hpp>

namespace ts = typeshard;

namespace {

using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;
using mesh_3d = ts::mesh<ts::axis("x", 2), ts::axis("y", 2), ts::axis("z", 2)>;

// ---- entries ----
using p_x_none = ts::spec<"x", ts::none>;
static_assert(p_x_none::size == 2);
static_assert(p_x_none::dim(0).count == 1 && p_x_none::dim(0).axes[0] == ts::axis_name("x"));
static_assert(p_x_none::dim(1).is_none());
static_assert(p_x_none::dim(7).is_none());  // past the end: none

using p_xy = ts::spec<ts::axes("x", "y"), ts::none>;
static_assert(p_xy::dim(0).count == 2);
static_assert(p_xy::dim(0).axes[0] == ts::axis_name("x") && p_xy::dim(0).axes[1] == ts::axis_name("y"));
static_assert(ts::spec<>::size == 0);

// ts::axes("x") is the same entry as "x"; axes order matters (first axis major).
static_assert(std::is_same_v<ts::spec<ts::axes("x")>, ts::spec<"x">>);
static_assert(!std::is_same_v<ts::spec<ts::axes("x", "y")>, ts::spec<ts::axes("y", "x")>>);
static_assert(!std::is_same_v<ts::spec<"x", ts::none>, ts::spec<ts::none, "x">>);
static_assert(ts::dim_spec(ts::none) == ts::dim_spec{});

// ---- uses / dimension_of ----
using p_none_zx_y = ts::spec<ts::none, ts::axes("z", "x"), "y">;
static_assert(p_none_zx_y::uses("x") && p_none_zx_y::uses("y") && p_none_zx_y::uses("z"));
static_assert(!p_none_zx_y::uses("w") && !ts::spec<>::uses("x"));
static_assert(p_none_zx_y::dimension_of("z") == 1 && p_none_zx_y::dimension_of("x") == 1);
static_assert(p_none_zx_y::dimension_of("y") == 2);
static_assert(p_none_zx_y::dimension_of("w") == p_none_zx_y::size);  // not used: size
static_assert(p_x_none::dim(0).uses("x") && !p_x_none::dim(0).uses("y") && !p_x_none::dim(1).uses("x"));

// ---- padded_spec: the canonical form an array's type carries ----
template <class Spec, std::size_t Rank>
using padded = typename ts::detail::padded_spec<Spec, Rank>::type;
static_assert(std::is_same_v<padded<ts::spec<"x">, 2>, ts::spec<"x", ts::none>>);
static_assert(std::is_same_v<padded<ts::spec<>, 3>, ts::spec<ts::none, ts::none, ts::none>>);
static_assert(std::is_same_v<padded<ts::spec<"x", "y">, 2>, ts::spec<"x", "y">>);
static_assert(std::is_same_v<padded<p_xy, 3>, ts::spec<ts::axes("x", "y"), ts::none, ts::none>>);
// Padding twice changes nothing; a spec longer than the rank is left for check_spec to report.
static_assert(std::is_same_v<padded<padded<ts::spec<"y">, 2>, 2>, padded<ts::spec<"y">, 2>>);
static_assert(std::is_same_v<padded<ts::spec<"x", "y", ts::none>, 2>, ts::spec<"x", "y", ts::none>>);

// ---- valid_spec (rule 1), positives ----
static_assert(ts::valid_spec<mesh_2x4, ts::spec<>, 1>);
static_assert(ts::valid_spec<mesh_2x4, ts::spec<"x", "y">, 2>);
static_assert(ts::valid_spec<mesh_2x4, ts::spec<"y", "x">, 2>);
static_assert(ts::valid_spec<mesh_2x4, ts::spec<"x">, 3>);  // shorter than the rank
static_assert(ts::valid_spec<mesh_2x4, ts::spec<ts::none, ts::axes("y", "x")>, 2>);
static_assert(ts::valid_spec<mesh_2x4, ts::spec<ts::none, ts::none, ts::none>, 3>);
static_assert(ts::valid_spec<mesh_3d, ts::spec<ts::axes("z", "x"), ts::none, "y">, 3>);
static_assert(ts::valid_spec<mesh_3d, ts::spec<ts::axes("x", "y", "z")>, 1>);

// ---- valid_spec (rule 1), negatives ----
// an axis the mesh does not have
static_assert(!ts::valid_spec<mesh_2x4, ts::spec<"z">, 1>);
static_assert(!ts::valid_spec<mesh_2x4, ts::spec<ts::none, ts::axes("x", "z")>, 2>);
static_assert(!ts::valid_spec<mesh_2x4, ts::spec<"X">, 1>);  // names are case-sensitive
// a mesh axis twice: across dimensions, within one dimension
static_assert(!ts::valid_spec<mesh_2x4, ts::spec<"x", "x">, 2>);
static_assert(!ts::valid_spec<mesh_2x4, ts::spec<ts::axes("x", "x")>, 1>);
static_assert(!ts::valid_spec<mesh_3d, ts::spec<ts::axes("x", "y"), ts::axes("z", "y")>, 2>);
static_assert(!ts::valid_spec<mesh_3d, ts::spec<"y", ts::none, ts::axes("z", "y")>, 3>);
// more entries than dimensions
static_assert(!ts::valid_spec<mesh_2x4, ts::spec<"x", "y">, 1>);
static_assert(!ts::valid_spec<mesh_2x4, ts::spec<ts::none, ts::none>, 1>);

// ---- the problem reported first: too long, then unknown axis, then repetition ----
using problem = ts::detail::spec_problem;
static_assert(ts::detail::find_spec_problem<mesh_2x4, ts::spec<"z", "z", "z">, 2>().what == problem::too_long);
static_assert(ts::detail::find_spec_problem<mesh_2x4, ts::spec<"x", "x", "z">, 3>().what == problem::repeated_axis);
constexpr problem unknown = ts::detail::find_spec_problem<mesh_2x4, ts::spec<"y", "w">, 2>();
static_assert(unknown.what == problem::unknown_axis && unknown.axis == ts::axis_name("w"));
constexpr problem twice = ts::detail::find_spec_problem<mesh_3d, ts::spec<ts::axes("z", "y"), "y">, 2>();
static_assert(twice.what == problem::repeated_axis && twice.axis == ts::axis_name("y"));
// check_spec agrees with valid_spec on valid specs (and fires no diagnostic for them).
static_assert(ts::detail::check_spec<mesh_3d, ts::spec<ts::axes("z", "x"), ts::none, "y">, 3>());

// ---- the spec concept ----
static_assert(ts::spec_like<p_xy> && !ts::spec_like<int> && !ts::spec_like<ts::dim_spec>);

}  // namespace
