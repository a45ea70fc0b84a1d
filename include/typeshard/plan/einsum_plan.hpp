// typeshard/plan/einsum_plan.hpp: the compile-time plan of a sharded einsum (DESIGN rule 2,
// per letter).
//
//   using plan = ts::einsum_plan<"bsd,df->bsf", mesh_2x2, ts::spec<"x", ts::none, "y">,
//                                ts::spec<"y", ts::none>>;
//   static_assert(std::is_same_v<plan::out_spec, ts::spec<"x", ts::none, ts::none>>);
//   static_assert(std::is_same_v<plan::out_unreduced, ts::unreduced<"y">>);
//   static_assert(ts::communication_free<plan>);
//   plan::describe();   // "local gemm"
//
// Two operands of any ranks (0 to 8), letters naming dimensions (see
// detail/einsum_subscripts.hpp for the grammar and the roles batch / contracting / free /
// summed); the choice is made as detail/einsum_planner.hpp documents: by rule without an
// output spec (the result may be unreduced), the fewest bytes moved per device with one.
//
//   einsum_plan<Subscripts, Mesh, LhsSpec, RhsSpec,
//               OutSpec    = ts::auto_out,          // or the output sharding you want
//               LhsExtents = ts::dextents<lhs letters>, RhsExtents = ts::dextents<rhs letters>,
//               T          = float,
//               LhsUnreduced = ts::unreduced<>, RhsUnreduced = ts::unreduced<>>
//   einsum_plan_for<Subscripts, A, B[, OutSpec]>  // for sharded_array types A and B
//
// Members, as matmul_plan's: valid, lhs_spec / rhs_spec, lhs_gemm_spec / rhs_gemm_spec (after
// the operands' reshards), local_spec / local_unreduced (the local product), out_spec /
// out_unreduced (the result), steps (std::array<ts::step<rank>, N>), describe(), collectives,
// communicates, bytes_per_device / flops_per_device (static extents), bytes_moved and flops
// (any padded shapes). `rank` is the plan rank: the largest of the operands' and the result's
// ranks; a step's spec_after lists an operand of lower rank with trailing none entries (its
// trailing extent-1 padding), and a step's `dim` is the operand's own dimension. An empty
// output ("i,i->") is a rank-0 result (out_spec spec<>; result_rank 0, the plan rank 1).
//
// einsum_valid<Subscripts, A, B[, OutSpec]> answers whether ts::einsum accepts the operands,
// without firing a diagnostic (for requires-clauses and generic code).
//
// Compile-time vocabulary only: no runtime header is included.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "../core/bfloat16.hpp"
#include "../core/detail/diagnose.hpp"
#include "../core/detail/unreduced_from.hpp"
#include "../core/extents.hpp"
#include "../core/mesh.hpp"
#include "../core/rules/rule2_einsum.hpp"
#include "../core/rules/rule3_unreduced.hpp"
#include "../core/spec.hpp"
#include "../core/unreduced.hpp"
#include "detail/contraction_members.hpp"
#include "detail/einsum_planner.hpp"
#include "detail/einsum_steps.hpp"
#include "detail/einsum_subscripts.hpp"
#include "../core/detail/spec_layout.hpp"
#include "step.hpp"

namespace typeshard {

// auto_out: ts::einsum or ts::matmul without a named output spec (the result's sharding
// follows from the operands', and may be unreduced).
struct auto_out {};

namespace detail {

template <std::size_t A, std::size_t B>
inline constexpr std::size_t max_of = A < B ? B : A;

// The first axis of Spec the mesh does not have, or an empty name.
template <class Mesh, class Spec>
constexpr axis_name axis_not_on() {
  for (const dim_spec& d : Spec::dims)
    for (std::size_t a = 0; a < d.count; ++a)
      if (!Mesh::contains(d.axes[a])) return d.axes[a];
  return {};
}

struct letter_extent_mismatch {
  char letter = 0;
  std::size_t lhs = 0, rhs = 0;
};

// The first letter of both operands whose static extents differ (letter 0 if none).
template <einsum_subscripts S, class LE, class RE>
constexpr letter_extent_mismatch einsum_extent_mismatch() {
  constexpr einsum_equation eq = equation_of<S>;
  for (std::size_t l = 0; l < eq.lhs_rank && l < LE::rank; ++l) {
    const std::size_t r = eq.rhs_dim(eq.lhs[l]);
    if (r >= eq.rhs_rank || r >= RE::rank) continue;
    const std::size_t a = LE::static_extents[l], b = RE::static_extents[r];
    if (a != dyn && b != dyn && a != b) return {eq.lhs[l], a, b};
  }
  return {};
}

// A named output spec: its axes on the mesh, rule 1 for the result's rank.
template <class Mesh, class Out, std::size_t ResultRank>
constexpr bool check_einsum_out() {
  if constexpr (!axis_not_on<Mesh, Out>().empty())
    return require_named<false, axis_not_on<Mesh, Out>(),
                         diagnostic::einsum_out_spec_not_on_mesh>::value &&
           false;
  else
    return check_spec<Mesh, Out, ResultRank>();
}

// A letter's static extents (letter 0: none differ).
template <char Letter, std::size_t Lhs, std::size_t Rhs>
constexpr bool check_einsum_extents() {
  if constexpr (Letter != 0)
    return require<false, diagnostic::einsum_letter_extents_differ<Letter, Lhs, Rhs>>::value &&
           false;
  else
    return true;
}

// Checks a plan's inputs; fires exactly one diagnostic and returns false on the first
// problem, in the order a reader would fix them.
template <einsum_subscripts S, class Mesh, class Lhs, class Rhs, class Out, class LE, class RE,
          class T>
constexpr bool check_einsum_inputs() {
  constexpr einsum_equation eq = equation_of<S>;
  constexpr letter_extent_mismatch bad = einsum_extent_mismatch<S, LE, RE>();
  if constexpr (eq.error == einsum_parse_error::too_long) {
    return false;  // einsum_subscripts' own static_assert fired where the string was made
  } else if constexpr (eq.error == einsum_parse_error::malformed ||
                eq.error == einsum_parse_error::operand_too_long) {
    return require<false, diagnostic::einsum_subscripts_malformed<eq.position>>::value && false;
  } else if constexpr (eq.error == einsum_parse_error::letter_repeated) {
    return require<false, diagnostic::einsum_letter_repeated<eq.letter>>::value && false;
  } else if constexpr (eq.error == einsum_parse_error::output_letter_unknown) {
    return require<false, diagnostic::einsum_output_letter_unknown<eq.letter>>::value && false;
  } else if constexpr (!is_gemm_element_v<T>) {
    return require<false, diagnostic::einsum_element_not_float_or_double<T>>::value && false;
  } else if constexpr (LE::rank != eq.lhs_rank) {
    return require<false,
                   diagnostic::einsum_operand_rank_differs<0, eq.lhs_rank, LE::rank>>::value &&
           false;
  } else if constexpr (RE::rank != eq.rhs_rank) {
    return require<false,
                   diagnostic::einsum_operand_rank_differs<1, eq.rhs_rank, RE::rank>>::value &&
           false;
  } else if constexpr (!check_spec<Mesh, Lhs, eq.lhs_rank>() ||
                       !check_spec<Mesh, Rhs, eq.rhs_rank>()) {
    return false;  // rule 1 fired
  } else if constexpr (!std::is_same_v<Out, auto_out>) {
    return check_einsum_out<Mesh, Out, eq.result_rank()>() &&
           check_einsum_extents<bad.letter, bad.lhs, bad.rhs>();
  } else {
    return check_einsum_extents<bad.letter, bad.lhs, bad.rhs>();
  }
}

// Fires the diagnostic of a problem the planner found (one at most).
template <einsum_problem Problem, char Letter, axis_name Axis>
constexpr bool check_einsum_choice() {
  if constexpr (Problem == einsum_problem::batch_specs_differ) {
    return require<false, diagnostic::einsum_batch_specs_differ<Letter>>::value && false;
  } else if constexpr (Problem == einsum_problem::output_letters_share_axis) {
    return require_named<false, Axis, diagnostic::einsum_output_letters_share_axis>::value &&
           false;
  } else if constexpr (Problem == einsum_problem::batch_axis_taken_twice) {
    return require_named<false, Axis, diagnostic::einsum_batch_axis_taken_twice>::value &&
           false;
  } else if constexpr (Problem == einsum_problem::unreduced_conflict) {
    return require_named<false, Axis, diagnostic::matmul_unreduced_conflict>::value && false;
  } else if constexpr (Problem == einsum_problem::too_many_partial_axes) {
    return require<false, diagnostic::matmul_too_many_partial_axes<
                              static_cast<std::size_t>(Letter)>>::value &&
           false;
  } else {
    return true;
  }
}

// The plan rank of a subscript string (1 when it does not parse: members stay well-formed).
template <einsum_subscripts S>
inline constexpr std::size_t einsum_rank_of =
    equation_of<S>.ok() ? equation_of<S>.plan_rank() : 1;

// The planner's choice for given types, as a value (no diagnostic).
template <einsum_subscripts S, class Mesh, class Lhs, class Rhs, class Out, class LE, class RE,
          class T, class LU, class RU, std::size_t R = einsum_rank_of<S>>
constexpr einsum_choice<R> einsum_choice_for() {
  constexpr bool named = !std::is_same_v<Out, auto_out>;
  using padded_out = std::conditional_t<named, Out, spec<>>;
  return plan_einsum<Mesh, R>(equation_of<S>, spec_array_of<Lhs, R>(), spec_array_of<Rhs, R>(),
                              named, spec_array_of<padded_out, R>(),
                              nominal_einsum_shapes<LE, RE, R>(sizeof(T)), unreduced_list<LU>(),
                              unreduced_list<RU>());
}

// The einsum form of einsum_plan<...> (detail/contraction_members.hpp: what the plan's shared
// members are derived from): its rules-1-and-2 check, its choice, shapes and steps.
template <einsum_subscripts Subscripts, class Mesh, class LhsSpec, class RhsSpec, class OutSpec,
          class LhsExtents, class RhsExtents, class T, class LhsUnreduced, class RhsUnreduced>
struct einsum_form {
  // The plan rank (the operands' ranks too while a diagnostic fires for a wrong rank, so
  // the members stay well-formed).
  static constexpr std::size_t rank =
      max_of<einsum_rank_of<Subscripts>, max_of<LhsExtents::rank, RhsExtents::rank>>;
  static constexpr std::size_t lhs_rank = LhsExtents::rank;
  static constexpr std::size_t rhs_rank = RhsExtents::rank;
  static constexpr std::size_t result_rank =
      equation_of<Subscripts>.ok() ? equation_of<Subscripts>.result_rank() : 1;
  using mesh_type = Mesh;
  using value_type = T;
  static constexpr bool extents_static = LhsExtents::all_static && RhsExtents::all_static;

  // Whether the inputs satisfy rules 1 and 2 (else exactly one diagnostic fired).
  static constexpr bool inputs_valid =
      check_einsum_inputs<Subscripts, Mesh, LhsSpec, RhsSpec, OutSpec, LhsExtents, RhsExtents,
                          T>();

  template <einsum_problem Problem, char Letter, axis_name Axis>
  static constexpr bool check_choice() {
    return check_einsum_choice<Problem, Letter, Axis>();
  }

  static constexpr einsum_equation equation() { return equation_of<Subscripts>; }
  static constexpr einsum_shapes<rank> shapes() {
    return form_shapes<LhsExtents, RhsExtents, T, rank, inputs_valid>();
  }
  static constexpr einsum_choice<rank> make() {
    if constexpr (!inputs_valid) {
      return cleared_choice<rank>();
    } else {
      return einsum_choice_for<Subscripts, Mesh, LhsSpec, RhsSpec, OutSpec, LhsExtents,
                               RhsExtents, T, LhsUnreduced, RhsUnreduced, rank>();
    }
  }
};

// What einsum_valid answers: every check above, without diagnosing.
template <einsum_subscripts S, class A, class B, class Out>
constexpr bool einsum_valid_check() {
  constexpr einsum_equation eq = equation_of<S>;
  using Mesh = typename A::mesh_type;
  using T = typename A::value_type;
  using LE = typename A::extents_type;
  using RE = typename B::extents_type;
  if constexpr (!eq.ok() || !std::is_same_v<Mesh, typename B::mesh_type> ||
                !std::is_same_v<T, typename B::value_type> ||
                !is_gemm_element_v<T> ||
                LE::rank != eq.lhs_rank || RE::rank != eq.rhs_rank) {
    return false;
  } else if constexpr (!valid_spec<Mesh, typename A::spec, LE::rank> ||
                       !valid_spec<Mesh, typename B::spec, RE::rank>) {
    return false;
  } else if constexpr (!valid_spec<Mesh,
                                   std::conditional_t<std::is_same_v<Out, auto_out>, spec<>, Out>,
                                   eq.result_rank()>) {
    return false;
  } else if constexpr (einsum_extent_mismatch<S, LE, RE>().letter != 0) {
    return false;
  } else {
    return einsum_choice_for<S, Mesh, typename A::spec, typename B::spec, Out, LE, RE, T,
                             typename A::unreduced_type, typename B::unreduced_type>()
               .problem == einsum_problem::none;
  }
}

}  // namespace detail

template <einsum_subscripts Subscripts, mesh_like Mesh, spec_like LhsSpec, spec_like RhsSpec,
          class OutSpec = auto_out,
          extents_like LhsExtents = dextents<detail::equation_of<Subscripts>.lhs_rank>,
          extents_like RhsExtents = dextents<detail::equation_of<Subscripts>.rhs_rank>,
          class T = float, unreduced_like LhsUnreduced = unreduced<>,
          unreduced_like RhsUnreduced = unreduced<>>
struct einsum_plan
    : detail::contraction_members<detail::einsum_form<Subscripts, Mesh, LhsSpec, RhsSpec, OutSpec,
                                                      LhsExtents, RhsExtents, T, LhsUnreduced,
                                                      RhsUnreduced>> {
 private:
  using form = detail::einsum_form<Subscripts, Mesh, LhsSpec, RhsSpec, OutSpec, LhsExtents,
                                   RhsExtents, T, LhsUnreduced, RhsUnreduced>;

 public:
  static constexpr detail::einsum_equation equation = detail::equation_of<Subscripts>;
  // The plan rank (see einsum_form).
  static constexpr std::size_t rank = form::rank;
  static constexpr std::size_t lhs_rank = form::lhs_rank;
  static constexpr std::size_t rhs_rank = form::rhs_rank;
  static constexpr std::size_t result_rank = form::result_rank;
  using mesh_type = Mesh;
  using value_type = T;
  static constexpr bool out_named = !std::is_same_v<OutSpec, auto_out>;
  static constexpr einsum_subscripts subscripts() { return Subscripts; }

  // choice (the plan as a value, what ts::einsum executes), inputs_valid, valid, lhs_spec /
  // rhs_spec, lhs_gemm_spec / rhs_gemm_spec, local_spec / local_unreduced, out_spec /
  // out_unreduced, steps, collectives, communicates, bytes_moved, flops, extents_static,
  // bytes_per_device, flops_per_device and describe() ("all_gather(rhs, dim 0, over y); local
  // gemm"): from detail::contraction_members, shared with matmul_plan.
};

// einsum_plan_for<Subscripts, A, B[, OutSpec]>: the plan ts::einsum<Subscripts, OutSpec>(a, b)
// runs on arrays of types A and B.
template <einsum_subscripts Subscripts, class A, class B, class OutSpec = auto_out>
using einsum_plan_for =
    einsum_plan<Subscripts, typename A::mesh_type, typename A::spec, typename B::spec, OutSpec,
                typename A::extents_type, typename B::extents_type, typename A::value_type,
                typename A::unreduced_type, typename B::unreduced_type>;

// einsum_valid<Subscripts, A, B[, OutSpec]>: whether ts::einsum<Subscripts[, OutSpec]>(a, b)
// compiles for arrays of types A and B; never fires a diagnostic.
template <einsum_subscripts Subscripts, class A, class B, class OutSpec = auto_out>
inline constexpr bool einsum_valid = detail::einsum_valid_check<Subscripts, A, B, OutSpec>();

}  // namespace typeshard
