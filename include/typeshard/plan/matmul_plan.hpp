// typeshard/plan/matmul_plan.hpp: the compile-time plan of a sharded matmul (DESIGN rule 2).
//
//   using plan = ts::matmul_plan<mesh_2x2, ts::spec<ts::none, "x">, ts::spec<ts::none, ts::none>>;
//   static_assert(std::is_same_v<plan::out_spec, ts::spec<ts::none, ts::none>>);
//   static_assert(plan::steps[0].kind == ts::step_kind::all_gather);
//   static_assert(!ts::communication_free<plan>);
//   plan::describe();   // "all_gather(lhs, dim 1, over x); local gemm"
//
// C[..., I, K] = A[..., I, J] . B[..., J, K]: both operands have the same rank >= 2 and
// the leading dimensions are batch dimensions, sharded alike in both or in one only (the
// other operand then reads its block of it: a local slice, no communication). The plan says which
// collectives run on which operand, the local GEMM, and the reduction of the partial sums;
// how the choice is made (by DESIGN's case rules without an output spec, by bytes moved
// per device with one) is documented in detail/matmul_planner.hpp.
//
//   matmul_plan<Mesh, LhsSpec, RhsSpec,
//               OutSpec    = ts::auto_out,          // or the output sharding you want
//               LhsExtents = ts::dextents<rank>,    // rank: the longer spec, at least 2
//               RhsExtents = LhsExtents,
//               T          = float,                 // element type, for the byte counts
//               LhsUnreduced = ts::unreduced<>,     // operands that are partial sums (rule 3:
//               RhsUnreduced = ts::unreduced<>>     //   matmul is linear in each operand)
//
// Members: lhs_spec / rhs_spec (the operands as given), lhs_gemm_spec / rhs_gemm_spec (what
// the local GEMM reads), local_spec and local_unreduced (the local product), out_spec and
// out_unreduced (the result), steps (std::array<ts::step<rank>, N>, in order), describe(),
// communicates, collectives, bytes_per_device / flops_per_device (static extents),
// bytes_moved(lhs_shape, rhs_shape) (any extents). ts::communication_free<plan> holds when
// no collective runs.
//
// Compile-time vocabulary only: no runtime header is included.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "../core/bfloat16.hpp"
#include "../core/config.hpp"
#include "../core/detail/diagnose.hpp"
#include "detail/contraction_members.hpp"
#include "detail/einsum_planner.hpp"
#include "detail/matmul_planner.hpp"
#include "../core/detail/spec_layout.hpp"
#include "../core/detail/unreduced_from.hpp"
#include "../core/extents.hpp"
#include "../core/mesh.hpp"
#include "reshard_plan.hpp"
#include "../core/spec.hpp"
#include "../core/unreduced.hpp"
#include "step.hpp"
#include "../core/rules/rule2_matmul.hpp"
#include "../core/rules/rule3_unreduced.hpp"

namespace typeshard {

// auto_out: ts::matmul without a named output spec (the result's sharding follows from the
// operands', and may be unreduced).
struct auto_out {};

namespace detail {

inline constexpr std::size_t max_matmul_steps = 3 * max_reshard_steps + 2 * 4 + 1;

template <std::size_t Rank>
using matmul_step_list = step_array<Rank, max_matmul_steps>;

// The steps of a choice, for shapes `sh` (which decide the even or uneven reshard variant):
// what matmul_plan::steps lists and what ts::matmul runs (ops/detail/executor.hpp).
// An operand that holds all of J, or of a batch dimension the other shards (lhs_read /
// rhs_read), is sliced to the other's blocks, which the GEMM reads in place, a slice step
// per dimension. matmul_steps_body computes them once the shapes have
// decided which reshards are even (the only way they enter), from values only; callers use
// matmul_steps_of (below).
template <std::size_t Rank>
TYPESHARD_COLD
constexpr matmul_step_list<Rank> matmul_steps_body(const matmul_choice<Rank>& c, bool even_lhs,
                                                   bool even_rhs, bool even_out) {
  matmul_step_list<Rank> out;
  append_reshard(out, step_operand::lhs, c.lhs,
                 plan_reshard(c.lhs, c.lhs_unreduced, c.lhs_gemm, c.lhs_unreduced, even_lhs));
  append_reshard(out, step_operand::rhs, c.rhs,
                 plan_reshard(c.rhs, c.rhs_unreduced, c.rhs_gemm, c.rhs_unreduced, even_rhs));
  spec_array<Rank> cur = c.lhs_gemm;
  for (std::size_t d = 0; d < Rank; ++d)
    if (!(c.lhs_read[d] == cur[d])) {
      cur[d] = c.lhs_read[d];
      out.push(step<Rank>{step_kind::slice, step_operand::lhs, d, d, c.lhs_read[d], cur,
                          c.lhs_unreduced});
    }
  cur = c.rhs_gemm;
  for (std::size_t d = 0; d < Rank; ++d)
    if (!(c.rhs_read[d] == cur[d])) {
      cur[d] = c.rhs_read[d];
      out.push(step<Rank>{step_kind::slice, step_operand::rhs, d, d, c.rhs_read[d], cur,
                          c.rhs_unreduced});
    }
  out.push(step<Rank>{step_kind::local_gemm, step_operand::out, 0, 0, dim_spec{}, c.local,
                      c.partial});
  if (c.out_named)
    append_reshard(out, step_operand::out, c.local,
                   plan_reshard(c.local, c.partial, c.out, dim_spec{}, even_out));
  return out;
}

// The same computed while a program runs (ts::matmul plans for the actual extents): a plain
// function of the rank, compiled once per rank in typeshard::runtime (extern template below).
template <std::size_t Rank>
TYPESHARD_COLD matmul_step_list<Rank> matmul_steps_at_run_time(const matmul_choice<Rank>& c, bool even_lhs,
                                                bool even_rhs, bool even_out) {
  return matmul_steps_body(c, even_lhs, even_rhs, even_out);
}

#if defined(TYPESHARD_SEPARATE_COMPILATION)
#define TYPESHARD_MATMUL_STEPS_INSTANCE(prefix, R)                                             \
  prefix matmul_step_list<R> matmul_steps_at_run_time<R>(const matmul_choice<R>&, bool, bool,  \
                                                         bool);
TYPESHARD_MATMUL_STEPS_INSTANCE(extern template, 2)
TYPESHARD_MATMUL_STEPS_INSTANCE(extern template, 3)
TYPESHARD_MATMUL_STEPS_INSTANCE(extern template, 4)
#endif

template <class Mesh, std::size_t Rank>
constexpr matmul_step_list<Rank> matmul_steps_of(const matmul_choice<Rank>& c,
                                                 const matmul_shapes<Rank>& sh) {
  const bool even_lhs = even_between<Mesh>(c.lhs, c.lhs_gemm, sh.lhs);
  const bool even_rhs = even_between<Mesh>(c.rhs, c.rhs_gemm, sh.rhs);
  const bool even_out = c.out_named && even_between<Mesh>(c.local, c.out, sh.out());
  if (std::is_constant_evaluated()) return matmul_steps_body(c, even_lhs, even_rhs, even_out);
  return matmul_steps_at_run_time(c, even_lhs, even_rhs, even_out);
}
// The same on a mesh held as a value (the executor's, core/detail/mesh_value.hpp).
template <std::size_t Rank>
matmul_step_list<Rank> matmul_steps_of(const mesh_value& m, const matmul_choice<Rank>& c,
                                       const matmul_shapes<Rank>& sh) {
  return matmul_steps_at_run_time(c, even_between(m, c.lhs, c.lhs_gemm, sh.lhs),
                                  even_between(m, c.rhs, c.rhs_gemm, sh.rhs),
                                  c.out_named && even_between(m, c.local, c.out, sh.out()));
}

// spec_from<Array>(index_sequence): declared only, for decltype: the spec type whose
// entries are the values of a spec_array (unreduced_from, its twin for unreduced types, is in
// core/detail/unreduced_from.hpp). A function rather than a class template with a defaulted
// index_sequence argument: clang 14 crashes on `List.count` in a default template argument.
template <auto Array, std::size_t... I>
spec<Array[I]...> spec_from(std::index_sequence<I...>);

template <std::size_t A, std::size_t B>
inline constexpr std::size_t max_of = A < B ? B : A;

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

// The first axis of Spec the mesh does not have, or an empty name.
template <class Mesh, class Spec>
constexpr axis_name axis_not_on() {
  for (const dim_spec& d : Spec::dims)
    for (std::size_t a = 0; a < d.count; ++a)
      if (!Mesh::contains(d.axes[a])) return d.axes[a];
  return {};
}

// Static extents: J equal in both operands, and every batch dimension (rule 2).
template <class LE, class RE>
constexpr bool check_matmul_extents() {
  constexpr std::size_t R = LE::rank;
  constexpr std::size_t lj = LE::static_extents[R - 1], rj = RE::static_extents[R - 2];
  constexpr std::size_t bad_batch = batch_extent_mismatch<LE, RE, R>();
  if constexpr (lj != dyn && rj != dyn && lj != rj) {
    return require<false, diagnostic::matmul_contracting_extents_differ<lj, rj>>::value && false;
  } else if constexpr (bad_batch != R) {
    return require<false, diagnostic::matmul_batch_extents_differ<
                              bad_batch, LE::static_extents[bad_batch],
                              RE::static_extents[bad_batch]>>::value &&
           false;
  } else {
    return true;
  }
}

// Checks a plan's inputs; fires exactly one diagnostic and returns false on the first
// problem (in the order a reader would fix them).
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
    return check_matmul_extents<LE, RE>();
  } else if constexpr (!axis_not_on<Mesh, Out>().empty()) {
    return require_named<false, axis_not_on<Mesh, Out>(),
                         diagnostic::matmul_out_spec_not_on_mesh>::value &&
           false;
  } else if constexpr (!check_spec<Mesh, Out, R>()) {
    return false;  // rule 1 fired
  } else {
    return check_matmul_extents<LE, RE>();
  }
}
// Fires the diagnostic of a problem the planner found (one at most).
template <matmul_problem Problem, std::size_t Dim, axis_name Axis>
constexpr bool check_matmul_choice() {
  if constexpr (Problem == matmul_problem::batch_specs_differ) {
    return require<false, diagnostic::matmul_batch_specs_differ<Dim>>::value && false;
  } else if constexpr (Problem == matmul_problem::free_dims_share_axis) {
    return require_named<false, Axis, diagnostic::matmul_free_dims_share_axis>::value && false;
  } else if constexpr (Problem == matmul_problem::batch_axis_on_free_dim) {
    return require_named<false, Axis, diagnostic::matmul_batch_axis_on_free_dim>::value && false;
  } else if constexpr (Problem == matmul_problem::unreduced_conflict) {
    return require_named<false, Axis, diagnostic::matmul_unreduced_conflict>::value && false;
  } else if constexpr (Problem == matmul_problem::too_many_partial_axes) {
    // <Dim>, not a constant: the argument must depend on this template, or the diagnostic
    // would fire when the header is parsed.
    return require<false, diagnostic::matmul_too_many_partial_axes<Dim>>::value && false;
  } else {
    return true;
  }
}

}  // namespace detail

namespace detail {

// The einsum form of matmul_plan<...> (detail/contraction_members.hpp: what the plan's shared
// members are derived from): "...ij,...jk->...ik" with the batch letters fixed, its
// rules-1-and-2 check, its choice (also as a matmul_choice), shapes and steps.
template <class Mesh, class LhsSpec, class RhsSpec, class OutSpec, class LhsExtents,
          class RhsExtents, class T, class LhsUnreduced, class RhsUnreduced>
struct matmul_form {
  static constexpr std::size_t rank = LhsExtents::rank >= 2 ? LhsExtents::rank : 2;  // well-formed
  using mesh_type = Mesh;
  using value_type = T;
  static constexpr bool extents_static = LhsExtents::all_static && RhsExtents::all_static;
  static constexpr bool out_named = !std::is_same_v<OutSpec, auto_out>;

  // Whether the inputs satisfy rules 1 and 2 (else exactly one diagnostic fired).
  static constexpr bool inputs_valid =
      check_matmul_inputs<Mesh, LhsSpec, RhsSpec, OutSpec, LhsExtents, RhsExtents, T>();

  static constexpr matmul_shapes<rank> matmul_nominal_shapes() {
    if constexpr (inputs_valid)
      return nominal_shapes<LhsExtents, RhsExtents, rank>(sizeof(T));
    else
      return {};
  }
  static constexpr einsum_shapes<rank> shapes() {
    const matmul_shapes<rank> sh = matmul_nominal_shapes();
    return {sh.lhs, sh.rhs, sh.element_size};
  }
  // (No equation for invalid inputs: their rank may be one matmul_equation rejects.)
  static constexpr einsum_equation equation() {
    if constexpr (inputs_valid)
      return matmul_equation<rank>();
    else
      return {};
  }
  // The einsum choice (what plan_matmul restates as a matmul_choice).
  static constexpr einsum_choice<rank> make() {
    if constexpr (!inputs_valid) {
      return cleared_choice<rank>();
    } else {
      using padded_out = std::conditional_t<out_named, OutSpec, spec<>>;
      return plan_einsum<Mesh, rank>(matmul_equation<rank>(), spec_array_of<LhsSpec, rank>(),
                                     spec_array_of<RhsSpec, rank>(), out_named,
                                     spec_array_of<padded_out, rank>(), shapes(),
                                     unreduced_list<LhsUnreduced>(),
                                     unreduced_list<RhsUnreduced>(), true);
    }
  }
  // The plan as a matmul_choice (for invalid inputs: the operands' specs as placeholders, so
  // the plan's types stay well-formed).
  static constexpr matmul_choice<rank> make_matmul() {
    if constexpr (!inputs_valid) {
      matmul_choice<rank> c;
      c.lhs = c.lhs_gemm = c.lhs_read = c.local = c.out = spec_array_of<LhsSpec, rank>();
      c.rhs = c.rhs_gemm = c.rhs_read = spec_array_of<RhsSpec, rank>();
      return c;
    } else {
      return matmul_choice_of(make());
    }
  }
  static constexpr matmul_step_list<rank> step_list() {
    return matmul_steps_of<Mesh>(make_matmul(), matmul_nominal_shapes());
  }
};

}  // namespace detail

template <mesh_type Mesh, spec_type LhsSpec, spec_type RhsSpec, class OutSpec = auto_out,
          extents_type LhsExtents = dextents<detail::default_matmul_rank<LhsSpec, RhsSpec>>,
          extents_type RhsExtents = LhsExtents, class T = float,
          unreduced_type LhsUnreduced = unreduced<>, unreduced_type RhsUnreduced = unreduced<>>
struct matmul_plan
    : detail::contraction_members<detail::matmul_form<Mesh, LhsSpec, RhsSpec, OutSpec, LhsExtents,
                                                      RhsExtents, T, LhsUnreduced, RhsUnreduced>> {
 private:
  using form = detail::matmul_form<Mesh, LhsSpec, RhsSpec, OutSpec, LhsExtents, RhsExtents, T,
                                   LhsUnreduced, RhsUnreduced>;

 public:
  static constexpr std::size_t rank = LhsExtents::rank;
  using mesh_type = Mesh;
  using value_type = T;
  static constexpr bool out_named = form::out_named;

  // Whether the inputs satisfy rules 1 and 2 (else exactly one diagnostic fired).
  static constexpr bool inputs_valid = form::inputs_valid;

 private:
  static constexpr std::size_t R = form::rank;  // rank, at least 2: keeps the members well-formed

 public:
  // The chosen plan as a value (what ts::matmul executes).
  static constexpr detail::matmul_choice<R> choice = form::make_matmul();

  // Whether a plan exists: the inputs are valid and the rules allow the product.
  static constexpr bool valid =
      inputs_valid &&
      detail::check_matmul_choice<choice.problem, choice.problem_dim, choice.problem_axis>();

  using lhs_spec = decltype(detail::spec_from<choice.lhs>(std::make_index_sequence<R>{}));
  using rhs_spec = decltype(detail::spec_from<choice.rhs>(std::make_index_sequence<R>{}));
  using lhs_gemm_spec = decltype(detail::spec_from<choice.lhs_gemm>(std::make_index_sequence<R>{}));
  using rhs_gemm_spec = decltype(detail::spec_from<choice.rhs_gemm>(std::make_index_sequence<R>{}));
  using local_spec = decltype(detail::spec_from<choice.local>(std::make_index_sequence<R>{}));
  using local_unreduced = decltype(detail::unreduced_from<choice.partial>(
      std::make_index_sequence<choice.partial.count>{}));
  using out_spec = decltype(detail::spec_from<choice.out>(std::make_index_sequence<R>{}));
  using out_unreduced = decltype(detail::unreduced_from<choice.out_unreduced>(
      std::make_index_sequence<choice.out_unreduced.count>{}));

  // steps, collectives, communicates, bytes_moved, flops (the cost model of
  // detail/einsum_cost.hpp on the plan's einsum form), extents_static, bytes_per_device,
  // flops_per_device and describe() ("all_gather(lhs, dim 1, over x); local gemm"): from
  // detail::contraction_members, shared with einsum_plan.
};

// matmul_plan_for<A, B[, OutSpec]>: the plan ts::matmul<OutSpec>(a, b) runs on arrays of
// types A and B.
template <class A, class B, class OutSpec = auto_out>
using matmul_plan_for =
    matmul_plan<typename A::mesh_type, typename A::spec, typename B::spec, OutSpec,
                typename A::extents_type, typename B::extents_type, typename A::value_type,
                typename A::unreduced_type, typename B::unreduced_type>;

}  // namespace typeshard

namespace typeshard {

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
  if constexpr (!std::is_same_v<Mesh, typename B::mesh_type> ||
                !std::is_same_v<T, typename B::value_type> ||
                !is_gemm_element_v<T> || R != RE::rank ||
                R < 2) {
    return false;
  } else if constexpr (!valid_spec<Mesh, typename A::spec, R> ||
                       !valid_spec<Mesh, typename B::spec, R> ||
                       !valid_spec<Mesh, std::conditional_t<std::is_same_v<Out, auto_out>, spec<>, Out>, R>) {
    return false;
  } else if constexpr ((LE::static_extents[R - 1] != dyn && RE::static_extents[R - 2] != dyn &&
                        LE::static_extents[R - 1] != RE::static_extents[R - 2]) ||
                       batch_extent_mismatch<LE, RE, R>() != R) {
    return false;
  } else {
    constexpr bool named = !std::is_same_v<Out, auto_out>;
    return plan_matmul<Mesh, R>(
               spec_array_of<typename A::spec, R>(), spec_array_of<typename B::spec, R>(), named,
               spec_array_of<std::conditional_t<named, Out, spec<>>, R>(),
               nominal_shapes<LE, RE, R>(sizeof(T)),
               unreduced_list<typename A::unreduced_type>(),
               unreduced_list<typename B::unreduced_type>())
               .problem == matmul_problem::none;
  }
}

}  // namespace detail

// matmul_valid<A, B[, OutSpec]>: whether ts::matmul<OutSpec>(a, b) compiles for arrays of
// types A and B; never fires a diagnostic (for requires-clauses and generic code).
template <class A, class B, class OutSpec = auto_out>
inline constexpr bool matmul_valid = detail::matmul_valid_check<A, B, OutSpec>();

}  // namespace typeshard
