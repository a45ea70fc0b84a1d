// typeshard/plan/detail/einsum_planner.hpp: the choice of a sharded einsum's steps, as values.
// Internal: do not rely on anything in detail/ (the public face is plan/einsum_plan.hpp).
//
// C[out letters] = sum over the other letters of A[lhs letters] * B[rhs letters]
// (detail/einsum_subscripts.hpp names the letters' roles). DESIGN rule 2, per letter, costed
// by einsum_cost.hpp. A matmul is the einsum "...ij,...jk->...ik" with its batch letters
// fixed (plan_matmul, at the end).
//
// Every spec here is a spec_array<R>, R the plan rank (the largest rank of the operands and
// the result): an operand of lower rank has trailing extent-1 unsharded dimensions, which
// leave its row-major blocks as they are, so one step vocabulary and one executor serve
// operands of different ranks, and each step's `dim` is the operand's own dimension.
//
// A plan is an `einsum_choice` (einsum_letters.hpp: what each operand is resharded to, what
// the local product reads, its sharding and partial axes); its cost is einsum_cost.hpp's,
// its steps einsum_steps.hpp's. This header searches: by rule, or over candidates by cost.
//
// Which plan:
//   no output spec, by rule (DESIGN rule 2):
//     - a batch letter sharded over different axes in the two operands: an error
//       (batch_specs_differ); sharded in one operand only: it keeps that sharding, the other
//       operand (which holds all of it) reads its block, a local slice, as broadcasting does
//       (rule 5). That operand "takes" the letter's axes: another of its output letters on
//       one of them is an error (batch_axis_taken_twice: two output letters on one axis),
//       another of its contracted or summed letters on one of them is gathered first; then
//       the rules below apply;
//     - each contracting letter: sharded alike in both (or in neither): nothing moves, the
//       result is unreduced over its axes; sharded in one only: that operand is gathered
//       along it; over different axes: the cheaper gather (bytes per device) whose operand
//       can read the other's blocks; on a tie rhs is gathered; if neither can, both are;
//     - a summed letter (one operand only, not in the output) stays where it is, summed
//       locally (the result unreduced over its axes), unless the other operand uses its
//       axes: then its operand is gathered along it;
//     - then two output letters on one mesh axis: an error (output_letters_share_axis).
//   output spec named, by cost: for each operand every combination of, per dimension, kept,
//   gathered or (output letters) moved to the output's sharding of it; candidates that
//   cannot form the local product skipped; the fewest bytes received per device wins, then
//   fewer flops, fewer collectives, then enumeration order (lhs outer, rhs inner; see
//   operand_candidates). With batch_fixed (matmul), batch letters never move: sharded over
//   different axes they are an error even with an output spec (sharded in one operand only,
//   the other reads its block, as without one). The reduction of the
//   partial sums is the reshard planner's (psum_scatter where the output shards a dimension
//   over the axis reduced, else psum then slice), so reduce-scatter wins where it moves
//   fewer bytes than all-reduce plus slice.
#pragma once

#include <array>
#include <type_traits>
#include <cstddef>

#include "../../core/mesh.hpp"
#include "../../core/spec.hpp"
#include "../reshard_plan.hpp"
#include "../step.hpp"
#include "einsum_cost.hpp"
#include "einsum_letters.hpp"
#include "einsum_subscripts.hpp"

namespace typeshard::detail {

// One operand as the by-rule planner sees it: its letters and the specs of both operands.
template <std::size_t R>
struct einsum_operand_view {
  const char* letters;
  std::size_t rank;
  const spec_array<R>& mine;
  const spec_array<R>& other;
  bool lhs;
};

// The first axis of `entry` that the operand takes: an axis the other operand shards a batch
// letter over that this operand holds whole (it will read the other's block of it); or an
// empty name.
template <std::size_t R>
constexpr axis_name taken_axis(const einsum_equation& eq, const einsum_operand_view<R>& v,
                               const dim_spec& entry) {
  for (std::size_t d = 0; d < v.rank; ++d) {
    const char x = v.letters[d];
    if (eq.role(x) != einsum_role::batch || v.mine[d].count != 0) continue;
    const axis_name a = shared_axis(entry, v.other[v.lhs ? eq.rhs_dim(x) : eq.lhs_dim(x)]);
    if (!a.empty()) return a;
  }
  return {};
}

// Makes room in an operand's gemm spec for the axes it takes: a contracted or summed letter
// on one of them is gathered; an output letter on one of them is returned (its position,
// else `rank`): two output letters would share that axis.
template <std::size_t R>
constexpr std::size_t make_room_for_taken(const einsum_equation& eq,
                                          const einsum_operand_view<R>& v, spec_array<R>& gemm) {
  for (std::size_t d = 0; d < v.rank; ++d) {
    if (taken_axis(eq, v, gemm[d]).empty()) continue;
    if (eq.in_out(v.letters[d])) return d;
    gemm[d] = dim_spec{};
  }
  return v.rank;
}

// No output spec: DESIGN rule 2 per letter (see the header comment).
template <class Mesh, std::size_t R>
constexpr einsum_choice<R> plan_einsum_by_rule(const einsum_equation& eq, einsum_choice<R> c,
                                               const einsum_shapes<R>& sh) {
  c.lhs_gemm = c.lhs;
  c.rhs_gemm = c.rhs;
  // Batch letters sharded in one operand only: the other operand takes their axes.
  const einsum_operand_view<R> lv{eq.lhs.data(), eq.lhs_rank, c.lhs, c.rhs, true};
  const einsum_operand_view<R> rv{eq.rhs.data(), eq.rhs_rank, c.rhs, c.lhs, false};
  const std::size_t lhs_clash = make_room_for_taken(eq, lv, c.lhs_gemm);
  const std::size_t rhs_clash = make_room_for_taken(eq, rv, c.rhs_gemm);
  if (lhs_clash != eq.lhs_rank || rhs_clash != eq.rhs_rank) {
    const bool in_lhs = lhs_clash != eq.lhs_rank;
    c.problem = einsum_problem::batch_axis_taken_twice;
    c.problem_letter = in_lhs ? eq.lhs[lhs_clash] : eq.rhs[rhs_clash];
    c.problem_axis = in_lhs ? taken_axis(eq, lv, c.lhs[lhs_clash])
                            : taken_axis(eq, rv, c.rhs[rhs_clash]);
    return c;
  }
  for (std::size_t l = 0; l < eq.lhs_rank; ++l) {
    const char x = eq.lhs[l];
    if (eq.role(x) != einsum_role::contracting) continue;
    const std::size_t r = eq.rhs_dim(x);
    const dim_spec a = c.lhs_gemm[l];
    const dim_spec b = c.rhs_gemm[r];
    if (a == b) continue;
    if (b.count == 0) {
      c.lhs_gemm[l] = dim_spec{};
    } else if (a.count == 0) {
      c.rhs_gemm[r] = dim_spec{};
    } else {
      spec_array<R> lg = c.lhs_gemm, rg = c.rhs_gemm;
      lg[l] = dim_spec{};
      rg[r] = dim_spec{};
      const bool can_lhs = uses_none_of(lg, b);  // then lhs reads rhs's blocks
      const bool can_rhs = uses_none_of(rg, a);
      const double lb = gather_j_bytes<Mesh>(c.lhs_gemm, l, sh.lhs, sh.element_size);
      const double rb = gather_j_bytes<Mesh>(c.rhs_gemm, r, sh.rhs, sh.element_size);
      if (can_lhs && (!can_rhs || lb < rb)) {
        c.lhs_gemm = lg;
      } else if (can_rhs) {
        c.rhs_gemm = rg;
      } else {
        c.lhs_gemm = lg;
        c.rhs_gemm = rg;
      }
    }
  }
  // Summed letters whose axes the other operand uses are gathered.
  for (std::size_t l = 0; l < eq.lhs_rank; ++l)
    if (eq.role(eq.lhs[l]) == einsum_role::lhs_summed && !uses_none_of(c.rhs_gemm, c.lhs_gemm[l]))
      c.lhs_gemm[l] = dim_spec{};
  for (std::size_t r = 0; r < eq.rhs_rank; ++r)
    if (eq.role(eq.rhs[r]) == einsum_role::rhs_summed && !uses_none_of(c.lhs_gemm, c.rhs_gemm[r]))
      c.rhs_gemm[r] = dim_spec{};
  // Two output letters on one axis (only a lhs-free and a rhs-free letter can be).
  for (std::size_t l = 0; l < eq.lhs_rank; ++l) {
    if (eq.role(eq.lhs[l]) != einsum_role::lhs_free) continue;
    for (std::size_t r = 0; r < eq.rhs_rank; ++r) {
      if (eq.role(eq.rhs[r]) != einsum_role::rhs_free) continue;
      const axis_name clash = shared_axis(c.lhs_gemm[l], c.rhs_gemm[r]);
      if (!clash.empty()) {
        c.problem = einsum_problem::output_letters_share_axis;
        c.problem_axis = clash;
        c.problem_letter = eq.lhs[l];
        return c;
      }
    }
  }
  if (!complete_einsum_local(eq, c)) {
    c.problem = einsum_problem::too_many_partial_axes;
    return c;
  }
  c.out = c.local;
  c.out_unreduced = c.partial;
  return c;
}

// The options of one dimension before the product. An output letter: 0 kept, 1 moved to the
// output's sharding of it, 2 gathered; a contracted or summed letter: 0 kept, 1 gathered.
// False when the option is the same as a lower one (or not an option: `fixed` dimensions,
// matmul's batch dimensions, are only kept).
template <std::size_t R>
constexpr bool option_of(const einsum_equation& eq, char letter, const dim_spec& given,
                         const spec_array<R>& out, bool fixed, int option, dim_spec& result) {
  if (option == 0) {
    result = given;
    return true;
  }
  if (fixed) return false;
  if (!eq.in_out(letter)) {
    result = dim_spec{};
    return option == 1 && given.count != 0;
  }
  if (option == 1) {
    result = out[eq.out_dim(letter)];
    return result.count != 0 && !(result == given);
  }
  result = dim_spec{};
  return given.count != 0;
}

// One operand's candidate shardings, walked as an odometer over its dimensions' options:
// the contracted letters' dimensions turn slowest, then the output letters', each in the
// operand's order (for a matmul operand: J kept, then gathered; within each, the free
// dimension kept, moved, gathered: matmul's historical order).
template <std::size_t R>
struct operand_candidates {
  const einsum_equation* eq = nullptr;
  const char* letters = nullptr;
  std::size_t rank = 0;
  std::array<std::size_t, R> order{};  // dimensions, slowest first
  std::array<int, R> digits{};
  std::array<bool, R> fixed{};

  constexpr operand_candidates(const einsum_equation& e, const char* l, std::size_t n,
                               bool batch_fixed)
      : eq(&e), letters(l), rank(n) {
    std::size_t k = 0;
    for (std::size_t d = 0; d < n; ++d)
      if (!e.in_out(l[d])) order[k++] = d;
    for (std::size_t d = 0; d < n; ++d)
      if (e.in_out(l[d])) order[k++] = d;
    for (std::size_t d = 0; d < n; ++d)
      fixed[d] = batch_fixed && e.role(l[d]) == einsum_role::batch;
  }

  // The next valid candidate after the current digits into `result`; false when exhausted.
  constexpr bool next(const spec_array<R>& given, const spec_array<R>& out, spec_array<R>& result) {
    while (true) {
      std::size_t k = rank;
      while (k-- > 0) {
        if (++digits[order[k]] <= 2) break;
        digits[order[k]] = 0;
        if (k == 0) return false;
      }
      bool ok = true;
      for (std::size_t d = 0; d < rank && ok; ++d)
        ok = option_of<R>(*eq, letters[d], given[d], out, fixed[d], digits[d], result[d]);
      if (ok && no_axis_twice(result)) return true;
    }
  }
};

// Output spec named: the cheapest candidate (see the header comment).
template <class Mesh, std::size_t R>
constexpr einsum_choice<R> plan_einsum_by_cost(const einsum_equation& eq,
                                               const einsum_choice<R>& given,
                                               const spec_array<R>& out,
                                               const einsum_shapes<R>& sh, bool batch_fixed) {
  einsum_choice<R> best = given;
  plan_cost best_cost;
  bool found = false;
  operand_candidates<R> lc(eq, eq.lhs.data(), eq.lhs_rank, batch_fixed);
  spec_array<R> ls = given.lhs;
  bool lhs_more = true;
  while (lhs_more) {
    operand_candidates<R> rc(eq, eq.rhs.data(), eq.rhs_rank, batch_fixed);
    spec_array<R> rs = given.rhs;
    bool rhs_more = true;
    while (rhs_more) {
      einsum_choice<R> c = given;
      c.lhs_gemm = ls;
      c.rhs_gemm = rs;
      c.out = out;
      if (complete_einsum_local(eq, c)) {
        const plan_cost cost = einsum_cost_of<Mesh>(eq, c, sh);
        if (!found || cost < best_cost) {
          best = c;
          best_cost = cost;
          found = true;
        }
      }
      rhs_more = rc.next(given.rhs, out, rs);
    }
    lhs_more = lc.next(given.lhs, out, ls);
  }
  // Gathering every dimension always forms the product (unless the partial axes outnumber 4).
  if (!found) best.problem = einsum_problem::too_many_partial_axes;
  return best;
}

// The plan of an einsum on Mesh: by rule without an output spec, by cost with one (`out`
// ignored unless out_named).
template <class Mesh, std::size_t R>
constexpr einsum_choice<R> plan_einsum(const einsum_equation& eq, const spec_array<R>& lhs,
                                       const spec_array<R>& rhs, bool out_named,
                                       const spec_array<R>& out, const einsum_shapes<R>& sh,
                                       const dim_spec& lhs_u = {}, const dim_spec& rhs_u = {},
                                       bool batch_fixed = false) {
  einsum_choice<R> c;
  clear_specs(c);
  c.lhs = c.lhs_gemm = c.lhs_read = lhs;
  c.rhs = c.rhs_gemm = c.rhs_read = rhs;
  c.lhs_unreduced = lhs_u;
  c.rhs_unreduced = rhs_u;
  c.out_named = out_named;
  if (!out_named || batch_fixed) {
    for (std::size_t l = 0; l < eq.lhs_rank; ++l) {
      const char x = eq.lhs[l];
      const dim_spec& r = rhs[eq.rhs_dim(x)];
      if (eq.role(x) == einsum_role::batch && lhs[l].count != 0 && r.count != 0 &&
          !(lhs[l] == r)) {
        c.problem = einsum_problem::batch_specs_differ;
        c.problem_letter = x;
        return c;
      }
    }
  }
  axis_name clash = unreduced_clash(lhs_u, rhs, rhs_u);
  if (clash.empty()) clash = unreduced_clash(rhs_u, lhs, lhs_u);
  if (!clash.empty()) {
    c.problem = einsum_problem::unreduced_conflict;
    c.problem_axis = clash;
    return c;
  }
  if (out_named) return plan_einsum_by_cost<Mesh>(eq, c, out, sh, batch_fixed);
  return plan_einsum_by_rule<Mesh>(eq, c, sh);
}

// ---- matmul, the special case "...ij,...jk->...ik" ---------------------------------------

// The plan for lhs . rhs on Mesh: the einsum planner on "...ij,...jk->...ik", batch
// dimensions fixed (never resharded: sharded alike, or in one operand only, output spec or
// not). `out` is ignored
// unless out_named. lhs_u / rhs_u: the axes an operand is a partial sum over (rule 3 allows
// matmul on partial sums: it is linear in each operand), which the other operand must
// neither shard nor be partial over.
template <class Mesh, std::size_t Rank>
constexpr einsum_choice<Rank> plan_matmul(const spec_array<Rank>& lhs, const spec_array<Rank>& rhs,
                                          bool out_named, const spec_array<Rank>& out,
                                          const einsum_shapes<Rank>& sh,
                                          const dim_spec& lhs_u = {}, const dim_spec& rhs_u = {}) {
  return plan_einsum<Mesh, Rank>(matmul_equation<Rank>(), lhs, rhs, out_named, out, sh, lhs_u,
                                 rhs_u, true);
}

}  // namespace typeshard::detail
