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
// A scalar parameter type that stands for an element (bfloat16_scalar: its element_type) is
// held as that element.
template <class S>
struct scalar_element {
  using type = S;
};
template <class S>
  requires requires { typename S::element_type; }
struct scalar_element<S> {
  using type = typename S::element_type;
};
template <class F, class S>  // clang 14 deduces no aggregate's arguments
with_scalar(F, S) -> with_scalar<F, typename scalar_element<S>::type>;

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

// static_cast<U>, one element (ts::astype).
template <class U>
struct convert_to {
  template <class T>
  U operator()(const T& v) const {
    return static_cast<U>(v);
  }
};

inline constexpr negate_t negate{};
inline constexpr abs_t abs{};
inline constexpr relu_t relu{};

// ---- the functions models use (ops/model_functions.hpp) -------------------------------------
// Each as f(x) and, for the backward of ts::value_and_grad, its derivative f'(x) (the
// *_grad_t functors; chain_t below multiplies a cotangent by one).

// sigmoid(x) = 1 / (1 + exp(-x)), written so that exp never overflows.
struct sigmoid_t {
  template <class X>
  X operator()(X x) const {
    if (x >= X{}) return static_cast<X>(X(1) / (X(1) + std::exp(-x)));
    const X e = static_cast<X>(std::exp(x));
    return static_cast<X>(e / (X(1) + e));
  }
};
struct sigmoid_grad_t {
  template <class X>
  X operator()(X x) const {
    const X s = sigmoid_t{}(x);
    return static_cast<X>(s * (X(1) - s));
  }
};
// softplus(x) = log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)) (no overflow); f' = sigmoid.
struct softplus_t {
  template <class X>
  X operator()(X x) const {
    return static_cast<X>((x > X{} ? x : X{}) + std::log1p(std::exp(-std::abs(x))));
  }
};
// gelu, the tanh approximation (jax.nn.gelu's default, approximate=True):
// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
struct gelu_tanh_t {
  template <class X>
  X operator()(X x) const {
    const X c = static_cast<X>(0.7978845608028654);  // sqrt(2 / pi)
    return static_cast<X>(X(0.5) * x * (X(1) + std::tanh(c * (x + X(0.044715) * x * x * x))));
  }
};
struct gelu_tanh_grad_t {
  template <class X>
  X operator()(X x) const {
    const X c = static_cast<X>(0.7978845608028654);
    const X t = static_cast<X>(std::tanh(c * (x + X(0.044715) * x * x * x)));
    return static_cast<X>(X(0.5) * (X(1) + t) +
                          X(0.5) * x * (X(1) - t * t) * c * (X(1) + X(3 * 0.044715) * x * x));
  }
};
// gelu, exact (approximate=False): x Phi(x) = 0.5 x (1 + erf(x / sqrt(2))).
struct gelu_erf_t {
  template <class X>
  X operator()(X x) const {
    return static_cast<X>(X(0.5) * x * (X(1) + std::erf(x * X(0.7071067811865476))));
  }
};
struct gelu_erf_grad_t {  // Phi(x) + x phi(x)
  template <class X>
  X operator()(X x) const {
    const X phi = static_cast<X>(X(0.3989422804014327) * std::exp(-X(0.5) * x * x));
    return static_cast<X>(X(0.5) * (X(1) + std::erf(x * X(0.7071067811865476))) + x * phi);
  }
};
// rsqrt(x) = 1 / sqrt(x).
struct rsqrt_t {
  template <class X>
  X operator()(X x) const {
    return static_cast<X>(X(1) / std::sqrt(x));
  }
};
// pow(x, y) = x^y (std::pow), in the first operand's type.
struct pow_t {
  template <class X, class Y>
  X operator()(X x, Y y) const {
    return static_cast<X>(std::pow(x, y));
  }
};
// pow's derivative in x at a fixed exponent: p x^(p - 1).
struct pow_grad_t {
  template <class X, class Y>
  X operator()(X x, Y p) const {
    return static_cast<X>(p * std::pow(x, p - Y(1)));
  }
};
// clip(x) to [lo, hi] (jnp.clip: min(max(x, lo), hi); NaN passes through). Its derivative
// is 1 inside [lo, hi], bounds included (PyTorch's clamp), else 0.
template <class T>
struct clip_t {
  T lo, hi;
  T operator()(T x) const { return x < lo ? lo : (hi < x ? hi : x); }
};
template <class T>
struct clip_grad_t {
  T lo, hi;
  T operator()(T x) const { return lo <= x && x <= hi ? T(1) : T(0); }
};

// chain_t<DF>{}(g, x) = g * DF(x): a cotangent through a function of derivative DF.
template <class DF>
struct chain_t {
  DF df{};
  template <class G, class X>
  G operator()(G g, X x) const {
    return static_cast<G>(g * df(x));
  }
};

// ---- comparisons: a mask of ones and zeros, in the operands' common type ---------------------
// (so that a mask multiplies, sums and reshards as the operands do; ts::where reads any
// non-zero element as true).
#define TYPESHARD_COMPARISON_FUNCTOR(name, op)                                               \
  struct name##_t {                                                                          \
    template <class X, class Y>                                                              \
    auto operator()(X x, Y y) const {                                                        \
      using R = std::common_type_t<X, Y>;                                                    \
      return static_cast<R>(x op y ? 1 : 0);                                                 \
    }                                                                                        \
  };                                                                                         \
  inline constexpr name##_t name {}
TYPESHARD_COMPARISON_FUNCTOR(less, <);
TYPESHARD_COMPARISON_FUNCTOR(less_equal, <=);
TYPESHARD_COMPARISON_FUNCTOR(greater, >);
TYPESHARD_COMPARISON_FUNCTOR(greater_equal, >=);
TYPESHARD_COMPARISON_FUNCTOR(equal, ==);
TYPESHARD_COMPARISON_FUNCTOR(not_equal, !=);
#undef TYPESHARD_COMPARISON_FUNCTOR

// where's two halves: select_t{}(m, a) = a where m is non-zero, else -0; reject_t{}(m, b) = b
// where m is zero, else -0. Their sum is where(m, a, b) exactly: x + (-0) is x for every x
// (-0, NaN and infinities included).
struct select_t {
  template <class M, class X>
  X operator()(M m, X x) const {
    return m != M{} ? x : static_cast<X>(-X{});
  }
};
struct reject_t {
  template <class M, class X>
  X operator()(M m, X x) const {
    return m != M{} ? static_cast<X>(-X{}) : x;
  }
};

inline constexpr sigmoid_t sigmoid{};
inline constexpr softplus_t softplus{};
inline constexpr gelu_tanh_t gelu_tanh{};
inline constexpr gelu_erf_t gelu_erf{};
inline constexpr rsqrt_t rsqrt{};
inline constexpr pow_t pow{};

}  // namespace typeshard::fn
