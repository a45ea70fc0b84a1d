// typeshard/plan/detail/contraction_members.hpp: the members einsum_plan and matmul_plan share,
// written once: steps, collectives, communicates, the costs (bytes_moved, flops,
// bytes_per_device, flops_per_device) and describe(). Internal: do not rely on anything in
// detail/ (the public faces are plan/einsum_plan.hpp and plan/matmul_plan.hpp).
//
// Both plans are one planner's (a matmul is the einsum "...ij,...jk->...ik", batch letters
// fixed), so both are costed by the einsum cost model (einsum_cost.hpp) on their einsum form.
// A Form (einsum_plan.hpp's einsum_form, matmul_plan.hpp's matmul_form) provides:
//   rank, mesh_type, value_type, extents_static;
//   equation(), make() (the einsum choice), shapes() (the nominal shapes it was chosen
//   for), step_list() (the steps the operation runs): functions that build their value
//   afresh on each call, since g++ 12 mis-evaluates some copies out of a constexpr object.
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "../../core/layout.hpp"
#include "../step.hpp"
#include "einsum_cost.hpp"
#include "einsum_letters.hpp"
#include "einsum_subscripts.hpp"
#include "matmul_planner.hpp"

namespace typeshard::detail {

// A plan's einsum choice for bytes_moved and flops: a class of its own, so the planner runs
// for it only in a program that calls them (a static member of contraction_members would be
// evaluated with every plan, costing compile time).
template <class Form>
struct costed_choice {
  static constexpr einsum_choice<Form::rank> value = Form::make();
};

template <class Form>
struct contraction_members {
 private:
  static constexpr std::size_t R = Form::rank;
  using Mesh = typename Form::mesh_type;
  static constexpr std::size_t element_size = sizeof(typename Form::value_type);
  static constexpr auto list_ = Form::step_list();
  // The cost for the nominal shapes, computed once (needed with static extents only).
  static constexpr matmul_cost nominal_ = [] {
    if constexpr (Form::extents_static)
      return einsum_cost_of<Mesh>(Form::equation(), Form::make(), Form::shapes());
    else
      return matmul_cost{};
  }();

 public:
  // The steps, in order: the operands' collectives and slices, the local product ("local
  // gemm"), then the output's reduction and resharding.
  static constexpr std::array<step<R>, list_.count> steps = take_steps<list_.count>(list_);

  // How many collectives run, and whether any does.
  static constexpr std::size_t collectives = count_collectives(steps);
  static constexpr bool communicates = collectives != 0;

  // Bytes received and local flops per device for given extents (padded to `rank` with 1s).
  static constexpr double bytes_moved(const shape<R>& lhs_shape, const shape<R>& rhs_shape) {
    return einsum_cost_of<Mesh>(Form::equation(), costed_choice<Form>::value,
                                einsum_shapes<R>{lhs_shape, rhs_shape, element_size})
        .bytes;
  }
  static constexpr double flops(const shape<R>& lhs_shape, const shape<R>& rhs_shape) {
    return einsum_cost_of<Mesh>(Form::equation(), costed_choice<Form>::value,
                                einsum_shapes<R>{lhs_shape, rhs_shape, element_size})
        .flops;
  }

  // With static extents: the same for those extents (0 when an extent is dynamic).
  static constexpr bool extents_static = Form::extents_static;
  static constexpr std::size_t bytes_per_device =
      extents_static ? static_cast<std::size_t>(nominal_.bytes + 0.5) : 0;
  static constexpr double flops_per_device = extents_static ? nominal_.flops : 0;

  // "all_gather(rhs, dim 0, over y); local gemm".
  static std::string describe() { return describe_calls(steps); }
};

}  // namespace typeshard::detail
