// typeshard/plan/detail/einsum_planner.hpp: the choice of a sharded einsum's steps, as values.
// Internal: do not rely on anything in detail/ (the public face is plan/einsum_plan.hpp).
//
// C[out letters] = sum over the other letters of A[lhs letters] * B[rhs letters]
// (detail/einsum_subscripts.hpp names the letters' roles). DESIGN rule 2, per letter, with
// the pieces of detail/matmul_planner.hpp (the reshard steps, their byte costs, the cost
// order); matmul's planner is the same rules for one I, one J and one K letter.
//
// Every spec here is a spec_array<R>, R the plan rank (the largest rank of the operands and
// the result): an operand of lower rank has trailing extent-1 unsharded dimensions, which
// leave its row-major blocks as they are, so one step vocabulary and one executor serve
// operands of different ranks, and each step's `dim` is the operand's own dimension.
//
// A plan is an `einsum_choice`: what each operand is resharded to (lhs_gemm, rhs_gemm),
// what the local product reads (lhs_read, rhs_read: an operand holding all of a contracting
// letter reads the other's block of it, a local slice), the local product's sharding
// (local) and the axes it is a partial sum over (partial: every contracted or summed
// letter's axes, and the operands' own unreduced axes), and the output. The local product
// is a valid partial sum when the batch letters are sharded alike, each contracting letter
// is read alike by both, no mesh axis appears twice in the local product and the partial
// axes together, and an operand's unreduced axes shard nothing read.
//
// Which plan:
//   no output spec, by rule (DESIGN rule 2):
//     - a batch letter sharded differently in the two operands: an error (batch_specs_differ);
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
//   fewer flops, fewer collectives, then enumeration order (lhs outer, rhs inner, each
//   dimension kept < gathered < moved, the first dimension slowest). The reduction of the
//   partial sums is the reshard planner's (psum_scatter where the output shards a dimension
//   over the axis reduced, else psum then slice), so reduce-scatter wins where it moves
//   fewer bytes than all-reduce plus slice.
#pragma once

#include <array>
#include <cstddef>

#include "../../core/layout.hpp"
#include "../../core/mesh.hpp"
#include "../../core/spec.hpp"
#include "../reshard_plan.hpp"
#include "../step.hpp"
#include "einsum_subscripts.hpp"
#include "matmul_planner.hpp"

namespace typeshard::detail {

enum class einsum_problem {
  none,
  batch_specs_differ,         // `letter`: sharded differently in lhs and rhs
  output_letters_share_axis,  // `axis`: two output letters on one mesh axis, no output spec
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

// Extents (padded to R with 1s) and the element size a cost is computed for.
template <std::size_t R>
struct einsum_shapes {
  shape<R> lhs{}, rhs{};
  std::size_t element_size = 4;
};

template <std::size_t R>
constexpr shape<R> einsum_out_shape(const einsum_equation& eq, const einsum_shapes<R>& sh) {
  shape<R> out{};
  for (std::size_t d = 0; d < R; ++d) out[d] = 1;
  for (std::size_t o = 0; o < eq.out_rank; ++o) {
    const char c = eq.out[o];
    out[o] = eq.in_lhs(c) ? sh.lhs[eq.lhs_dim(c)] : sh.rhs[eq.rhs_dim(c)];
  }
  return out;
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
    if (role == einsum_role::batch) return false;
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

template <class Mesh, std::size_t R>
constexpr step_list<R> einsum_lhs_steps(const einsum_choice<R>& c, const shape<R>& g) {
  return reshard_steps<Mesh>(c.lhs, c.lhs_unreduced, c.lhs_gemm, c.lhs_unreduced, g);
}
template <class Mesh, std::size_t R>
constexpr step_list<R> einsum_rhs_steps(const einsum_choice<R>& c, const shape<R>& g) {
  return reshard_steps<Mesh>(c.rhs, c.rhs_unreduced, c.rhs_gemm, c.rhs_unreduced, g);
}
template <class Mesh, std::size_t R>
constexpr step_list<R> einsum_out_steps(const einsum_choice<R>& c, const shape<R>& g) {
  return reshard_steps<Mesh>(c.local, c.partial, c.out, dim_spec{}, g);
}

// The cost of a completed candidate (bytes received per device, local flops, collectives).
template <class Mesh, std::size_t R>
constexpr matmul_cost einsum_cost_of(const einsum_equation& eq, const einsum_choice<R>& c,
                                     const einsum_shapes<R>& sh) {
  matmul_cost cost;
  add_reshard_cost<Mesh>(cost, c.lhs, einsum_lhs_steps<Mesh>(c, sh.lhs), sh.lhs, sh.element_size);
  add_reshard_cost<Mesh>(cost, c.rhs, einsum_rhs_steps<Mesh>(c, sh.rhs), sh.rhs, sh.element_size);
  const shape<R> out = einsum_out_shape(eq, sh);
  if (c.out_named)
    add_reshard_cost<Mesh>(cost, c.local, einsum_out_steps<Mesh>(c, out), out, sh.element_size);
  double contracted = 1;
  for (std::size_t l = 0; l < eq.lhs_rank; ++l)
    if (!eq.in_out(eq.lhs[l]))
      contracted *= static_cast<double>(block_extent(sh.lhs[l], shards_of<Mesh>(c.lhs_read[l])));
  for (std::size_t r = 0; r < eq.rhs_rank; ++r)
    if (eq.role(eq.rhs[r]) == einsum_role::rhs_summed)
      contracted *= static_cast<double>(block_extent(sh.rhs[r], shards_of<Mesh>(c.rhs_read[r])));
  cost.flops = 2 * block_elements<Mesh>(c.local, out) * contracted;
  return cost;
}

// No output spec: DESIGN rule 2 per letter (see the header comment).
template <class Mesh, std::size_t R>
constexpr einsum_choice<R> plan_einsum_by_rule(const einsum_equation& eq, einsum_choice<R> c,
                                               const einsum_shapes<R>& sh) {
  c.lhs_gemm = c.lhs;
  c.rhs_gemm = c.rhs;
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

// The options of one dimension before the product: 0 kept, 1 gathered, 2 moved to the
// output's sharding of its letter; false when the option is the same as a lower one.
template <std::size_t R>
constexpr bool option_of(const einsum_equation& eq, const char* letters, std::size_t d,
                         const dim_spec& given, const spec_array<R>& out, int option,
                         dim_spec& result) {
  if (option == 0) {
    result = given;
    return true;
  }
  if (option == 1) {
    result = dim_spec{};
    return given.count != 0;
  }
  if (!eq.in_out(letters[d])) return false;
  result = out[eq.out_dim(letters[d])];
  return result.count != 0 && !(result == given);
}

// The next candidate sharding of an operand (an odometer over its dimensions' options);
// false when they are exhausted.
template <std::size_t R>
constexpr bool next_option(const einsum_equation& eq, const char* letters, std::size_t rank,
                           const spec_array<R>& given, const spec_array<R>& out,
                           std::array<int, R>& digits, spec_array<R>& result) {
  while (true) {
    std::size_t d = rank;
    while (d-- > 0) {
      if (++digits[d] <= 2) break;
      digits[d] = 0;
      if (d == 0) return false;
    }
    if (rank == 0) return false;
    bool ok = true;
    for (std::size_t k = 0; k < rank && ok; ++k)
      ok = option_of<R>(eq, letters, k, given[k], out, digits[k], result[k]);
    if (ok && no_axis_twice(result)) return true;
  }
}

// Output spec named: the cheapest candidate (see the header comment).
template <class Mesh, std::size_t R>
constexpr einsum_choice<R> plan_einsum_by_cost(const einsum_equation& eq,
                                               const einsum_choice<R>& given,
                                               const spec_array<R>& out,
                                               const einsum_shapes<R>& sh) {
  einsum_choice<R> best = given;
  matmul_cost best_cost;
  bool found = false;
  std::array<int, R> ld{};
  spec_array<R> ls = given.lhs;
  bool lhs_more = true;
  while (lhs_more) {
    std::array<int, R> rd{};
    spec_array<R> rs = given.rhs;
    bool rhs_more = true;
    while (rhs_more) {
      einsum_choice<R> c = given;
      c.lhs_gemm = ls;
      c.rhs_gemm = rs;
      c.out = out;
      if (complete_einsum_local(eq, c)) {
        const matmul_cost cost = einsum_cost_of<Mesh>(eq, c, sh);
        if (!found || cost < best_cost) {
          best = c;
          best_cost = cost;
          found = true;
        }
      }
      rhs_more = next_option<R>(eq, eq.rhs.data(), eq.rhs_rank, given.rhs, out, rd, rs);
    }
    lhs_more = next_option<R>(eq, eq.lhs.data(), eq.lhs_rank, given.lhs, out, ld, ls);
  }
  if (!found) best.problem = einsum_problem::too_many_partial_axes;
  return best;
}

// The plan of an einsum on Mesh: by rule without an output spec, by cost with one (`out`
// ignored unless out_named).
template <class Mesh, std::size_t R>
constexpr einsum_choice<R> plan_einsum(const einsum_equation& eq, const spec_array<R>& lhs,
                                       const spec_array<R>& rhs, bool out_named,
                                       const spec_array<R>& out, const einsum_shapes<R>& sh,
                                       const dim_spec& lhs_u = {}, const dim_spec& rhs_u = {}) {
  einsum_choice<R> c;
  clear_specs(c);
  c.lhs = c.lhs_gemm = c.lhs_read = lhs;
  c.rhs = c.rhs_gemm = c.rhs_read = rhs;
  c.lhs_unreduced = lhs_u;
  c.rhs_unreduced = rhs_u;
  c.out_named = out_named;
  if (!out_named) {
    for (std::size_t l = 0; l < eq.lhs_rank; ++l) {
      const char x = eq.lhs[l];
      if (eq.role(x) == einsum_role::batch && !(lhs[l] == rhs[eq.rhs_dim(x)])) {
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
  if (out_named) return plan_einsum_by_cost<Mesh>(eq, c, out, sh);
  return plan_einsum_by_rule<Mesh>(eq, c, sh);
}

inline constexpr std::size_t max_einsum_steps = 3 * max_reshard_steps + 2 * max_einsum_rank + 1;

template <std::size_t R>
using einsum_step_list = step_array<R, max_einsum_steps>;

// The steps of a choice for shapes `sh`: what einsum_plan::steps lists and ts::einsum runs.
template <class Mesh, std::size_t R>
constexpr einsum_step_list<R> einsum_steps_of(const einsum_equation& eq, const einsum_choice<R>& c,
                                              const einsum_shapes<R>& sh) {
  einsum_step_list<R> out;
  append_reshard(out, step_operand::lhs, c.lhs, einsum_lhs_steps<Mesh>(c, sh.lhs));
  append_reshard(out, step_operand::rhs, c.rhs, einsum_rhs_steps<Mesh>(c, sh.rhs));
  spec_array<R> cur = c.lhs_gemm;
  for (std::size_t d = 0; d < R; ++d)
    if (!(c.lhs_read[d] == cur[d])) {
      cur[d] = c.lhs_read[d];
      out.push(step<R>{step_kind::slice, step_operand::lhs, d, d, c.lhs_read[d], cur,
                       c.lhs_unreduced});
    }
  cur = c.rhs_gemm;
  for (std::size_t d = 0; d < R; ++d)
    if (!(c.rhs_read[d] == cur[d])) {
      cur[d] = c.rhs_read[d];
      out.push(step<R>{step_kind::slice, step_operand::rhs, d, d, c.rhs_read[d], cur,
                       c.rhs_unreduced});
    }
  out.push(step<R>{step_kind::local_gemm, step_operand::out, 0, 0, dim_spec{}, c.local, c.partial});
  if (c.out_named)
    append_reshard(out, step_operand::out, c.local,
                   einsum_out_steps<Mesh>(c, einsum_out_shape(eq, sh)));
  return out;
}

// The shapes a compile-time plan is costed for: the static extents when all are static,
// else every extent 4096 (matmul's documented rule for dynamic extents).
template <class LE, class RE, std::size_t R>
constexpr einsum_shapes<R> nominal_einsum_shapes(std::size_t element_size) {
  einsum_shapes<R> sh;
  sh.element_size = element_size;
  constexpr bool all_static = LE::all_static && RE::all_static;
  for (std::size_t d = 0; d < R; ++d) {
    sh.lhs[d] = d < LE::rank ? (all_static ? LE::static_extents[d] : 4096) : 1;
    sh.rhs[d] = d < RE::rank ? (all_static ? RE::static_extents[d] : 4096) : 1;
  }
  return sh;
}

}  // namespace typeshard::detail
