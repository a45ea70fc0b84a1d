// typeshard/ops/detail/traced_mixed.hpp: mixed precision on traced values (see ops/traced.hpp):
// ts::astype and the contractions with a preferred_element.
//
//   auto loss = [](auto w, auto x) {                        // w: float master weights
//     auto wb = ts::astype<ts::bfloat16>(w);                // bf16 compute copy
//     auto h = ts::einsum<"bd,dh->bh">(x, wb, ts::preferred_element<float>);   // float
//     return ts::mean(ts::sum<1>(ts::softmax(ts::astype<ts::bfloat16>(h))));
//   };
//   auto [l, g] = ts::value_and_grad(loss)(w, x);           // g: float, w's type
//
// astype<U>(x): the backward casts the cotangent back to x's element type (exact from
// bfloat16 to float; rounded to nearest even the other way). The bfloat16 copy of a float
// differentiated argument is a cast leaf (ops/detail/traced_value.hpp): each use's backward
// result reaches the argument's gradient as its own uses' do, cast to float and unreduced over
// the axes it leaves (a data-parallel weight gradient stays unreduced<"data"> for the caller's
// all-reduce or ZeRO's reduce-scatter, as in a float model), not as one reduced cotangent.
//
// einsum<S[, OutSpec]>(a, b, preferred_element<U>) and matmul(a, b, preferred_element<U>)
// with a traced operand (bfloat16 operands, U = float): the forward accumulates and returns
// U. Each operand's backward is the transposed contraction on the cotangent cast to the
// operand's element type, accumulated in U, resharded to the operand's spec in U (so the
// all-reduce or reduce-scatter of partial sums, e.g. a data-parallel weight gradient, adds in
// float and moves float), then rounded once to the operand's element type; for a cast leaf
// operand, the float contraction itself (unreduced, as a float parameter's). This is the
// documented choice for gradients' reduction: through a preferred_element<float> contraction
// they are reduced in float; through a plain bfloat16 contraction (no preferred_element) in
// bfloat16, moving half the bytes. Either way astype's backward hands the float master weights
// a float gradient; a cast leaf's (a float argument's bf16 copy) is unreduced, and the caller
// reduces it in float.
#pragma once

#include <string>
#include <type_traits>
#include <utility>

#include "../astype.hpp"
#include "../einsum.hpp"
#include "../matmul.hpp"
#include "traced_einsum.hpp"
#include "traced_value.hpp"

namespace typeshard {

namespace detail {
inline std::string describe_astype() {
  return "astype backward: the cotangent cast back to the operand's element type (local)";
}
inline std::string describe_mixed_einsum() {
  return "einsum (preferred_element) backward: each operand's cotangent is the transposed "
         "einsum of the cotangent cast to the operand's element type, accumulated in the "
         "preferred element, resharded to the operand's spec in it, then cast";
}

// The transpose rule of a contraction with preferred element U: d operand X (element T) =
// einsum<Tr>(g as T, other) accumulated in U, resharded to the operand's spec in U, rounded
// to T; for a cast leaf X the accumulated einsum in U itself (the cast leaf's sink keeps its
// unreduced axes).
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
}  // namespace detail

// astype<U>(x) on a traced x: the cast, whose backward casts the cotangent back (x itself when
// its elements are U already).
template <class U, traced_like X>
[[nodiscard]] auto astype(const X& x) {
  using T = typename X::value_type;
  if constexpr (std::is_same_v<T, U>) {
    return x;
  } else if constexpr (X::leaf >= 0 && std::is_same_v<T, float> &&
                       std::is_same_v<U, bfloat16>) {
    auto v = typeshard::astype<U>(x.value());
    return traced<decltype(v), typename X::contributions, -2 - X::leaf, X::plans>(
        std::move(v), x.tape(), nullptr);
  } else {
    return detail::record(
        typeshard::astype<U>(x.value()), x,
        [](const auto& g) { return typeshard::astype<T>(g); }, &detail::describe_astype);
  }
}

// einsum<Subscripts[, OutSpec]>(a, b, preferred_element<U>) with a traced operand.
template <einsum_subscripts Subscripts, class OutSpec = auto_out, class A, class B, class U>
  requires traced_operands<A, B> && (spec_like<OutSpec> || std::is_same_v<OutSpec, auto_out>)
[[nodiscard]] auto einsum(const A& a, const B& b, preferred_element_t<U> pe) {
  using AV = detail::value_t<A>;
  using BV = detail::value_t<B>;
  if constexpr (std::is_same_v<typename AV::value_type, U>) {
    return typeshard::einsum<Subscripts, OutSpec>(a, b);  // the ordinary traced einsum
  } else {
    auto value =
        typeshard::einsum<Subscripts, OutSpec>(detail::value_of(a), detail::value_of(b), pe);
    if constexpr (!einsum_valid<Subscripts, AV, BV, OutSpec> ||
                  !detail::einsum_differentiable<Subscripts, A, B>() ||
                  !std::is_same_v<typename decltype(value)::value_type, U>)
      return detail::unrecorded_contraction(std::move(value), a, b);
    else
      return detail::record_contraction<Subscripts, detail::mixed_transpose_rule<U>>(
          std::move(value), a, b, &detail::describe_mixed_einsum);
  }
}

// matmul<OutSpec>(a, b, preferred_element<U>) with a traced operand: forward, ts::matmul on
// the arrays (its plan and its rules: accepted exactly where the array call is), backward as
// the einsum's of "...ij,...jk->...ik".
template <class OutSpec = auto_out, class A, class B, class U>
  requires traced_operands<A, B> && (spec_like<OutSpec> || std::is_same_v<OutSpec, auto_out>)
[[nodiscard]] auto matmul(const A& a, const B& b, preferred_element_t<U> pe) {
  using AV = detail::value_t<A>;
  using BV = detail::value_t<B>;
  if constexpr (std::is_same_v<typename AV::value_type, U>) {
    return typeshard::matmul<OutSpec>(a, b);  // the ordinary traced matmul
  } else {
    auto value = typeshard::matmul<OutSpec>(detail::value_of(a), detail::value_of(b), pe);
    if constexpr (!matmul_valid<AV, BV, OutSpec> ||
                  !std::is_same_v<typename decltype(value)::value_type, U>)
      return detail::unrecorded_contraction(std::move(value), a, b);
    else
      return detail::record_contraction<detail::matmul_subscripts<AV::rank>(),
                                        detail::mixed_transpose_rule<U>>(
          std::move(value), a, b, &detail::describe_mixed_einsum);
  }
}

}  // namespace typeshard
