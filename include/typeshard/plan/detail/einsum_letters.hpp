// typeshard/plan/detail/einsum_letters.hpp: an einsum plan as a value (einsum_choice), and what
// a pair of operand shardings makes of it letter by letter: what each operand reads, the local
// product's sharding and the axes it is a partial sum over.
// Internal: do not rely on anything in detail/ (the public face is plan/einsum_plan.hpp).
//
//
// A plan is an `einsum_choice`: what each operand is resharded to (lhs_gemm, rhs_gemm),
// what the local product reads (lhs_read, rhs_read: an operand holding all of a contracting
// or batch letter the other shards reads the other's block of it, a local slice), the local
// product's sharding
// (local) and the axes it is a partial sum over (partial: every contracted or summed
// letter's axes, and the operands' own unreduced axes), and the output. The local product
// is a valid partial sum when each batch and contracting letter is read alike by both (a
// letter sharded over different axes in the two is not), no mesh axis appears twice in an
// operand's read or in the local product, and the partial axes are distinct and unused by
// the product.
//
// The planner (einsum_planner.hpp) decides lhs_gemm and rhs_gemm, by rule or by cost
// (einsum_cost.hpp); complete_einsum_local derives the rest from them, the same way for both.
#pragma once

#include <cstddef>

#include "../../core/layout.hpp"
#include "../../core/spec.hpp"
#include "einsum_subscripts.hpp"

namespace typeshard::detail {

// ---- small helpers on spec values ------------------------------------------------------

template <std::size_t Rank>
constexpr bool uses_axis(const spec_array<Rank>& s, axis_name a) {
  for (const dim_spec& d : s)
    if (d.uses(a)) return true;
  return false;
}

// Whether no axis of `axes` appears anywhere in `s`.
template <std::size_t Rank>
constexpr bool uses_none_of(const spec_array<Rank>& s, const dim_spec& axes) {
  for (std::size_t a = 0; a < axes.count; ++a)
    if (uses_axis(s, axes.axes[a])) return false;
  return true;
}

// The first axis used by both entries, or an empty name.
constexpr axis_name shared_axis(const dim_spec& x, const dim_spec& y) {
  for (std::size_t a = 0; a < x.count; ++a)
    if (y.uses(x.axes[a])) return x.axes[a];
  return {};
}

// Rule 1 on a value: no mesh axis twice (the axes all exist: they come from valid specs).
template <std::size_t Rank>
constexpr bool no_axis_twice(const spec_array<Rank>& s) {
  for (std::size_t d = 0; d < Rank; ++d)
    for (std::size_t a = 0; a < s[d].count; ++a) {
      for (std::size_t b = a + 1; b < s[d].count; ++b)
        if (s[d].axes[a] == s[d].axes[b]) return false;
      for (std::size_t e = d + 1; e < Rank; ++e)
        if (s[e].uses(s[d].axes[a])) return false;
    }
  return true;
}

enum class einsum_problem {
  none,
  batch_specs_differ,         // `letter`: sharded differently in lhs and rhs
  output_letters_share_axis,  // `axis`: two output letters on one mesh axis, no output spec
  batch_axis_taken_twice,     // `letter`, `axis`: an output letter of the operand that holds a
                              // batch letter whole is on an axis the other shards it over
  unreduced_conflict,         // `axis`: one operand unreduced over an axis the other uses
  too_many_partial_axes       // the product would be unreduced over more than 4 axes
};

template <std::size_t R>
struct einsum_choice;

// Sets every spec of a choice to none, entry by entry: g++ 12 rejects a spec_array left at
// its default member initializer as a template argument (plan::out_spec's spec_from), so
// every member is assigned before the choice becomes a constant.
template <std::size_t R>
constexpr void clear_specs(einsum_choice<R>& c);

template <std::size_t R>
struct einsum_choice {
  einsum_problem problem = einsum_problem::none;
  char problem_letter = 0;
  axis_name problem_axis{};

  spec_array<R> lhs{}, rhs{};                 // the operands as given
  dim_spec lhs_unreduced{}, rhs_unreduced{};  // ... and the axes they are partial over
  spec_array<R> lhs_gemm{}, rhs_gemm{};       // after their reshards
  spec_array<R> lhs_read{}, rhs_read{};       // after the local slices: what the product reads
  dim_spec partial{};                         // the local product is partial over these
  spec_array<R> local{};                      // the local product's sharding (output order)
  bool out_named = false;
  spec_array<R> out{};
  dim_spec out_unreduced{};
};

template <std::size_t R>
constexpr void clear_specs(einsum_choice<R>& c) {
  for (std::size_t d = 0; d < R; ++d)
    c.lhs[d] = c.rhs[d] = c.lhs_gemm[d] = c.rhs_gemm[d] = c.lhs_read[d] = c.rhs_read[d] =
        c.local[d] = c.out[d] = dim_spec{};
}

// A choice with every spec none: what a plan holds while a diagnostic fires.
template <std::size_t R>
constexpr einsum_choice<R> cleared_choice() {
  einsum_choice<R> c;
  clear_specs(c);
  return c;
}

constexpr bool append_axes(dim_spec& to, const dim_spec& from) {
  for (std::size_t a = 0; a < from.count; ++a) {
    if (to.count == dim_spec::max_axes) return false;
    to.axes[to.count++] = from.axes[a];
  }
  return true;
}

constexpr bool axes_distinct(const dim_spec& d) {
  for (std::size_t a = 0; a < d.count; ++a)
    for (std::size_t b = a + 1; b < d.count; ++b)
      if (d.axes[a] == d.axes[b]) return false;
  return true;
}

// Given lhs_gemm and rhs_gemm: the reads, the local product and its partial axes; false if
// this pair cannot form the local product (see the header comment).
template <std::size_t R>
constexpr bool complete_einsum_local(const einsum_equation& eq, einsum_choice<R>& c) {
  c.lhs_read = c.lhs_gemm;
  c.rhs_read = c.rhs_gemm;
  for (std::size_t l = 0; l < eq.lhs_rank; ++l) {
    const char x = eq.lhs[l];
    const einsum_role role = eq.role(x);
    if (role != einsum_role::batch && role != einsum_role::contracting) continue;
    const std::size_t r = eq.rhs_dim(x);
    const dim_spec& a = c.lhs_gemm[l];
    const dim_spec& b = c.rhs_gemm[r];
    if (a == b) continue;
    if (a.count == 0)
      c.lhs_read[l] = b;  // lhs holds all of the letter: it reads rhs's block of it
    else if (b.count == 0)
      c.rhs_read[r] = a;
    else
      return false;
  }
  if (!no_axis_twice(c.lhs_read) || !no_axis_twice(c.rhs_read)) return false;
  for (std::size_t d = 0; d < R; ++d) c.local[d] = dim_spec{};
  for (std::size_t o = 0; o < eq.out_rank; ++o) {
    const char x = eq.out[o];
    c.local[o] = eq.in_lhs(x) ? c.lhs_read[eq.lhs_dim(x)] : c.rhs_read[eq.rhs_dim(x)];
  }
  dim_spec p;
  for (std::size_t l = 0; l < eq.lhs_rank; ++l)
    if (!eq.in_out(eq.lhs[l]) && !append_axes(p, c.lhs_read[l])) return false;
  for (std::size_t r = 0; r < eq.rhs_rank; ++r)
    if (eq.role(eq.rhs[r]) == einsum_role::rhs_summed && !append_axes(p, c.rhs_read[r]))
      return false;
  dim_spec operands_u = c.lhs_unreduced;
  if (!append_axes(operands_u, c.rhs_unreduced) || !append_axes(p, operands_u)) return false;
  c.partial = p;
  return axes_distinct(p) && uses_none_of(c.lhs_read, operands_u) &&
         uses_none_of(c.rhs_read, operands_u) && no_axis_twice(c.local) &&
         uses_none_of(c.local, p);
}

}  // namespace typeshard::detail
