// typeshard/plan/matmul_plan.hpp: the compile-time plan of a sharded matmul (DESIGN rule 2):
// the einsum plan of "...ij,...jk->...ik" with matmul's rule wording.
//
//   using plan = ts::matmul_plan<mesh_2x2, ts::spec<ts::none, "x">, ts::spec<ts::none, ts::none>>;
//   static_assert(std::is_same_v<plan::out_spec, ts::spec<ts::none, ts::none>>);
//   static_assert(plan::steps[0].kind == ts::step_kind::all_gather);
//   static_assert(!ts::communication_free<plan>);
//   plan::describe();   // "all_gather(lhs, dim 1, over x); local gemm"
//
// C[..., I, K] = A[..., I, J] . B[..., J, K]: both operands have the same rank >= 2 and
// the leading dimensions are batch dimensions. A matmul is the einsum "...ij,...jk->...ik"
// (batch letters a, b, ..., then i, j, k: detail::matmul_equation), planned by the one
// contraction planner (detail/einsum_planner.hpp) with one difference: batch dimensions
// never move before the local product. Sharded alike in both operands they stay; sharded in
// one only, the other operand reads its block of them (a local slice, no communication);
// sharded over different axes they are an error, output spec or not. Without an output spec
// the choice follows DESIGN's case rules per letter: J sharded alike (or in neither) moves
// nothing and leaves the result unreduced over J's axes; J sharded in one operand is
// gathered there; over different axes the cheaper operand is gathered and reads the other's
// blocks; I and K on one axis (case 4) is an error that asks for an output spec. With an
// output spec, the candidate moving the fewest bytes per device wins (detail/einsum_cost.hpp).
// The diagnostics name matmul's terms (rows I, columns K, batch dimension d), not letters.
//
//   matmul_plan<Mesh, LhsSpec, RhsSpec,
//               OutSpec    = ts::auto_out,          // or the output sharding you want
//               LhsExtents = ts::dextents<rank>,    // rank: the longer spec, at least 2
//               RhsExtents = LhsExtents,
//               T          = float,                 // element type, for the byte counts
//               LhsUnreduced = ts::unreduced<>,     // operands that are partial sums (rule 3:
//               RhsUnreduced = ts::unreduced<>>     //   matmul is linear in each operand)
//
// Members, as einsum_plan's (detail/contraction_members.hpp): choice, valid, lhs_spec /
// rhs_spec (the operands as given), lhs_gemm_spec / rhs_gemm_spec (what the local GEMM reads
// after the reshards), local_spec and local_unreduced (the local product), out_spec and
// out_unreduced (the result), steps (std::array<ts::step<rank>, N>, in order), describe(),
// communicates, collectives, bytes_per_device / flops_per_device (static extents),
// bytes_moved(lhs_shape, rhs_shape) and flops (any extents). ts::communication_free<plan>
// holds when no collective runs.
//
// Compile-time vocabulary only: no runtime header is included.
#pragma once

#include <cstddef>
#include <type_traits>

#include "../core/bfloat16.hpp"
#include "../core/detail/diagnose.hpp"
#include "../core/detail/spec_layout.hpp"
#include "../core/extents.hpp"
#include "../core/mesh.hpp"
#include "../core/rules/rule2_matmul.hpp"
#include "../core/rules/rule3_unreduced.hpp"
#include "../core/spec.hpp"
#include "../core/unreduced.hpp"
#include "detail/contraction_members.hpp"
#include "detail/einsum_planner.hpp"
#include "detail/einsum_steps.hpp"
#include "einsum_plan.hpp"

namespace typeshard {

namespace detail {

// The rank a plan is for when no extents are given: the longer spec, at least 2.
template <class LhsSpec, class RhsSpec>
inline constexpr std::size_t default_matmul_rank = max_of<2, max_of<LhsSpec::size, RhsSpec::size>>;

// The first static-extent mismatch of a batch dimension, or Rank.
template <class LhsExtents, class RhsExtents, std::size_t Rank>
constexpr std::size_t batch_extent_mismatch() {
  for (std::size_t d = 0; d + 2 < Rank; ++d)
    if (LhsExtents::is_static(d) && RhsExtents::is_static(d) &&
        LhsExtents::static_extents[d] != RhsExtents::static_extents[d])
      return d;
  return Rank;
}

// Whether J's static extents differ.
template <class LE, class RE>
constexpr bool inner_extents_differ() {
  constexpr std::size_t R = LE::rank;
  return LE::static_extents[R - 1] != dyn && RE::static_extents[R - 2] != dyn &&
         LE::static_extents[R - 1] != RE::static_extents[R - 2];
}

// Static extents: J equal in both operands, and every batch dimension (rule 2).
template <class LE, class RE>
constexpr bool check_matmul_static_extents() {
  constexpr std::size_t R = LE::rank;
  constexpr std::size_t bad_batch = batch_extent_mismatch<LE, RE, R>();
  if constexpr (inner_extents_differ<LE, RE>()) {
    return require<false, diagnostic::matmul_contracting_extents_differ<
                              LE::static_extents[R - 1], RE::static_extents[R - 2]>>::value &&
           false;
  } else if constexpr (bad_batch != R) {
    return require<false, diagnostic::matmul_batch_extents_differ<
                              bad_batch, LE::static_extents[bad_batch],
                              RE::static_extents[bad_batch]>>::value &&
           false;
  } else {
    return true;
  }
}

// Rule 2 on matmul's operands, in matmul's words (what einsum's checks say per letter):
// element type, ranks, rule 1 on every spec, J and batch extents. Fires exactly one
// diagnostic and returns false on the first problem, in the order a reader would fix them.
template <class Mesh, class Lhs, class Rhs, class Out, class LE, class RE, class T>
constexpr bool check_matmul_inputs() {
  constexpr std::size_t R = LE::rank;
  if constexpr (!is_gemm_element_v<T>) {
    return require<false, diagnostic::matmul_element_not_float_or_double<T>>::value && false;
  } else if constexpr (LE::rank != RE::rank || LE::rank < 2) {
    return require<false, diagnostic::matmul_ranks_unsupported<LE::rank, RE::rank>>::value && false;
  } else if constexpr (!check_spec<Mesh, Lhs, R>() || !check_spec<Mesh, Rhs, R>()) {
    return false;  // rule 1 fired
  } else if constexpr (std::is_same_v<Out, auto_out>) {
    return check_matmul_static_extents<LE, RE>();
  } else if constexpr (!axis_not_on<Mesh, Out>().empty()) {
    return require_named<false, axis_not_on<Mesh, Out>(),
                         diagnostic::matmul_out_spec_not_on_mesh>::value &&
           false;
  } else if constexpr (!check_spec<Mesh, Out, R>()) {
    return false;  // rule 1 fired
  } else {
    return check_matmul_static_extents<LE, RE>();
  }
}

// The einsum form of matmul_plan<...> (detail/contraction_members.hpp): "...ij,...jk->...ik"
// with the batch letters fixed, and matmul's wording of rule 2.
template <class Mesh, class LhsSpec, class RhsSpec, class OutSpec, class LhsExtents,
          class RhsExtents, class T, class LhsUnreduced, class RhsUnreduced>
struct matmul_form {
  static constexpr std::size_t rank = LhsExtents::rank >= 2 ? LhsExtents::rank : 2;  // well-formed
  static constexpr std::size_t lhs_rank = rank, rhs_rank = rank, result_rank = rank;
  using mesh_type = Mesh;
  using value_type = T;
  static constexpr bool extents_static = LhsExtents::all_static && RhsExtents::all_static;
  static constexpr bool out_named = !std::is_same_v<OutSpec, auto_out>;

  static constexpr bool inputs_valid =
      check_matmul_inputs<Mesh, LhsSpec, RhsSpec, OutSpec, LhsExtents, RhsExtents, T>();

  // The planner's problems in matmul's words: a batch letter is batch dimension
  // letter - 'a' (matmul_equation), the output letters are I and K.
  template <einsum_problem Problem, char Letter, axis_name Axis>
  static constexpr bool check_choice() {
    if constexpr (Problem == einsum_problem::batch_specs_differ) {
      return require<false, diagnostic::matmul_batch_specs_differ<static_cast<std::size_t>(
                                Letter - 'a')>>::value &&
             false;
    } else if constexpr (Problem == einsum_problem::output_letters_share_axis) {
      return require_named<false, Axis, diagnostic::matmul_free_dims_share_axis>::value && false;
    } else if constexpr (Problem == einsum_problem::batch_axis_taken_twice) {
      return require_named<false, Axis, diagnostic::matmul_batch_axis_on_free_dim>::value &&
             false;
    } else {
      return check_einsum_choice<Problem, Letter, Axis>();  // worded alike for both
    }
  }

  static constexpr einsum_shapes<rank> shapes() {
    return form_shapes<LhsExtents, RhsExtents, T, rank, inputs_valid>();
  }
  // (No equation for invalid inputs: their rank may be one matmul_equation rejects.)
  static constexpr einsum_equation equation() {
    if constexpr (inputs_valid)
      return matmul_equation<rank>();
    else
      return {};
  }
  static constexpr einsum_choice<rank> make() {
    if constexpr (!inputs_valid) {
      return cleared_choice<rank>();
    } else {
      using padded_out = std::conditional_t<out_named, OutSpec, spec<>>;
      return plan_matmul<Mesh, rank>(spec_array_of<LhsSpec, rank>(),
                                     spec_array_of<RhsSpec, rank>(), out_named,
                                     spec_array_of<padded_out, rank>(), shapes(),
                                     unreduced_list<LhsUnreduced>(),
                                     unreduced_list<RhsUnreduced>());
    }
  }
};

}  // namespace detail

template <mesh_like Mesh, spec_like LhsSpec, spec_like RhsSpec, class OutSpec = auto_out,
          extents_like LhsExtents = dextents<detail::default_matmul_rank<LhsSpec, RhsSpec>>,
          extents_like RhsExtents = LhsExtents, class T = float,
          unreduced_like LhsUnreduced = unreduced<>, unreduced_like RhsUnreduced = unreduced<>>
struct matmul_plan
    : detail::contraction_members<detail::matmul_form<Mesh, LhsSpec, RhsSpec, OutSpec, LhsExtents,
                                                      RhsExtents, T, LhsUnreduced, RhsUnreduced>> {
  static constexpr std::size_t rank = LhsExtents::rank;
  using mesh_type = Mesh;
  using value_type = T;
  static constexpr bool out_named = !std::is_same_v<OutSpec, auto_out>;
  // "xy,yz->xz", "axy,ayz->axz", ...: the einsum ts::matmul runs (for valid inputs).
  static constexpr einsum_subscripts subscripts() { return detail::matmul_subscripts<rank>(); }

  // choice (the einsum plan as a value, what ts::matmul executes), inputs_valid, valid, the
  // specs, steps, collectives, communicates, bytes_moved, flops, extents_static,
  // bytes_per_device, flops_per_device and describe() ("all_gather(lhs, dim 1, over x); local
  // gemm"): from detail::contraction_members, shared with einsum_plan.
};

// matmul_plan_for<A, B[, OutSpec]>: the plan ts::matmul<OutSpec>(a, b) runs on arrays of
// types A and B.
template <class A, class B, class OutSpec = auto_out>
using matmul_plan_for =
    matmul_plan<typename A::mesh_type, typename A::spec, typename B::spec, OutSpec,
                typename A::extents_type, typename B::extents_type, typename A::value_type,
                typename A::unreduced_type, typename B::unreduced_type>;

namespace detail {

// What matmul_valid answers: check_matmul_inputs' and the planner's checks, without
// diagnosing.
template <class A, class B, class Out>
constexpr bool matmul_valid_check() {
  using Mesh = typename A::mesh_type;
  using T = typename A::value_type;
  using LE = typename A::extents_type;
  using RE = typename B::extents_type;
  constexpr std::size_t R = LE::rank;
  constexpr bool named = !std::is_same_v<Out, auto_out>;
  using padded_out = std::conditional_t<named, Out, spec<>>;
  if constexpr (!std::is_same_v<Mesh, typename B::mesh_type> ||
                !std::is_same_v<T, typename B::value_type> || !is_gemm_element_v<T> ||
                R != RE::rank || R < 2) {
    return false;
  } else if constexpr (!valid_spec<Mesh, typename A::spec, R> ||
                       !valid_spec<Mesh, typename B::spec, R> ||
                       !valid_spec<Mesh, padded_out, R>) {
    return false;
  } else if constexpr (inner_extents_differ<LE, RE>() || batch_extent_mismatch<LE, RE, R>() != R) {
    return false;
  } else {
    return plan_matmul<Mesh, R>(spec_array_of<typename A::spec, R>(),
                                spec_array_of<typename B::spec, R>(), named,
                                spec_array_of<padded_out, R>(),
                                nominal_einsum_shapes<LE, RE, R>(sizeof(T)),
                                unreduced_list<typename A::unreduced_type>(),
                                unreduced_list<typename B::unreduced_type>())
               .problem == einsum_problem::none;
  }
}

}  // namespace detail

// matmul_valid<A, B[, OutSpec]>: whether ts::matmul<OutSpec>(a, b) compiles for arrays of
// types A and B; never fires a diagnostic (for requires-clauses and generic code).
template <class A, class B, class OutSpec = auto_out>
inline constexpr bool matmul_valid = detail::matmul_valid_check<A, B, OutSpec>();

}  // namespace typeshard
