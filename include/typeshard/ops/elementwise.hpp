// typeshard/ops/elementwise.hpp: elementwise operations, run per shard in parallel.
//
//   auto y = ts::sin(x);              // same spec as x, no communication
//   auto z = x + y;                   // x: spec<"x", none> [B, D], y: the same
//   auto b = x + bias;                // bias: spec<none> [D]: broadcast, no communication
//   auto u = 1 - x;  auto v = 2 / x;  // scalars on either side of + - * /
//   auto w = ts::map(x, [](float v) { return v * v + 1; });
//
// Every device computes its own shard, replicas included, as JAX does. Rule 5: binary
// operands broadcast as NumPy's do (detail/broadcast.hpp: trailing dimensions aligned,
// extent 1 stretches); a dimension sharded in one operand and whole in the other needs no
// communication (each device reads its slice of the whole one); sharded over different
// axes is a compile error that suggests ts::reshard. Operands of one layout and shape take
// a plain loop over their blocks (detail/elementwise_shards.hpp). The same device mesh is
// needed (else a device_mesh_error naming both). Rule 3: on a value unreduced over some axis only
// linear operations compile (negation, scaling by a scalar, adding or subtracting a value unreduced
// over the same axes); adding a scalar to one is not linear (it would add it once per partial sum).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/detail/diagnose.hpp"
#include "../core/bfloat16.hpp"
#include "../core/errors.hpp"
#include "../array/block.hpp"
#include "../array/block_elementwise.hpp"
#include "../array/sharded_array.hpp"
#include "../kernels/functors.hpp"
#include "../core/rules/rule3_unreduced.hpp"
#include "../core/rules/rule5_elementwise.hpp"
#include "detail/elementwise_loops.hpp"
#include "detail/elementwise_shards.hpp"
#include "detail/forward_value.hpp"

namespace typeshard {

// map(x, f): f applied to every element; the result keeps x's spec. f must be a pure
// function of one element. Not allowed on unreduced values (f need not be linear).
template <sharded_array_like A, class F>
[[nodiscard]] auto map(const A& a, F f) {
  using arr = std::remove_cvref_t<A>;
  using R = std::invoke_result_t<F&, const typename arr::value_type&>;
  if constexpr (!arr::unreduced_type::empty) {
    static_assert(detail::require<false, diagnostic::nonlinear_op_on_unreduced<
                                             typename arr::unreduced_type>>::value);
    return a;
  } else {
    return detail::map_shards<R, unreduced<>>(a, f);
  }
}

// zip(x, y, f): f applied to every pair of elements, broadcast (rule 5).
template <sharded_array_like A, sharded_array_like B, class F>
[[nodiscard]] auto zip(const A& a, const B& b, F f) {
  using arr_a = std::remove_cvref_t<A>;
  using arr_b = std::remove_cvref_t<B>;
  if constexpr (!detail::check_elementwise_operands<A, B>()) {
    return a;  // the diagnostic above already fired; stop here so nothing cascades
  } else if constexpr (!arr_a::unreduced_type::empty || !arr_b::unreduced_type::empty) {
    static_assert(detail::require<false, diagnostic::nonlinear_op_on_unreduced<
                                             typename arr_a::unreduced_type>>::value);
    return a;
  } else {
    using R = std::invoke_result_t<F&, const typename arr_a::value_type&,
                                   const typename arr_b::value_type&>;
    return detail::zip_broadcast<R, unreduced<>>(a, b, f, "zip");
  }
}

namespace detail {

// A linear binary operation (+, -): allowed on unreduced values with equal unreduced axes.
template <class A, class B, class F>
auto linear_zip(const A& a, const B& b, F f, const char* op) {
  if constexpr (!check_elementwise_operands<A, B>()) {
    return a;
  } else if constexpr (!std::is_same_v<typename A::unreduced_type, typename B::unreduced_type>) {
    static_assert(
        require<false, diagnostic::unreduced_axes_differ<typename A::unreduced_type,
                                                         typename B::unreduced_type>>::value);
    return a;
  } else {
    using R = std::common_type_t<typename A::value_type, typename B::value_type>;
    return zip_broadcast<R, typename A::unreduced_type>(a, b, f, op);
  }
}

template <class A>
using scalar_of = typename std::remove_cvref_t<A>::value_type;
// The type of a scalar operand beside A (core/bfloat16.hpp: any arithmetic value beside
// bfloat16).
template <class A>
using scalar_arg = scalar_parameter_t<scalar_of<A>>;

}  // namespace detail

// ---- the operations, on global arrays and on blocks ---------------------------------------
// One definition each, for both kinds of operand (a sharded_array, or a block inside
// shard_map), with the functions of kernels/functors.hpp. Blocks have no unreduced axes;
// on arrays rule 3 allows only the linear operations on unreduced values.

template <class A>
concept elementwise_operand = sharded_array_like<A> || block_like<A>;

template <class A, class B>
concept same_operand_kind = (sharded_array_like<A> && sharded_array_like<B>) ||
                            (block_like<A> && block_like<B>);

namespace detail {

// f on every element, allowed on unreduced values (negation, scaling): an array keeps its
// element type and unreduced axes; a block takes f's result type.
template <class A, class F>
auto map_linear(const A& a, F f) {
  if constexpr (block_like<A>) {
    return map_block(a, f);
  } else {
    using arr = std::remove_cvref_t<A>;
    return map_shards<typename arr::value_type, typename arr::unreduced_type>(a, f);
  }
}

// f on every pair of elements: linear (+, -: equal unreduced axes allowed) or not.
template <bool Linear, class A, class B, class F>
auto zip_op(const A& a, const B& b, F f, const char* op) {
  if constexpr (block_like<A>)
    return zip_blocks(a, b, f, op);
  else if constexpr (Linear)
    return linear_zip(a, b, f, op);
  else
    return zip(a, b, f);
}

// The backward rules of + - * /, maximum and minimum on a traced operand (the forward is the
// arrays' operation on the values): declared here, defined in
// ops/detail/traced_elementwise.hpp and traced_extrema.hpp, which ops/traced.hpp (where traced
// values come from) includes.
enum class arithmetic { plus, minus, multiplies, divides };
template <arithmetic Op, class A, class B>
auto traced_arithmetic(const A& a, const B& b);
// maximum (Max) or minimum's (ops/detail/traced_extrema.hpp).
template <bool Max, class A, class B>
auto traced_maximum(const A& a, const B& b);
// Unary minus and the unary functions' (ops/detail/traced_elementwise.hpp).
enum class unary_function { negate, sin, cos, exp, log, tanh, sqrt, relu };
template <unary_function F, class X>
auto traced_unary(const X& x);

// Op on a and b by their kind: a traced operand's forward and recorded backward, or zip_op on
// arrays or blocks.
template <arithmetic Op, bool Linear, class A, class B, class F>
auto arithmetic_any(const A& a, const B& b, F f, const char* op) {
  if constexpr (is_traced_v<A> || is_traced_v<B>)
    return traced_arithmetic<Op>(a, b);
  else
    return zip_op<Linear>(a, b, f, op);
}

}  // namespace detail

// The operands of + - * /, maximum and minimum on two operands: two arrays or two blocks, or a
// value traced by ts::value_and_grad beside an array or another traced value.
template <class A>
concept arithmetic_operand = global_operand<A> || block_like<A>;
template <class A, class B>
concept arithmetic_operands = arithmetic_operand<A> && arithmetic_operand<B> &&
                              same_operand_kind<detail::value_t<A>, detail::value_t<B>>;

// ---- linear operations: defined on unreduced values too ----------------------------------

template <arithmetic_operand A, arithmetic_operand B>
  requires arithmetic_operands<A, B>
[[nodiscard]] auto operator+(const A& a, const B& b) {
  return detail::arithmetic_any<detail::arithmetic::plus, true>(a, b, fn::plus, "operator+");
}
template <arithmetic_operand A, arithmetic_operand B>
  requires arithmetic_operands<A, B>
[[nodiscard]] auto operator-(const A& a, const B& b) {
  return detail::arithmetic_any<detail::arithmetic::minus, true>(a, b, fn::minus, "operator-");
}
template <arithmetic_operand A>
[[nodiscard]] auto operator-(const A& a) {
  if constexpr (detail::is_traced_v<A>)
    return detail::traced_unary<detail::unary_function::negate>(a);
  else
    return detail::map_linear(a, fn::negate);
}
// Scaling by a scalar: x * s, s * x, x / s.
template <elementwise_operand A>
[[nodiscard]] auto operator*(const A& a, detail::scalar_arg<A> s) {
  return detail::map_linear(a, fn::with_scalar{fn::multiplies, s});
}
template <elementwise_operand A>
[[nodiscard]] auto operator*(detail::scalar_arg<A> s, const A& a) {
  return a * s;
}
template <elementwise_operand A>
[[nodiscard]] auto operator/(const A& a, detail::scalar_arg<A> s) {
  return detail::map_linear(a, fn::with_scalar{fn::divides, s});
}

// ---- a scalar added or subtracted, or divided by an array: not linear in partial sums ------
// (x + s adds s once per partial sum), so an unreduced array does not compile (rule 3).

namespace detail {
// f on every element, not allowed on unreduced values: ts::map on an array.
template <class A, class F>
auto map_nonlinear(const A& a, F f) {
  if constexpr (block_like<A>)
    return map_block(a, f);
  else
    return map(a, f);
}
}  // namespace detail

template <elementwise_operand A>
[[nodiscard]] auto operator+(const A& a, detail::scalar_arg<A> s) {
  return detail::map_nonlinear(a, fn::with_scalar{fn::plus, s});
}
template <elementwise_operand A>
[[nodiscard]] auto operator+(detail::scalar_arg<A> s, const A& a) {
  return a + s;
}
template <elementwise_operand A>
[[nodiscard]] auto operator-(const A& a, detail::scalar_arg<A> s) {
  return detail::map_nonlinear(a, fn::with_scalar{fn::minus, s});
}
template <elementwise_operand A>
[[nodiscard]] auto operator-(detail::scalar_arg<A> s, const A& a) {
  return detail::map_nonlinear(a, detail::scalar_first<fn::minus_t, detail::scalar_of<A>>{s});
}
template <elementwise_operand A>
[[nodiscard]] auto operator/(detail::scalar_arg<A> s, const A& a) {
  return detail::map_nonlinear(a, detail::scalar_first<fn::divides_t, detail::scalar_of<A>>{s});
}

// ---- non-linear operations: need fully reduced values ------------------------------------

template <arithmetic_operand A, arithmetic_operand B>
  requires arithmetic_operands<A, B>
[[nodiscard]] auto operator*(const A& a, const B& b) {
  return detail::arithmetic_any<detail::arithmetic::multiplies, false>(a, b, fn::multiplies,
                                                                       "operator*");
}
template <arithmetic_operand A, arithmetic_operand B>
  requires arithmetic_operands<A, B>
[[nodiscard]] auto operator/(const A& a, const B& b) {
  return detail::arithmetic_any<detail::arithmetic::divides, false>(a, b, fn::divides, "operator/");
}
template <arithmetic_operand A, arithmetic_operand B>
  requires arithmetic_operands<A, B>
[[nodiscard]] auto maximum(const A& a, const B& b) {
  if constexpr (detail::is_traced_v<A> || detail::is_traced_v<B>)
    return detail::traced_maximum<true>(a, b);
  else
    return detail::zip_op<false>(a, b, fn::maximum, "maximum");
}
template <arithmetic_operand A, arithmetic_operand B>
  requires arithmetic_operands<A, B>
[[nodiscard]] auto minimum(const A& a, const B& b) {
  if constexpr (detail::is_traced_v<A> || detail::is_traced_v<B>)
    return detail::traced_maximum<false>(a, b);
  else
    return detail::zip_op<false>(a, b, fn::minimum, "minimum");
}

// sin cos exp log tanh sqrt relu: ts::map with the function of the same name on an array or a
// block; on a traced value, its forward and recorded backward.
#define TYPESHARD_UNARY_OPERATION(name)                                     \
  template <arithmetic_operand A>                                           \
  [[nodiscard]] auto name(const A& a) {                                     \
    if constexpr (detail::is_traced_v<A>)                                   \
      return detail::traced_unary<detail::unary_function::name>(a);         \
    else                                                                    \
      return map(a, fn::name);                                              \
  }
TYPESHARD_UNARY_OPERATION(sin)
TYPESHARD_UNARY_OPERATION(cos)
TYPESHARD_UNARY_OPERATION(exp)
TYPESHARD_UNARY_OPERATION(log)
TYPESHARD_UNARY_OPERATION(tanh)
TYPESHARD_UNARY_OPERATION(sqrt)
TYPESHARD_UNARY_OPERATION(relu)
#undef TYPESHARD_UNARY_OPERATION

// abs: ts::map with fn::abs (not differentiable: no traced form).
template <elementwise_operand A>
[[nodiscard]] auto abs(const A& a) {
  return map(a, fn::abs);
}

}  // namespace typeshard
