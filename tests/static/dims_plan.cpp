// The plans of the dimension moves (plan/dims_plan.hpp, rule 8) at compile time: result
// specs and extents, no communication, and the statically known problems (queried through
// plan::problem, which fires nothing; the diagnostics themselves are tests/compile_fail/rule8_*).
#include <type_traits>

#include <typeshard/plan/dims_plan.hpp>

namespace ts = typeshard;
using ts::detail::dims_problem;

namespace {

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;
using none = ts::unreduced<>;

// ---- permute: entries and extents move with their dimensions ----------------------------
using p201 = ts::permute_plan<mesh_2x2, ts::spec<"x", "y">, ts::extents<4, ts::dyn, 6>, none, 2, 0, 1>;
static_assert(p201::valid && ts::communication_free<p201> && p201::steps.size() == 0);
static_assert(std::is_same_v<p201::out_spec, ts::spec<ts::none, "x", "y">>);
static_assert(std::is_same_v<p201::out_extents, ts::extents<6, 4, ts::dyn>>);
static_assert(p201::out_shape({4, 5, 6}) == ts::shape<3>{6, 4, 5});
static_assert(p201::copies_data && p201::bytes_per_device == 0 && p201::collectives == 0);
using identity = ts::permute_plan<mesh_2x2, ts::spec<"x">, ts::dextents<2>, none, 0, 1>;
static_assert(identity::valid && !identity::copies_data);
// unreduced values stay unreduced (a permutation is linear)
using partial = ts::permute_plan<mesh_2x2, ts::spec<"x">, ts::dextents<2>, ts::unreduced<"y">, 1, 0>;
static_assert(std::is_same_v<partial::out_unreduced, ts::unreduced<"y">>);
static_assert(std::is_same_v<partial::out_spec, ts::spec<ts::none, "x">>);
// several axes in one entry move together
using multi = ts::permute_plan<mesh_2x2, ts::spec<ts::axes("y", "x"), ts::none>, ts::dextents<2>, none, 1, 0>;
static_assert(std::is_same_v<multi::out_spec, ts::spec<ts::none, ts::axes("y", "x")>>);
// not a permutation: repeated, out of range, wrong count
static_assert(ts::permute_plan<mesh_2x2, ts::spec<>, ts::dextents<2>, none, 0, 0>::problem ==
              dims_problem::permutation_invalid);
static_assert(!ts::permute_plan<mesh_2x2, ts::spec<>, ts::dextents<2>, none, 0, 2>::valid);
static_assert(!ts::permute_plan<mesh_2x2, ts::spec<>, ts::dextents<3>, none, 1, 0>::valid);

// ---- split_dim ---------------------------------------------------------------------------
// D = 512 over "model"-like y (4 shards) into 8 heads: local for any extent (8 % 4 == 0).
using heads = ts::split_dim_plan<mesh_2x4, ts::spec<"x", ts::none, "y">, ts::extents<ts::dyn, ts::dyn, 512>, none, 2, 8>;
static_assert(heads::valid && heads::local_for_any_extent && !heads::checked_at_run_time);
static_assert(std::is_same_v<heads::out_spec, ts::spec<"x", ts::none, "y", ts::none>>);
static_assert(std::is_same_v<heads::out_extents, ts::extents<ts::dyn, ts::dyn, 8, 64>>);
static_assert(heads::out_shape({2, 3, 512}) == ts::shape<4>{2, 3, 8, 64});
static_assert(!heads::copies_data && ts::communication_free<heads>);
// 3 heads over 2 shards: uneven major blocks (2 + 1 heads) against flat blocks of 6 + 6
using three = ts::split_dim_plan<mesh_2x2, ts::spec<"x">, ts::extents<12>, none, 0, 3>;
static_assert(three::problem == dims_problem::split_needs_communication);
// ... but 3 -> (3, 1): a minor extent of 1 keeps the blocks
static_assert(ts::split_dim_plan<mesh_2x2, ts::spec<"x">, ts::extents<3>, none, 0, 3>::valid);
// uneven flat blocks are fine when the heads divide: 4 heads of 3 over 2 shards of 2 heads
static_assert(ts::split_dim_plan<mesh_2x2, ts::spec<"x">, ts::extents<12>, none, 0, 4>::valid);
// over both axes (4 shards): 8 parts local, 2 parts not
static_assert(ts::split_dim_plan<mesh_2x2, ts::spec<ts::axes("x", "y")>, ts::extents<16>, none, 0, 8>::valid);
static_assert(!ts::split_dim_plan<mesh_2x2, ts::spec<ts::axes("x", "y")>, ts::extents<16>, none, 0, 2>::valid);
// an unsharded dimension splits anywhere
static_assert(ts::split_dim_plan<mesh_2x2, ts::spec<ts::none, "x">, ts::extents<15, 4>, none, 0, 5>::valid);
static_assert(ts::split_dim_plan<mesh_2x2, ts::spec<>, ts::extents<15>, none, 0, 4>::problem ==
              dims_problem::split_not_divisible);
static_assert(ts::split_dim_plan<mesh_2x2, ts::spec<>, ts::extents<15>, none, 0, 0>::problem ==
              dims_problem::split_not_divisible);
static_assert(ts::split_dim_plan<mesh_2x2, ts::spec<>, ts::extents<15>, none, 1, 3>::problem ==
              dims_problem::dimension_out_of_range);
// dynamic extent, parts not a multiple of the shards: decided when it runs
static_assert(ts::split_dim_plan<mesh_2x2, ts::spec<"x">, ts::dextents<1>, none, 0, 3>::checked_at_run_time);

// ---- merge_dims --------------------------------------------------------------------------
using merged = ts::merge_dims_plan<mesh_2x4, heads::out_spec, heads::out_extents, none, 2>;
static_assert(merged::valid && std::is_same_v<merged::out_spec, ts::spec<"x", ts::none, "y">>);
static_assert(std::is_same_v<merged::out_extents, ts::extents<ts::dyn, ts::dyn, 512>>);
static_assert(merged::out_shape({2, 3, 8, 64}) == ts::shape<3>{2, 3, 512});
static_assert(ts::merge_dims_plan<mesh_2x2, ts::spec<ts::none, "x">, ts::dextents<2>, none, 0>::problem ==
              dims_problem::merge_minor_sharded);
static_assert(ts::merge_dims_plan<mesh_2x2, ts::spec<"x">, ts::extents<3, 4>, none, 0>::problem ==
              dims_problem::merge_needs_communication);
static_assert(ts::merge_dims_plan<mesh_2x2, ts::spec<"x">, ts::extents<3, 1>, none, 0>::valid);
static_assert(ts::merge_dims_plan<mesh_2x2, ts::spec<"x">, ts::dextents<2>, none, 0>::checked_at_run_time);
static_assert(ts::merge_dims_plan<mesh_2x2, ts::spec<"x">, ts::dextents<2>, none, 1>::problem ==
              dims_problem::dimension_out_of_range);
static_assert(ts::merge_dims_plan<mesh_2x2, ts::spec<"x">, ts::dextents<1>, none, 0>::problem ==
              dims_problem::dimension_out_of_range);

// The closed form against the block arithmetic, for every small case.
constexpr bool condition_matches_blocks() {
  for (std::size_t k = 1; k <= 8; ++k)
    for (std::size_t n = 0; n <= 40; ++n)
      for (std::size_t parts = 1; parts <= n + 1; ++parts) {
        if (n % parts) continue;
        bool agree = true;
        for (std::size_t i = 0; i < k; ++i) {
          const ts::slice flat = ts::shard_slice(n, k, i), major = ts::shard_slice(parts, k, i);
          agree = agree && flat.start == major.start * (n / parts) && flat.stop == major.stop * (n / parts);
        }
        if (agree != ts::detail::split_keeps_blocks(n, parts, k)) return false;
        // sufficient (the messages' fix): k divides parts, or a minor extent of 1
        if ((parts % k == 0 || n / parts == 1) && !agree) return false;
      }
  return true;
}
static_assert(condition_matches_blocks());

}  // namespace
