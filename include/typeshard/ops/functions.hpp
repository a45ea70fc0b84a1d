// typeshard/ops/functions.hpp: the functions models use, on global arrays and on blocks inside
// ts::shard_map (the same functions of kernels/functors.hpp in both; on traced values in
// ops/detail/traced_functions.hpp, each with its gradient).
//
//   auto a = ts::sigmoid(x);            // 1 / (1 + exp(-x)), no overflow for large |x|
//   auto g = ts::gelu(x);               // tanh approximation (jax.nn.gelu's default)
//   auto e = ts::gelu(x, false);        // exact: x Phi(x), with erf
//   auto s = ts::softplus(x);           // log(1 + exp(x)), no overflow
//   auto r = ts::rsqrt(v + 1e-5f);      // 1 / sqrt(v)
//   auto p = ts::pow(x, 3.0f);          // x^3; ts::pow(x, y) elementwise, broadcast (rule 5)
//   auto c = ts::clip(x, -1.0f, 1.0f);  // jnp.clip: min(max(x, lo), hi)
//
// Each keeps its operand's spec and extents and communicates nothing. None is linear, so an
// unreduced array does not compile (rule 3: reduce it first).
#pragma once

#include <type_traits>

#include "../kernels/functors.hpp"
#include "elementwise.hpp"

namespace typeshard {

namespace detail {
// f on a bfloat16 element computed in float and rounded once (the functors of
// kernels/functors.hpp, instantiated on bfloat16, would round intermediate steps); f itself on
// other elements.
template <class F>
struct in_float {
  F f;
  template <class X>
  auto operator()(X x) const {
    if constexpr (std::is_same_v<X, bfloat16>)
      return bfloat16(f(float(x)));
    else
      return f(x);
  }
};
template <class T, class F>
auto computed_in_float(F f) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return in_float<F>{f};
  else
    return f;
}
}  // namespace detail

// sigmoid, softplus, rsqrt, gelu and clip are function objects, as ts::transpose is:
// argument-dependent lookup never finds them, so a program's own unqualified gelu(h) helper
// (a common name) keeps calling that helper. Their forms on values traced by
// ts::value_and_grad (ops/detail/traced_functions.hpp) are found through the traced_* hooks,
// by argument-dependent lookup on the traced type.

// sigmoid(x), softplus(x), rsqrt(x): ts::map with the function of kernels/functors.hpp.
#define TYPESHARD_FUNCTION_OBJECT(name)                                                      \
  struct name##_t {                                                                         \
    template <elementwise_operand A>                                                        \
    [[nodiscard]] auto operator()(const A& a) const {                                       \
      return map(a, detail::computed_in_float<detail::scalar_of<A>>(fn::name));             \
    }                                                                                       \
    template <class X>                                                                      \
      requires requires(const X& x) { traced_##name(x); }                                   \
    [[nodiscard]] auto operator()(const X& x) const {                                       \
      return traced_##name(x);                                                              \
    }                                                                                       \
  };                                                                                        \
  inline constexpr name##_t name {}
TYPESHARD_FUNCTION_OBJECT(sigmoid);
TYPESHARD_FUNCTION_OBJECT(softplus);
TYPESHARD_FUNCTION_OBJECT(rsqrt);
#undef TYPESHARD_FUNCTION_OBJECT

// gelu(x, approximate): the tanh approximation (approximate, the default, as jax.nn.gelu) or
// the exact x Phi(x) (PyTorch's default, approximate=False).
struct gelu_t {
  template <elementwise_operand A>
  [[nodiscard]] auto operator()(const A& a, bool approximate = true) const {
    using T = detail::scalar_of<A>;
    return approximate ? map(a, detail::computed_in_float<T>(fn::gelu_tanh))
                       : map(a, detail::computed_in_float<T>(fn::gelu_erf));
  }
  template <class X>
    requires requires(const X& x) { traced_gelu(x, true); }
  [[nodiscard]] auto operator()(const X& x, bool approximate = true) const {
    return traced_gelu(x, approximate);
  }
};
inline constexpr gelu_t gelu{};

// clip(x, lo, hi): min(max(x, lo), hi), as jnp.clip (a NaN stays NaN).
struct clip_t {
  template <elementwise_operand A>
  [[nodiscard]] auto operator()(const A& a, detail::scalar_arg<A> lo,
                                detail::scalar_arg<A> hi) const {
    return map(a, fn::clip_t<detail::scalar_of<A>>{lo, hi});
  }
  template <class X>
    requires requires(const X& x, typename X::value_type v) { traced_clip(x, v, v); }
  [[nodiscard]] auto operator()(const X& x, scalar_parameter_t<typename X::value_type> lo,
                                scalar_parameter_t<typename X::value_type> hi) const {
    return traced_clip(x, lo, hi);
  }
};
inline constexpr clip_t clip{};

// pow(x, p): x^p with a scalar exponent; pow(x, y): elementwise, broadcast (rule 5).
template <elementwise_operand A>
[[nodiscard]] auto pow(const A& a, detail::scalar_arg<A> p) {
  return map(a, fn::with_scalar{fn::pow, p});
}
template <elementwise_operand A, elementwise_operand B>
  requires same_operand_kind<A, B>
[[nodiscard]] auto pow(const A& a, const B& b) {
  return detail::zip_op<false>(a, b, fn::pow, "pow");
}


}  // namespace typeshard
