// tests/unit/matmul_rules.hpp: compile-time helpers the matmul tests share (no runtime).
//
// - all_specs<Mesh, Rank>(): every valid spec of a rank-Rank array on Mesh, as values;
// - expect_by_rule: DESIGN rule 2's case rules for a matmul without an output spec (batch
//   dimensions sharded alike, or in one operand only: the other reads that block),
//   restated directly (case analysis and the gather cost formula), independently of the
//   planner in detail/einsum_planner.hpp, which the tests check against it;
// - follows_rule(expectation, choice).
// Used by tests/static/matmul_plan_exhaustive.cpp at compile time and by the unit tests.
#pragma once

#include <typeshard/plan/matmul_plan.hpp>

#include <array>
#include <cstddef>

namespace matmul_test {

namespace ts = typeshard;
namespace tsd = typeshard::detail;

template <std::size_t Rank>
using spec_array = tsd::spec_array<Rank>;

// A generous upper bound of the number of specs (mesh rank <= 3, array rank <= 3: 106).
inline constexpr std::size_t max_specs = 128;

template <std::size_t Rank>
struct spec_list {
  std::array<spec_array<Rank>, max_specs> specs{};
  std::size_t count = 0;
};

// Every way to give each dimension an ordered list of distinct mesh axes, no axis twice.
template <class Mesh, std::size_t Rank>
constexpr void enumerate(spec_list<Rank>& out, spec_array<Rank>& cur, std::size_t dim,
                         std::array<bool, Mesh::rank>& used) {
  if (dim == Rank) {
    out.specs[out.count++] = cur;
    return;
  }
  // This dimension ends here: move on.
  enumerate<Mesh, Rank>(out, cur, dim + 1, used);
  // Or it takes one more unused axis (appended as its minor-most).
  for (std::size_t a = 0; a < Mesh::rank; ++a) {
    if (used[a] || cur[dim].count == ts::dim_spec::max_axes) continue;
    used[a] = true;
    cur[dim].axes[cur[dim].count++] = Mesh::axes[a].name;
    enumerate<Mesh, Rank>(out, cur, dim, used);
    cur[dim].axes[--cur[dim].count] = ts::axis_name{};
    used[a] = false;
  }
}

template <class Mesh, std::size_t Rank>
constexpr spec_list<Rank> all_specs() {
  spec_list<Rank> out;
  spec_array<Rank> cur{};
  std::array<bool, Mesh::rank> used{};
  enumerate<Mesh, Rank>(out, cur, 0, used);
  return out;
}

// ---- the case rules of DESIGN rule 2, restated independently of the planner ---------------

template <std::size_t Rank>
struct rule_expectation {
  tsd::einsum_problem problem = tsd::einsum_problem::none;
  spec_array<Rank> lhs_gemm{}, rhs_gemm{}, out{};
  ts::dim_spec unreduced{};
};

template <std::size_t Rank>
constexpr bool entry_uses_any(const spec_array<Rank>& s, std::size_t skip_dim, const ts::dim_spec& axes) {
  for (std::size_t d = 0; d < Rank; ++d)
    for (std::size_t a = 0; a < axes.count; ++a)
      if (d != skip_dim && s[d].uses(axes.axes[a])) return true;
  return false;
}

// Bytes (in elements) of gathering dimension j of an operand: (n - 1) blocks.
template <class Mesh, std::size_t Rank>
constexpr double gather_cost(const spec_array<Rank>& s, std::size_t j, const ts::shape<Rank>& g) {
  double block = 1;
  for (std::size_t d = 0; d < Rank; ++d) block *= double(ts::shard_extent(g[d], tsd::shards_of<Mesh>(s[d])));
  return block * double(tsd::shards_of<Mesh>(s[j]) - 1);
}

template <class Mesh, std::size_t Rank>
constexpr rule_expectation<Rank> expect_by_rule(const spec_array<Rank>& lhs, const spec_array<Rank>& rhs,
                                                const ts::shape<Rank>& ga, const ts::shape<Rank>& gb) {
  constexpr std::size_t I = Rank - 2, J = Rank - 1;  // lhs: [.., I, J]; rhs: [.., J(=I), K(=J)]
  rule_expectation<Rank> e;
  // Batch dimensions: sharded over different axes in the two, an error; in one only, the
  // other operand takes the axes (it reads that block): its I or K on one of them is an
  // error, its J on one of them is gathered before the rules for J.
  spec_array<Rank> lhs_taken{}, rhs_taken{};  // the axes each operand takes, by dimension
  for (std::size_t d = 0; d + 2 < Rank; ++d) {
    if (lhs[d] == rhs[d]) continue;
    if (lhs[d].count != 0 && rhs[d].count != 0) {
      e.problem = tsd::einsum_problem::batch_specs_differ;
      return e;
    }
    if (lhs[d].count == 0)
      lhs_taken[d] = rhs[d];
    else
      rhs_taken[d] = lhs[d];
  }
  if (entry_uses_any(lhs_taken, Rank, lhs[I]) || entry_uses_any(rhs_taken, Rank, rhs[J])) {
    e.problem = tsd::einsum_problem::batch_axis_taken_twice;
    return e;
  }
  e.lhs_gemm = lhs;
  e.rhs_gemm = rhs;
  if (entry_uses_any(lhs_taken, Rank, lhs[J])) e.lhs_gemm[J] = {};
  if (entry_uses_any(rhs_taken, Rank, rhs[I])) e.rhs_gemm[I] = {};
  const spec_array<Rank> a = e.lhs_gemm, b = e.rhs_gemm;
  const ts::dim_spec& aj = a[J];  // references: g++ 12 rejects two copies out of one
  const ts::dim_spec& bj = b[I];  // constexpr object in a constant evaluation
  if (aj == bj) {
  } else if (bj.count == 0) {
    e.lhs_gemm[J] = {};  // J sharded in lhs only: gather lhs
  } else if (aj.count == 0) {
    e.rhs_gemm[I] = {};
  } else {
    const bool can_a = !entry_uses_any(a, J, bj);  // lhs gathered can read rhs's J blocks
    const bool can_b = !entry_uses_any(b, I, aj);
    const double ca = gather_cost<Mesh>(a, J, ga), cb = gather_cost<Mesh>(b, I, gb);
    if (can_a && (!can_b || ca < cb)) {
      e.lhs_gemm[J] = {};
    } else if (can_b) {
      e.rhs_gemm[I] = {};
    } else {
      e.lhs_gemm[J] = {};
      e.rhs_gemm[I] = {};
    }
  }
  for (std::size_t a = 0; a < e.lhs_gemm[I].count; ++a)
    if (e.rhs_gemm[J].uses(e.lhs_gemm[I].axes[a])) {
      e.problem = tsd::einsum_problem::output_letters_share_axis;
      return e;
    }
  e.unreduced = e.lhs_gemm[J].count ? e.lhs_gemm[J] : e.rhs_gemm[I];
  for (std::size_t d = 0; d + 2 < Rank; ++d) e.out[d] = lhs[d].count ? lhs[d] : rhs[d];
  e.out[I] = e.lhs_gemm[I];
  e.out[J] = e.rhs_gemm[J];
  return e;
}

template <std::size_t Rank>
constexpr bool follows_rule(const rule_expectation<Rank>& e, const tsd::einsum_choice<Rank>& c) {
  if (e.problem != c.problem) return false;
  if (e.problem != tsd::einsum_problem::none) return true;
  return e.lhs_gemm == c.lhs_gemm && e.rhs_gemm == c.rhs_gemm && e.out == c.out &&
         e.unreduced == c.out_unreduced;
}

}  // namespace matmul_test
