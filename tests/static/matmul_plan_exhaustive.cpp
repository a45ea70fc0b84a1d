// Every (lhs, rhs) pair of matrix specs on the 2x2 mesh, enumerated at compile time (11 specs,
// 121 pairs): the planner's choice equals DESIGN rule 2 restated independently
// (tests/unit/matmul_rules.hpp), for static extents and for dynamic ones; and for every
// pair the rules allow, the typed plan's output spec, unreduced axes and communication
// agree with the rule (case 4 pairs are skipped here: instantiating their plan is the
// compile error of tests/compile_fail/rule2_case4_without_out_spec.cpp).
#include <typeshard/plan/matmul_plan.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

#include "../unit/matmul_rules.hpp"

namespace {

namespace ts = typeshard;
namespace tsd = typeshard::detail;
using namespace matmul_test;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
// The constant evaluations below enumerate the specs afresh instead of reading one constexpr
// list: g++ 12 rejects some copies out of a constexpr object (detail/contraction_members.hpp).
static_assert(all_specs<mesh_2x2, 2>().count == 11,
              "(None|x|y|(x,y)|(y,x)) x (...) without repeats: 11 specs");

// The planner against the rule for every pair, for the given extents.
constexpr bool all_pairs_follow_rule(ts::shape<2> a, ts::shape<2> b, bool nominal) {
  const auto specs = all_specs<mesh_2x2, 2>();
  tsd::einsum_shapes<2> sh{a, b, 4};
  if (nominal) sh.lhs = sh.rhs = {4096, 4096};
  for (std::size_t i = 0; i < specs.count; ++i)
    for (std::size_t j = 0; j < specs.count; ++j) {
      const auto c = tsd::plan_matmul<mesh_2x2, 2>(specs.specs[i], specs.specs[j], false, {}, sh);
      if (!follows_rule(expect_by_rule<mesh_2x2>(specs.specs[i], specs.specs[j], sh.lhs, sh.rhs), c))
        return false;
    }
  return true;
}
static_assert(all_pairs_follow_rule({8, 8}, {8, 8}, false));
static_assert(all_pairs_follow_rule({8, 64}, {64, 4}, false));   // J gathers cost more
static_assert(all_pairs_follow_rule({64, 8}, {8, 2}, false));    // lhs is the big one
static_assert(all_pairs_follow_rule({5, 7}, {7, 3}, false));     // uneven
static_assert(all_pairs_follow_rule({0, 0}, {0, 0}, true));      // dynamic: all extents equal

// How many pairs are case 4 (I and K share an axis): counted, not assumed.
constexpr std::size_t case4_pairs() {
  const auto specs = all_specs<mesh_2x2, 2>();
  std::size_t n = 0;
  const tsd::einsum_shapes<2> sh{{8, 8}, {8, 8}, 4};
  for (std::size_t i = 0; i < specs.count; ++i)
    for (std::size_t j = 0; j < specs.count; ++j)
      n += tsd::plan_matmul<mesh_2x2, 2>(specs.specs[i], specs.specs[j], false, {}, sh).problem ==
           tsd::einsum_problem::output_letters_share_axis;
  return n;
}
static_assert(case4_pairs() > 0 && case4_pairs() < 121);

constexpr ts::dim_spec spec_entry(std::size_t i, std::size_t d) { return all_specs<mesh_2x2, 2>().specs[i][d]; }
template <std::size_t I>
using spec_t = ts::spec<spec_entry(I, 0), spec_entry(I, 1)>;

constexpr rule_expectation<2> expectation(std::size_t i, std::size_t j) {
  const auto specs = all_specs<mesh_2x2, 2>();
  return expect_by_rule<mesh_2x2>(specs.specs[i], specs.specs[j], {8, 8}, {8, 8});
}
constexpr bool gemm_reads_inputs(std::size_t i, std::size_t j) {
  const auto specs = all_specs<mesh_2x2, 2>();
  const auto e = expect_by_rule<mesh_2x2>(specs.specs[i], specs.specs[j], {8, 8}, {8, 8});
  return e.lhs_gemm == specs.specs[i] && e.rhs_gemm == specs.specs[j];
}

// The typed plan of pair (I, J) against the rule.
template <std::size_t I, std::size_t J>
constexpr bool typed_pair_follows_rule() {
  constexpr auto e = expectation(I, J);
  if constexpr (e.problem != tsd::einsum_problem::none) {
    return true;  // a compile error when instantiated (see the header comment)
  } else {
    using plan = ts::matmul_plan<mesh_2x2, spec_t<I>, spec_t<J>, ts::auto_out, ts::extents<8, 8>>;
    using want_out = decltype(tsd::spec_from<e.out>(std::make_index_sequence<2>{}));
    using want_unreduced =
        decltype(tsd::unreduced_from<e.unreduced>(std::make_index_sequence<e.unreduced.count>{}));
    constexpr bool moves = !gemm_reads_inputs(I, J);
    return plan::valid && std::is_same_v<typename plan::out_spec, want_out> &&
           std::is_same_v<typename plan::out_unreduced, want_unreduced> &&
           ts::communication_free<plan> == !moves &&
           (plan::bytes_per_device == 0) == !moves &&
           plan::steps.size() >= 1;
  }
}

template <std::size_t... P>
constexpr bool all_typed(std::index_sequence<P...>) {
  return (typed_pair_follows_rule<P / 11, P % 11>() && ...);
}
static_assert(all_typed(std::make_index_sequence<121>{}));

}  // namespace
