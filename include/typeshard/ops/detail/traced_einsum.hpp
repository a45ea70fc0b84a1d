// typeshard/ops/detail/traced_einsum.hpp: the backward (transpose) rules of ts::einsum and
// ts::matmul, which their one entry points (ops/einsum.hpp, ops/matmul.hpp) call on a traced
// operand (see ops/traced.hpp): the forward is the array call's (its plan, its rules), each
// operand's cotangent the einsum with the transposed equation (with a preferred element: see
// ops/detail/traced_mixed.hpp).
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "../astype.hpp"
#include "../einsum.hpp"
#include "../matmul.hpp"
#include "../reshard.hpp"
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

inline std::string describe_mixed_einsum() {
  return "einsum (preferred_element) backward: each operand's cotangent is the transposed "
         "einsum of the cotangent cast to the operand's element type, accumulated in the "
         "preferred element, resharded to the operand's spec in it, then cast";
}

// The transpose rule of a contraction with preferred element U (ops/detail/traced_mixed.hpp
// says why): d operand X (element T) = einsum<Tr>(g as T, other) accumulated in U, resharded
// to the operand's spec in U, rounded to T; for a cast leaf X the accumulated einsum in U
// itself (the cast leaf's sink keeps its unreduced axes).
template <class U>
struct mixed_transpose_rule {
  template <einsum_subscripts Tr, class X, class G, class Other>
  static auto of(const G& g, const Other& other) {
    using Operand = value_t<X>;
    using T = typename Operand::value_type;
    constexpr bool cast_leaf = is_cast_leaf_v<X>;
    const auto gt = typeshard::astype<T>(g);
    using GT = std::remove_cvref_t<decltype(gt)>;
    if constexpr (cast_leaf && einsum_valid<Tr, GT, Other>)
      return typeshard::einsum<Tr>(gt, other, preferred_element<U>);
    else if constexpr (cast_leaf)
      return typeshard::einsum<Tr, typename Operand::spec>(gt, other, preferred_element<U>);
    else if constexpr (einsum_valid<Tr, GT, Other>)
      return typeshard::astype<T>(typeshard::reshard<typename Operand::spec>(
          typeshard::einsum<Tr>(gt, other, preferred_element<U>)));
    else
      return typeshard::astype<T>(typeshard::einsum<Tr, typename Operand::spec>(
          gt, other, preferred_element<U>));
  }
};

// The traced result of the contraction S of a and b whose forward result is `value`, of
// element type U: the backward recorded (in the operands' element type, or with preferred
// element U) when Valid and the forward's diagnostics did not fire, else nothing recorded.
template <einsum_subscripts S, bool Valid, class U, class R, class A, class B>
auto traced_contraction(R value, const A& a, const B& b) {
  if constexpr (!Valid || !std::is_same_v<typename R::value_type, U>)
    return unrecorded_contraction(std::move(value), a, b);
  else if constexpr (std::is_same_v<typename value_t<A>::value_type, U>)
    return record_contraction<S, einsum_transpose_rule>(std::move(value), a, b,
                                                        describe_einsum<S, R, A, B>{});
  else
    return record_contraction<S, mixed_transpose_rule<U>>(std::move(value), a, b,
                                                          &describe_mixed_einsum);
}

// ts::einsum's backward rule (declared in ops/einsum.hpp).
template <einsum_subscripts S, class OutSpec, class U, class A, class B>
auto traced_einsum(const A& a, const B& b) {
  using AV = value_t<A>;
  using BV = value_t<B>;
  auto value = einsum_arrays<S, OutSpec, U>(value_of(a), value_of(b));
  constexpr bool valid = einsum_valid<S, AV, BV, OutSpec> && einsum_differentiable<S, A, B>();
  return traced_contraction<S, valid, U>(std::move(value), a, b);
}

// ts::matmul's backward rule (declared in ops/matmul.hpp): the einsum's of matmul_subscripts.
template <class OutSpec, class U, class A, class B>
auto traced_matmul(const A& a, const B& b) {
  using AV = value_t<A>;
  using BV = value_t<B>;
  auto value = matmul_arrays<OutSpec, U>(value_of(a), value_of(b));
  if constexpr (!matmul_valid<AV, BV, OutSpec>)
    return unrecorded_contraction(std::move(value), a, b);
  else
    return traced_contraction<matmul_subscripts<AV::rank>(), true, U>(std::move(value), a, b);
}

}  // namespace detail

}  // namespace typeshard
