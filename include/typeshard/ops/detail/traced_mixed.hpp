// typeshard/ops/detail/traced_mixed.hpp: mixed precision on traced values (see ops/traced.hpp):
// ts::astype, and the choice behind the contractions' preferred_element backward
// (detail::mixed_transpose_rule, in traced_einsum.hpp beside the contractions' other rule).
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
#include "traced_value.hpp"

namespace typeshard {

namespace detail {
inline std::string describe_astype() {
  return "astype backward: the cotangent cast back to the operand's element type (local)";
}
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

}  // namespace typeshard
