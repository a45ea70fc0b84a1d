// typeshard/plan/detail/einsum_cost.hpp: the cost model of a contraction plan (an einsum's,
// and so a matmul's): the shapes it is costed for, its three reshards (each operand to what
// the local product reads, the product to the output) and their cost in bytes received per
// device, local flops and collectives, which the planner (einsum_planner.hpp) compares to
// choose among candidates when an output spec is named; and the small spec-value helpers
// the planner shares with it.
// Internal: do not rely on anything in detail/ (the public face is plan/einsum_plan.hpp).
//
// Everything here is a constexpr function of spec *values* (std::array<dim_spec, R>), so
// the same code plans at compile time (einsum_plan, matmul_plan) and at run time (the tests
// that walk thousands of spec combinations without instantiating a template for each).
//
// Cost model (per device, bytes received): all_gather (n-1) * block, all_to_all and
// psum_scatter (n-1)/n * block, psum 2 (n-1)/n * block (ring algorithms), local slices 0,
// where block is the device's block before the step (largest block when uneven); flops are
// the local product's, 2 per multiply-add. With static extents the numbers are exact for the
// plan; with any dynamic extent the choice assumes every extent equal (the documented rule
// for dynamic extents, nominal_dynamic_extent below), and plan::bytes_moved(lhs_shape,
// rhs_shape) gives the real numbers at run time.
#pragma once

#include <array>
#include <cstddef>

#include "../../core/config.hpp"
#include "../../core/detail/spec_layout.hpp"
#include "../../core/layout.hpp"
#include "../../core/mesh.hpp"
#include "../../core/spec.hpp"
#include "../reshard_plan.hpp"
#include "../step.hpp"
#include "einsum_letters.hpp"
#include "einsum_subscripts.hpp"

namespace typeshard::detail {

// What a plan costs on each device; compared by bytes received, then local flops, then
// collectives (the order the planner prefers candidates in).
struct plan_cost {
  double bytes = 0;  // received per device, all steps
  double flops = 0;  // of the local product per device
  std::size_t collectives = 0;

  constexpr bool operator<(const plan_cost& o) const {
    if (bytes != o.bytes) return bytes < o.bytes;
    if (flops != o.flops) return flops < o.flops;
    return collectives < o.collectives;
  }
};

// Elements of the largest block of `global` under `s` (what a step moves per device).
template <class Mesh, std::size_t Rank>
constexpr double block_elements(const spec_array<Rank>& s, const shape<Rank>& global) {
  double n = 1;
  for (std::size_t d = 0; d < Rank; ++d)
    n *= static_cast<double>(shard_extent(global[d], shards_of<Mesh>(s[d])));
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
constexpr void add_reshard_cost(plan_cost& cost, const spec_array<Rank>& from,
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

// The cost of gathering one operand's J (used by the unnamed rule for different J axes).
template <class Mesh, std::size_t Rank>
constexpr double gather_j_bytes(const spec_array<Rank>& s, std::size_t j, const shape<Rank>& global,
                                std::size_t element_size) {
  spec_array<Rank> to = s;
  to[j] = dim_spec{};
  plan_cost cost;
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

// The cost of a completed candidate (bytes received per device, local flops, collectives).
template <class Mesh, std::size_t R>
constexpr plan_cost einsum_cost_of(const einsum_equation& eq, const einsum_choice<R>& c,
                                     const einsum_shapes<R>& sh) {
  plan_cost cost;
  add_reshard_cost<Mesh>(cost, c.lhs, lhs_steps<Mesh>(c, sh.lhs), sh.lhs, sh.element_size);
  add_reshard_cost<Mesh>(cost, c.rhs, rhs_steps<Mesh>(c, sh.rhs), sh.rhs, sh.element_size);
  const shape<R> out = einsum_out_shape(eq, sh);
  if (c.out_named)
    add_reshard_cost<Mesh>(cost, c.local, out_steps<Mesh>(c, out), out, sh.element_size);
  double contracted = 1;
  for (std::size_t l = 0; l < eq.lhs_rank; ++l)
    if (!eq.in_out(eq.lhs[l]))
      contracted *= static_cast<double>(shard_extent(sh.lhs[l], shards_of<Mesh>(c.lhs_read[l])));
  for (std::size_t r = 0; r < eq.rhs_rank; ++r)
    if (eq.role(eq.rhs[r]) == einsum_role::rhs_summed)
      contracted *= static_cast<double>(shard_extent(sh.rhs[r], shards_of<Mesh>(c.rhs_read[r])));
  cost.flops = 2 * block_elements<Mesh>(c.local, out) * contracted;
  return cost;
}

// The shapes a compile-time plan is costed for: the static extents when all are static,
// else every extent nominal_dynamic_extent (padded dimensions stay 1).
template <class LE, class RE, std::size_t R>
constexpr einsum_shapes<R> nominal_einsum_shapes(std::size_t element_size) {
  einsum_shapes<R> sh;
  sh.element_size = element_size;
  constexpr bool all_static = LE::all_static && RE::all_static;
  for (std::size_t d = 0; d < R; ++d) {
    sh.lhs[d] = d < LE::rank ? (all_static ? LE::static_extents[d] : nominal_dynamic_extent) : 1;
    sh.rhs[d] = d < RE::rank ? (all_static ? RE::static_extents[d] : nominal_dynamic_extent) : 1;
  }
  return sh;
}

}  // namespace typeshard::detail
