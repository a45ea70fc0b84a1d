// typeshard/plan/detail/einsum_cost.hpp: the cost model of an einsum plan: the shapes it is
// costed for, its three reshards (each operand to what the local product reads, the product to
// the output) and their cost in bytes received per device, local flops and collectives, which
// the planner (einsum_planner.hpp) compares to choose among candidates when an output spec is
// named. The byte and collective counts are the reshard planner's (matmul_planner.hpp's
// add_reshard_cost); the flops are the local product's, 2 per multiply-add.
// Internal: do not rely on anything in detail/ (the public face is plan/einsum_plan.hpp).
#pragma once

#include <cstddef>

#include "../../core/layout.hpp"
#include "../../core/mesh.hpp"
#include "../../core/spec.hpp"
#include "../reshard_plan.hpp"
#include "../step.hpp"
#include "einsum_letters.hpp"
#include "einsum_subscripts.hpp"
#include "matmul_planner.hpp"

namespace typeshard::detail {

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
constexpr matmul_cost einsum_cost_of(const einsum_equation& eq, const einsum_choice<R>& c,
                                     const einsum_shapes<R>& sh) {
  matmul_cost cost;
  add_reshard_cost<Mesh>(cost, c.lhs, lhs_steps<Mesh>(c, sh.lhs), sh.lhs, sh.element_size);
  add_reshard_cost<Mesh>(cost, c.rhs, rhs_steps<Mesh>(c, sh.rhs), sh.rhs, sh.element_size);
  const shape<R> out = einsum_out_shape(eq, sh);
  if (c.out_named)
    add_reshard_cost<Mesh>(cost, c.local, out_steps<Mesh>(c, out), out, sh.element_size);
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

// The shapes a compile-time plan is costed for: the static extents when all are static,
// else every extent nominal_dynamic_extent (matmul_planner.hpp says why; padded dimensions
// stay 1).
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
