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

// The description of one operand's backward, X's: the einsum T (S transposed for X) of the
// cotangent G and the other operand's value Other, then where its result goes.
template <einsum_subscripts T, class X, class G, class Other>
std::string describe_einsum_operand(const char* operand, const char* other) {
  using XV = value_t<X>;
  using plan = einsum_transpose_plan<T, XV, G, Other>;
  using raw =
      decltype(einsum_transpose<T, XV>(std::declval<const G&>(), std::declval<const Other&>()));
  std::string out = "\n  d ";
  out.append(operand).append(" = einsum ").append(T.view()).append("(d out, ").append(other);
  out.append("): ").append(plan::describe()).append("\n").append(delivery_description<X, raw>());
  return out;
}

// The description of the backward of an einsum S whose forward result is of type R, for
// ts::backward_plans (record's describer).
template <einsum_subscripts S, class R, class A, class B>
struct describe_einsum {
  static std::string text();
};
template <einsum_subscripts S, class R, class A, class B>
std::string describe_einsum<S, R, A, B>::text() {
  using G = cotangent_t<R>;
  // Built with append: g++ 12 at -O3 warns falsely (-Warray-bounds) on `"..." + string`.
  std::string out = "einsum ";
  out.append(S.view()).append(" backward (d out: ").append(G::spec::to_string()).append(")");
  if constexpr (traced_like<A>)
    out.append(describe_einsum_operand<einsum_lhs_transpose<S>, A, G, value_t<B>>("lhs", "rhs"));
  if constexpr (traced_like<B>)
    out.append(describe_einsum_operand<einsum_rhs_transpose<S>, B, G, value_t<A>>("rhs", "lhs"));
  return out;
}

// The transpose rule of a contraction in the element type of its operands: operand X's
// cotangent is the einsum with the transposed equation Tr (einsum_transpose).
struct einsum_transpose_rule {
  template <einsum_subscripts Tr, class X, class G, class Other>
  static auto of(const G& g, const Other& other) {
    return einsum_transpose<Tr, value_t<X>>(g, other);
  }
};

// Records the contraction S of a and b (one of them traced) whose forward result is `value`
// (the array ts::einsum's or ts::matmul's): each operand X's cotangent is
// Transpose::of<Tr, X>(g, other), Tr the equation transposed for that operand.
template <einsum_subscripts S, class Transpose, class R, class A, class B, class Describe>
auto record_contraction(R value, const A& a, const B& b, Describe describe) {
  const auto& av = value_of(a);
  const auto& bv = value_of(b);
  return record(
      std::move(value), a, b,
      [bv](const auto& g) { return Transpose::template of<einsum_lhs_transpose<S>, A>(g, bv); },
      [av](const auto& g) { return Transpose::template of<einsum_rhs_transpose<S>, B>(g, av); },
      describe);
}

// The traced result of a contraction whose diagnostic fired (here, or in the forward on the
// arrays, whose result is `value`): a value of a well-formed type, recording nothing.
template <class R, class A, class B>
auto unrecorded_contraction(R value, const A& a, const B& b) {
  return traced<R, grad_contributions<>, -1, plans_of<A, B>()>(std::move(value), tape_of(a, b),
                                                               nullptr);
}

// Whether each traced operand of the contraction S has a gradient (rule 9; fires it if not).
template <einsum_subscripts S, class A, class B>
constexpr bool einsum_differentiable() {
  constexpr bool lhs_ok = !traced_like<A> || einsum_check_differentiable<S, true>();
  constexpr bool rhs_ok = !traced_like<B> || einsum_check_differentiable<S, false>();
  return lhs_ok && rhs_ok;
}

}  // namespace detail

// einsum<Subscripts[, OutSpec]>(a, b) with a traced operand (ts::einsum on arrays otherwise).
template <einsum_subscripts Subscripts, class OutSpec = auto_out, class A, class B>
  requires traced_operands<A, B> && (spec_like<OutSpec> || std::is_same_v<OutSpec, auto_out>)
[[nodiscard]] auto einsum(const A& a, const B& b) {
  using AV = detail::value_t<A>;
  using BV = detail::value_t<B>;
  auto value = typeshard::einsum<Subscripts, OutSpec>(detail::value_of(a), detail::value_of(b));
  using R = decltype(value);
  if constexpr (!einsum_valid<Subscripts, AV, BV, OutSpec> ||
                !detail::einsum_differentiable<Subscripts, A, B>())
    return detail::unrecorded_contraction(std::move(value), a, b);
  else
    return detail::record_contraction<Subscripts, detail::einsum_transpose_rule>(
        std::move(value), a, b, detail::describe_einsum<Subscripts, R, A, B>{});
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
  auto value = typeshard::matmul<OutSpec>(detail::value_of(a), detail::value_of(b));
  using R = decltype(value);
  if constexpr (!matmul_valid<AV, BV, OutSpec>) {
    return detail::unrecorded_contraction(std::move(value), a, b);
  } else {
    constexpr einsum_subscripts S = detail::matmul_subscripts<AV::rank>();
    return detail::record_contraction<S, detail::einsum_transpose_rule>(
        std::move(value), a, b, detail::describe_einsum<S, R, A, B>{});
  }
}

}  // namespace typeshard
