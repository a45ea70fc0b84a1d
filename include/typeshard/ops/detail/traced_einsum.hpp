// typeshard/ops/detail/traced_einsum.hpp: ts::einsum and ts::matmul on traced values (see
// ops/traced.hpp): the forward is the array call's (its plan, its rules), each operand's
// cotangent the einsum with the transposed equation.
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "../einsum.hpp"
#include "../matmul.hpp"
#include "traced_value.hpp"

namespace typeshard {

// ---- einsum and matmul ------------------------------------------------------------------------

namespace detail {

// d operand = einsum<T>(g, other): planned without an output spec when that is valid (the
// result may stay unreduced; the sink reshards it or keeps it for a parameter), else with the
// operand's spec.
template <einsum_subscripts T, class Operand, class G, class Other>
using einsum_transpose_plan =
    std::conditional_t<einsum_valid<T, G, Other>, einsum_plan_for<T, G, Other>,
                       einsum_plan_for<T, G, Other, typename Operand::spec>>;

template <einsum_subscripts T, class Operand, class G, class Other>
auto einsum_transpose(const G& g, const Other& other) {
  if constexpr (einsum_valid<T, G, Other>)
    return typeshard::einsum<T>(g, other);
  else
    return typeshard::einsum<T, typename Operand::spec>(g, other);
}

// The description of the backward of an einsum S whose forward result is of type R, for
// ts::backward_plans (record's describer).
template <einsum_subscripts S, class R, class A, class B>
struct describe_einsum {
  static std::string text();
};
template <einsum_subscripts S, class R, class A, class B>
std::string describe_einsum<S, R, A, B>::text() {
  using AV = value_t<A>;
  using BV = value_t<B>;
  using G = cotangent_t<R>;
  // Built with append: g++ 12 at -O3 warns falsely (-Warray-bounds) on `"..." + string`.
  std::string out = "einsum ";
  out.append(S.view()).append(" backward (d out: ").append(G::spec::to_string()).append(")");
  if constexpr (traced_like<A>) {
    constexpr einsum_subscripts T = einsum_lhs_transpose<S>;
    using plan = einsum_transpose_plan<T, AV, G, BV>;
    using raw =
        decltype(einsum_transpose<T, AV>(std::declval<const G&>(), std::declval<const BV&>()));
    out.append("\n  d lhs = einsum ").append(T.view()).append("(d out, rhs): ");
    out.append(plan::describe()).append("\n").append(delivery_description<A, raw>());
  }
  if constexpr (traced_like<B>) {
    constexpr einsum_subscripts T = einsum_rhs_transpose<S>;
    using plan = einsum_transpose_plan<T, BV, G, AV>;
    using raw =
        decltype(einsum_transpose<T, BV>(std::declval<const G&>(), std::declval<const AV&>()));
    out.append("\n  d rhs = einsum ").append(T.view()).append("(d out, lhs): ");
    out.append(plan::describe()).append("\n").append(delivery_description<B, raw>());
  }
  return out;
}

// Records the contraction S of traced a and b whose forward result is `value` (the array
// ts::einsum's or ts::matmul's): each operand's cotangent is the einsum with the transposed
// equation (einsum_transpose).
template <einsum_subscripts S, class R, class A, class B>
auto record_einsum(R value, const A& a, const B& b) {
  using AV = value_t<A>;
  using BV = value_t<B>;
  const AV& av = value_of(a);
  const BV& bv = value_of(b);
  return record(
      std::move(value), a, b,
      [bv](const auto& g) { return einsum_transpose<einsum_lhs_transpose<S>, AV>(g, bv); },
      [av](const auto& g) { return einsum_transpose<einsum_rhs_transpose<S>, BV>(g, av); },
      describe_einsum<S, R, A, B>{});
}

}  // namespace detail

// einsum<Subscripts[, OutSpec]>(a, b) with a traced operand (ts::einsum on arrays otherwise).
template <einsum_subscripts Subscripts, class OutSpec = auto_out, class A, class B>
  requires traced_operands<A, B> && (spec_like<OutSpec> || std::is_same_v<OutSpec, auto_out>)
[[nodiscard]] auto einsum(const A& a, const B& b) {
  using AV = detail::value_t<A>;
  using BV = detail::value_t<B>;
  const AV& av = detail::value_of(a);
  const BV& bv = detail::value_of(b);
  using forward = decltype(typeshard::einsum<Subscripts, OutSpec>(av, bv));
  constexpr bool lhs_ok =
      !traced_like<A> || detail::einsum_check_differentiable<Subscripts, true>();
  constexpr bool rhs_ok =
      !traced_like<B> || detail::einsum_check_differentiable<Subscripts, false>();
  if constexpr (!einsum_valid<Subscripts, AV, BV, OutSpec> || !lhs_ok || !rhs_ok) {
    // A diagnostic fired (here, or in the forward einsum): a value of a well-formed type.
    return traced<forward, grad_contributions<>, -1, detail::plans_of<A, B>()>(
        typeshard::einsum<Subscripts, OutSpec>(av, bv), detail::tape_of(a, b), nullptr);
  } else {
    return detail::record_einsum<Subscripts>(typeshard::einsum<Subscripts, OutSpec>(av, bv), a,
                                             b);
  }
}

// matmul<OutSpec>(a, b) with a traced operand: forward, ts::matmul on the arrays (its plan
// and its rules: accepted exactly where the array call is; batch dimensions never move, so
// sharded over different axes they are an error even with an output spec); backward, the
// einsums of "...ij,...jk->...ik" transposed.
template <class OutSpec = auto_out, class A, class B>
  requires traced_operands<A, B> && (spec_like<OutSpec> || std::is_same_v<OutSpec, auto_out>)
[[nodiscard]] auto matmul(const A& a, const B& b) {
  using AV = detail::value_t<A>;
  using BV = detail::value_t<B>;
  const AV& av = detail::value_of(a);
  const BV& bv = detail::value_of(b);
  using forward = decltype(typeshard::matmul<OutSpec>(av, bv));
  if constexpr (!matmul_valid<AV, BV, OutSpec>) {
    // ts::matmul on the arrays fires its diagnostic; a value of a well-formed type.
    return traced<forward, grad_contributions<>, -1, detail::plans_of<A, B>()>(
        typeshard::matmul<OutSpec>(av, bv), detail::tape_of(a, b), nullptr);
  } else {
    return detail::record_einsum<detail::matmul_subscripts<AV::rank>()>(
        typeshard::matmul<OutSpec>(av, bv), a, b);
  }
}

}  // namespace typeshard
