// typeshard/plan/detail/matmul_planner.hpp: the choice of a sharded matmul's steps, as values.
// Internal: do not rely on anything in detail/ (the public face is matmul_plan.hpp).
//
// C[..., I, K] = A[..., I, J] . B[..., J, K] on a mesh. Everything here is a constexpr
// function of spec *values* (std::array<dim_spec, Rank>), so the same code plans at compile
// time (matmul_plan, ts::matmul) and at run time (the tests that walk thousands of spec
// combinations without instantiating a template for each).
//
// A plan is a `matmul_choice`: the sharding each operand is resharded to before the local
// GEMM (lhs_gemm, rhs_gemm), the contraction axes S over which the local products are
// partial sums, and the output sharding. What runs:
//   1. reshard lhs -> lhs_gemm, rhs -> rhs_gemm (reshard_plan's steps: all_gather,
//      all_to_all, local slices);
//   2. the local GEMM on every device. Both operands' J blocks are the S-blocks, or one
//      operand holds all of J and reads the S-block of it in place ("slice(lhs, dim 1,
//      over x)": no copy, no communication); likewise an operand holding all of a batch
//      dimension the other shards reads the other's block of it;
//   3. the local product is C0 = [batch..., lhs_gemm's I, rhs_gemm's K] unreduced over S
//      (and over the axes an operand was already unreduced over: matmul is linear in each
//      operand, rule 3; the other operand must neither shard nor be partial over them, and
//      a partial operand stays partial through its reshard). With no output spec that is
//      the result (DESIGN rule 2: the type says it is a partial sum); with one, C0 is
//      resharded to it: psum / psum_scatter reduce, then any gather or slice it needs.
//
// Which plan: ONE planner chooses every contraction. plan_matmul (at the end of
// detail/einsum_planner.hpp) is the einsum planner on "...ij,...jk->...ik" with the batch
// dimensions fixed, its choice restated as a matmul_choice; what that means for matmul
// (DESIGN rule 2):
//   no output spec, by rule:
//     - a batch dimension sharded over different axes in the two operands: an error; sharded
//       in one only: it keeps that sharding, the other operand reads its block (a local
//       slice). That operand's I or K over one of its axes is an error
//       (batch_axis_on_free_dim), its J over one of them is gathered first;
//     - J sharded identically in both (or in neither): nothing moves; C0 is unreduced over
//       J's axes (none if J is whole);
//     - J sharded in one operand only: all_gather that operand along J;
//     - J sharded over different axes: all_gather one operand along J and read the other's
//       S-block of it, so the result is unreduced over the other's axes. The cheaper gather
//       wins (bytes per device, see below); on a tie, rhs is gathered; if neither can read
//       the other's blocks (its other dimension already uses those axes), both are gathered;
//     - then I and K must not share an axis (case 4, A[I_X, J] . B[J, K_X]): a compile error
//       that asks for an output spec.
//   output spec named, by cost: every candidate below is valid or skipped, and the one
//   moving the fewest bytes per device wins; ties go to fewer flops per device (no
//   replicated compute), then to fewer collectives, then to the first in enumeration order
//   (lhs's options outer, rhs's inner; each: as given, free dimension as the output wants
//   it, free dimension gathered, then those three with J gathered; duplicates and specs
//   using an axis twice dropped). Candidates per operand: J kept or gathered;
//   the free dimension (I for lhs, K for rhs) kept, gathered, or moved to the output's
//   sharding of it. Batch dimensions never move before the GEMM (sharded over different
//   axes in the two operands they are an error even with an output spec).
//
// This header keeps matmul's vocabulary (matmul_choice, its steps' reshards and costs) and
// the pieces the einsum planner shares (the reshard steps, their byte costs, the cost order).
//
// Cost model (per device, bytes received): all_gather (n-1) * block, all_to_all and
// psum_scatter (n-1)/n * block, psum 2 (n-1)/n * block (ring algorithms), local slices 0,
// where block is the device's block before the step (largest block when uneven). With
// static extents the numbers are exact for the plan; with any dynamic extent the choice
// assumes every extent equal (the documented rule for dynamic extents), and
// matmul_plan::bytes_moved(lhs_shape, rhs_shape) gives the real numbers at run time.
#pragma once

#include <array>
#include <cstddef>

#include "../../core/config.hpp"
#include "../../core/layout.hpp"
#include "../../core/mesh.hpp"
#include "../reshard_plan.hpp"
#include "../step.hpp"
#include "../../core/spec.hpp"
#include "../../core/detail/spec_layout.hpp"

namespace typeshard::detail {

// Why a matmul cannot be planned (rule 2), or none.
enum class matmul_problem {
  none,
  batch_specs_differ,    // `dim`: a leading dimension sharded differently in lhs and rhs
  free_dims_share_axis,  // `axis`: case 4 without an output spec
  batch_axis_on_free_dim,  // `axis`: a batch dimension sharded over it in one operand only,
                           // I or K over it in the other, without an output spec
  unreduced_conflict,    // `axis`: one operand is unreduced over an axis the other uses
  too_many_partial_axes  // the product would be unreduced over more than 4 axes
};

// The dimensions of C[..., I, K] = A[..., I, J] . B[..., J, K] for operands of rank Rank.
template <std::size_t Rank>
struct matmul_dims {
  static_assert(Rank >= 2);
  static constexpr std::size_t batch = Rank - 2;  // dimensions [0, batch) are batch dims
  static constexpr std::size_t lhs_i = Rank - 2, lhs_j = Rank - 1;
  static constexpr std::size_t rhs_j = Rank - 2, rhs_k = Rank - 1;
  static constexpr std::size_t out_i = Rank - 2, out_k = Rank - 1;
};

template <std::size_t Rank>
struct matmul_choice {
  matmul_problem problem = matmul_problem::none;
  std::size_t problem_dim = 0;
  axis_name problem_axis{};

  spec_array<Rank> lhs{}, rhs{};            // the operands as given
  dim_spec lhs_unreduced{}, rhs_unreduced{};  // ... and the axes they are partial sums over
  spec_array<Rank> lhs_gemm{}, rhs_gemm{};  // the operands after resharding
  spec_array<Rank> lhs_read{}, rhs_read{};  // what the local GEMM reads: an operand holding
                                            // all of J (or of a batch dimension the other
                                            // shards) reads the other's block of it in place
  dim_spec contract{};                      // S: the local products are partial over it
  dim_spec partial{};                       // S and the operands' unreduced axes: C0's
  spec_array<Rank> local{};                 // C0, the local product (unreduced over S)
  bool out_named = false;
  spec_array<Rank> out{};                   // the result's sharding
  dim_spec out_unreduced{};                 // the result's unreduced axes (partial if unnamed)
};

// The sizes a cost is computed for.
template <std::size_t Rank>
struct matmul_shapes {
  shape<Rank> lhs{}, rhs{};
  std::size_t element_size = 4;

  constexpr shape<Rank> out() const {
    shape<Rank> c = lhs;  // batch dims and I from lhs
    c[Rank - 1] = rhs[Rank - 1];
    return c;
  }
};

// What a plan costs on each device.
struct matmul_cost {
  double bytes = 0;        // received per device, all steps
  double flops = 0;        // of the local GEMM per device
  std::size_t collectives = 0;

  constexpr bool operator<(const matmul_cost& o) const {
    if (bytes != o.bytes) return bytes < o.bytes;
    if (flops != o.flops) return flops < o.flops;
    return collectives < o.collectives;
  }
};

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

// Elements of the largest block of `global` under `s` (what a step moves per device).
template <class Mesh, std::size_t Rank>
constexpr double block_elements(const spec_array<Rank>& s, const shape<Rank>& global) {
  double n = 1;
  for (std::size_t d = 0; d < Rank; ++d)
    n *= static_cast<double>(block_extent(global[d], shards_of<Mesh>(s[d])));
  return n;
}

// Whether both shardings of `global` divide evenly (which reshard_plan variant runs).
template <class Mesh, std::size_t Rank>
constexpr bool even_between(const spec_array<Rank>& a, const spec_array<Rank>& b,
                            const shape<Rank>& global) {
  return is_even<Mesh>(a, global) && is_even<Mesh>(b, global);
}
template <std::size_t Rank>
constexpr bool even_between(const mesh_value& m, const spec_array<Rank>& a,
                            const spec_array<Rank>& b, const shape<Rank>& global) {
  return is_even(m, a, global) && is_even(m, b, global);
}

// The steps reshard runs from (from, unreduced) to (to, keep).
template <class Mesh, std::size_t Rank>
constexpr step_list<Rank> reshard_steps(const spec_array<Rank>& from, const dim_spec& unreduced,
                                        const spec_array<Rank>& to, const dim_spec& keep,
                                        const shape<Rank>& global) {
  return plan_reshard(from, unreduced, to, keep, even_between<Mesh>(from, to, global));
}

// The three reshards of a plan: each operand to what the GEMM reads (a partial-sum operand
// stays partial: gathering partial sums is linear), and the product to the output, reduced.
// Choice: a matmul_choice or an einsum_choice (einsum_letters.hpp), which name these alike.
template <class Mesh, class Choice, std::size_t Rank>
constexpr step_list<Rank> lhs_steps(const Choice& c, const shape<Rank>& global) {
  return reshard_steps<Mesh>(c.lhs, c.lhs_unreduced, c.lhs_gemm, c.lhs_unreduced, global);
}
template <class Mesh, class Choice, std::size_t Rank>
constexpr step_list<Rank> rhs_steps(const Choice& c, const shape<Rank>& global) {
  return reshard_steps<Mesh>(c.rhs, c.rhs_unreduced, c.rhs_gemm, c.rhs_unreduced, global);
}
template <class Mesh, class Choice, std::size_t Rank>
constexpr step_list<Rank> out_steps(const Choice& c, const shape<Rank>& global) {
  return reshard_steps<Mesh>(c.local, c.partial, c.out, dim_spec{}, global);
}

// Bytes received per device by a reshard's steps, and how many of them are collectives.
template <class Mesh, std::size_t Rank>
constexpr void add_reshard_cost(matmul_cost& cost, const spec_array<Rank>& from,
                                const step_list<Rank>& steps, const shape<Rank>& global,
                                std::size_t element_size) {
  spec_array<Rank> cur = from;
  for (std::size_t i = 0; i < steps.count; ++i) {
    const step<Rank>& s = steps.steps[i];
    const double before = block_elements<Mesh>(cur, global);
    const double n = static_cast<double>(group_size<Mesh>(s.axes));
    const double moved = elements_received(s.kind, n, before);
    cost.bytes += moved * static_cast<double>(element_size);
    cost.collectives += s.communicates() ? 1 : 0;
    cur = s.spec_after;
  }
}

// Appends a reshard's steps for operand `who` (a local slice is listed per dimension, each
// step leaving the sharding with that dimension sliced).
template <std::size_t Rank, std::size_t Capacity>
TYPESHARD_COLD
constexpr void append_reshard(step_array<Rank, Capacity>& out, step_operand who,
                              const spec_array<Rank>& from, const step_list<Rank>& steps) {
  spec_array<Rank> cur = from;
  for (std::size_t i = 0; i < steps.count; ++i) {
    step<Rank> s = steps.steps[i];
    s.operand = who;
    if (s.kind != step_kind::slice) {
      out.push(s);
    } else {
      for (std::size_t d = 0; d < Rank; ++d) {
        if (cur[d] == s.spec_after[d]) continue;
        const dim_spec gained = suffix(s.spec_after[d], common_prefix(cur[d], s.spec_after[d]));
        cur[d] = s.spec_after[d];
        out.push(step<Rank>{step_kind::slice, who, d, d, gained, cur, s.unreduced_after});
      }
    }
    cur = s.spec_after;
  }
}

// ---- costing a plan -----------------------------------------------------------------------

// The cost of a completed candidate for the given shapes.
template <class Mesh, std::size_t Rank>
constexpr matmul_cost cost_of(const matmul_choice<Rank>& c, const matmul_shapes<Rank>& sh) {
  using D = matmul_dims<Rank>;
  matmul_cost cost;
  add_reshard_cost<Mesh>(cost, c.lhs, lhs_steps<Mesh>(c, sh.lhs), sh.lhs, sh.element_size);
  add_reshard_cost<Mesh>(cost, c.rhs, rhs_steps<Mesh>(c, sh.rhs), sh.rhs, sh.element_size);
  const shape<Rank> out = sh.out();
  if (c.out_named) add_reshard_cost<Mesh>(cost, c.local, out_steps<Mesh>(c, out), out, sh.element_size);
  const double j_block =
      static_cast<double>(block_extent(sh.lhs[D::lhs_j], shards_of<Mesh>(c.contract)));
  cost.flops = 2 * block_elements<Mesh>(c.local, out) * j_block;
  return cost;
}

// The cost of gathering one operand's J (used by the unnamed rule for different J axes).
template <class Mesh, std::size_t Rank>
constexpr double gather_j_bytes(const spec_array<Rank>& s, std::size_t j, const shape<Rank>& global,
                                std::size_t element_size) {
  spec_array<Rank> to = s;
  to[j] = dim_spec{};
  matmul_cost cost;
  add_reshard_cost<Mesh>(cost, s, reshard_steps<Mesh>(s, {}, to, {}, global), global, element_size);
  return cost.bytes;
}

// The first axis of `u` that `spec` or `other_u` uses, or an empty name.
template <std::size_t Rank>
constexpr axis_name unreduced_clash(const dim_spec& u, const spec_array<Rank>& spec,
                                    const dim_spec& other_u) {
  for (std::size_t a = 0; a < u.count; ++a)
    if (uses_axis(spec, u.axes[a]) || other_u.uses(u.axes[a])) return u.axes[a];
  return {};
}

// The extent a compile-time plan assumes for every dimension of both operands as soon as one
// extent is dynamic (the type then says nothing about their sizes). All extents equal makes
// the choice the one for a square problem: no dimension is favoured. The value still counts
// where blocks of different ranks are compared (an einsum's operands, the product), and for
// rounding (uneven blocks): 4096 is a large, typical extent (the benchmarks' N), a power of
// two, so it divides evenly over any power-of-two mesh axis and no block rounds to 1 or 0.
// A program with very unequal dynamic extents gets the square problem's plan, perhaps not
// the cheapest for its real extents (plan::bytes_moved gives those; name an output spec, or
// use static extents, to decide).
inline constexpr std::size_t nominal_dynamic_extent = 4096;

// The shapes a compile-time plan is costed for: the static extents when every extent of
// both operands is static, else every extent nominal_dynamic_extent.
template <class LhsExtents, class RhsExtents, std::size_t Rank>
constexpr matmul_shapes<Rank> nominal_shapes(std::size_t element_size) {
  matmul_shapes<Rank> sh;
  sh.element_size = element_size;
  constexpr bool all_static = LhsExtents::all_static && RhsExtents::all_static;
  for (std::size_t d = 0; d < Rank; ++d) {
    sh.lhs[d] = all_static ? LhsExtents::static_extents[d] : nominal_dynamic_extent;
    sh.rhs[d] = all_static ? RhsExtents::static_extents[d] : nominal_dynamic_extent;
  }
  return sh;
}

}  // namespace typeshard::detail
