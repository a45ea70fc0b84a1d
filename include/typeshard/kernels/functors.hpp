// typeshard/kernels/functors.hpp: the elementwise functions, once, as function objects.
//
//   ts::fn::maximum(x, y)   // NaN-aware, as XLA's max: a NaN from either side wins
//   ts::fn::abs(-0.0)       // +0.0, as jnp.abs
//
// Every elementwise operation uses these: on global arrays and on blocks (ops/elementwise.hpp)
// and in the backends' reductions (backend/detail/reduce_kernels.hpp), so an operation means
// the same thing wherever it runs. They take elements by value and return what the C++
// expression does (x + y on two int8 is an int); the callers decide the stored type.
#pragma once

#include <cmath>
#include <type_traits>

namespace typeshard::fn {

// Whether v is a NaN (never, for a type that is not floating point).
template <class T>
inline bool is_nan(const T& v) {
  if constexpr (std::is_floating_point_v<T>)
    return std::isnan(v);
  else
    return false;
}

// ---- binary --------------------------------------------------------------------------------

struct plus_t {
  auto operator()(auto x, auto y) const { return x + y; }
};
struct minus_t {
  auto operator()(auto x, auto y) const { return x - y; }
};
struct multiplies_t {
  auto operator()(auto x, auto y) const { return x * y; }
};
struct divides_t {
  auto operator()(auto x, auto y) const { return x / y; }
};
// max and min take a NaN from either operand (so a reduction's result does not depend on
// which device holds the NaN).
struct maximum_t {
  auto operator()(auto x, auto y) const { return x < y || is_nan(y) ? y : x; }
};
struct minimum_t {
  auto operator()(auto x, auto y) const { return y < x || is_nan(y) ? y : x; }
};

inline constexpr plus_t plus{};
inline constexpr minus_t minus{};
inline constexpr multiplies_t multiplies{};
inline constexpr divides_t divides{};
inline constexpr maximum_t maximum{};
inline constexpr minimum_t minimum{};

// with_scalar{f, s}(x) == f(x, s): a binary function with its right operand fixed.
template <class F, class S>
struct with_scalar {
  F f;
  S s;
  auto operator()(auto x) const { return f(x, s); }
};
template <class F, class S>
with_scalar(F, S) -> with_scalar<F, S>;  // clang 14 deduces no aggregate's arguments

// ---- unary ---------------------------------------------------------------------------------

struct negate_t {
  auto operator()(auto x) const { return -x; }
};
// abs(-0.0) is +0.0 (as jnp.abs), which x < 0 ? -x : x would miss.
struct abs_t {
  template <class X>
  auto operator()(X x) const {
    if constexpr (std::is_floating_point_v<X>)
      return static_cast<X>(std::abs(x));
    else
      return x < X{} ? -x : x;
  }
};
// relu(x) = max(x, 0); NaN passes through unchanged.
struct relu_t {
  template <class X>
  X operator()(X x) const {
    return x < X{} ? X{} : x;
  }
};

// The <cmath> functions, returning the argument's type (float stays float).
#define TYPESHARD_CMATH_FUNCTOR(name)                                               \
  struct name##_t {                                                                 \
    template <class X>                                                              \
    X operator()(X x) const {                                                       \
      return static_cast<X>(std::name(x));                                          \
    }                                                                               \
  };                                                                                \
  inline constexpr name##_t name {}
TYPESHARD_CMATH_FUNCTOR(sin);
TYPESHARD_CMATH_FUNCTOR(cos);
TYPESHARD_CMATH_FUNCTOR(exp);
TYPESHARD_CMATH_FUNCTOR(log);
TYPESHARD_CMATH_FUNCTOR(tanh);
TYPESHARD_CMATH_FUNCTOR(sqrt);
#undef TYPESHARD_CMATH_FUNCTOR

inline constexpr negate_t negate{};
inline constexpr abs_t abs{};
inline constexpr relu_t relu{};

}  // namespace typeshard::fn
