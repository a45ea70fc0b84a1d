// typeshard/plan/detail/contraction_members.hpp: the members of a contraction plan
// (einsum_plan, and matmul_plan, its front end for "...ij,...jk->...ik"), written once: the
// choice, valid, the specs, steps, collectives, communicates, the costs (bytes_moved, flops,
// bytes_per_device, flops_per_device) and describe(). Internal: do not rely on anything in
// detail/ (the public faces are plan/einsum_plan.hpp and plan/matmul_plan.hpp).
//
// A Form (einsum_plan.hpp's einsum_form, matmul_plan.hpp's matmul_form: the same planner,
// each with its own rule wording) provides:
//   rank (the plan rank), lhs_rank, rhs_rank, result_rank, mesh_type, value_type,
//   extents_static, inputs_valid (rules 1 and 2 on the inputs; a diagnostic fired if not);
//   check_choice<problem, letter, axis>() (fires the diagnostic of a planner's problem);
//   equation(), make() (the einsum choice), shapes() (the nominal shapes it was chosen
//   for, form_shapes below): functions that build their value afresh on each call, since
//   g++ 12 mis-evaluates some copies out of a constexpr object.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <utility>

#include "../../core/detail/unreduced_from.hpp"
#include "../../core/layout.hpp"
#include "../../core/spec.hpp"
#include "../step.hpp"
#include "einsum_cost.hpp"
#include "einsum_letters.hpp"
#include "einsum_steps.hpp"
#include "einsum_subscripts.hpp"

namespace typeshard::detail {

// A Form's shapes(): the nominal shapes of its extents, rank R (none for invalid inputs).
template <class LhsExtents, class RhsExtents, class T, std::size_t R, bool InputsValid>
constexpr einsum_shapes<R> form_shapes() {
  if constexpr (InputsValid)
    return nominal_einsum_shapes<LhsExtents, RhsExtents, R>(sizeof(T));
  else
    return {};
}

// A plan's einsum choice for bytes_moved and flops: a class of its own, so the planner runs
// for it only in a program that calls them (a static member of contraction_members would be
// evaluated with every plan, costing compile time).
template <class Form>
struct costed_choice {
  static constexpr einsum_choice<Form::rank> value = Form::make();
};

// spec_from<Array>(index_sequence): declared only, for decltype: the spec type whose
// entries are the values of a spec_array (unreduced_from, its twin for unreduced types, is in
// core/detail/unreduced_from.hpp). A function rather than a class template with a defaulted
// index_sequence argument: clang 14 crashes on `List.count` in a default template argument.
template <auto Array, std::size_t... I>
spec<Array[I]...> spec_from(std::index_sequence<I...>);

template <class Form>
struct contraction_members {
 private:
  static constexpr std::size_t R = Form::rank;
  using Mesh = typename Form::mesh_type;
  static constexpr std::size_t element_size = sizeof(typename Form::value_type);
  // The steps the operation runs, for the nominal shapes.
  static constexpr auto list_ = einsum_steps_of<Mesh>(Form::equation(), Form::make(),
                                                      Form::shapes());
  // The cost for the nominal shapes, computed once (needed with static extents only).
  static constexpr plan_cost nominal_ = [] {
    if constexpr (Form::extents_static)
      return einsum_cost_of<Mesh>(Form::equation(), Form::make(), Form::shapes());
    else
      return plan_cost{};
  }();

 public:
  // Whether the inputs satisfy rules 1 and 2 (else exactly one diagnostic fired).
  static constexpr bool inputs_valid = Form::inputs_valid;

  // The chosen plan as a value (what the operation executes).
  static constexpr einsum_choice<R> choice = Form::make();

  // Whether a plan exists: the inputs are valid and the rules allow the product.
  static constexpr bool valid =
      inputs_valid &&
      Form::template check_choice<choice.problem, choice.problem_letter, choice.problem_axis>();

  // The operands as given and as the local product reads them (after their reshards), the
  // local product and the result: specs and unreduced axes.
  using lhs_spec = decltype(spec_from<choice.lhs>(std::make_index_sequence<Form::lhs_rank>{}));
  using rhs_spec = decltype(spec_from<choice.rhs>(std::make_index_sequence<Form::rhs_rank>{}));
  using lhs_gemm_spec =
      decltype(spec_from<choice.lhs_gemm>(std::make_index_sequence<Form::lhs_rank>{}));
  using rhs_gemm_spec =
      decltype(spec_from<choice.rhs_gemm>(std::make_index_sequence<Form::rhs_rank>{}));
  using local_spec =
      decltype(spec_from<choice.local>(std::make_index_sequence<Form::result_rank>{}));
  using local_unreduced = decltype(unreduced_from<choice.partial>(
      std::make_index_sequence<choice.partial.count>{}));
  using out_spec = decltype(spec_from<choice.out>(std::make_index_sequence<Form::result_rank>{}));
  using out_unreduced = decltype(unreduced_from<choice.out_unreduced>(
      std::make_index_sequence<choice.out_unreduced.count>{}));

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

  // The steps for given extents (padded to `rank` with 1s): what the operation runs on them.
  static constexpr einsum_step_list<R> steps_for(const shape<R>& lhs_shape,
                                                 const shape<R>& rhs_shape) {
    return einsum_steps_of<Mesh>(Form::equation(), choice,
                                 einsum_shapes<R>{lhs_shape, rhs_shape, element_size});
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
