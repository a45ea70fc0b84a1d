// typeshard/ops/detail/traced_elementwise.hpp: + - * / (broadcasting, scalars) and the unary
// functions on traced values (see ops/traced.hpp); map and zip are rule-9 errors. Binary
// + - * /, unary - and the unary functions have one entry point each (ops/elementwise.hpp),
// which calls the backward rule here; the scalar forms are still overloads here.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "../../core/rules/rule9_gradients.hpp"
#include "../elementwise.hpp"
#include "traced_value.hpp"

namespace typeshard {

// ---- elementwise: + - * / with broadcasting, scalars, unary functions ---------------------

namespace detail {
inline std::string describe_elementwise() {
  return "elementwise backward: local products; a broadcast operand's cotangent summed over "
         "the stretched dimensions, then resharded to its spec";
}

// The backward rules of a + b, a - b, a * b and a / b with a traced operand (declared in
// ops/elementwise.hpp): a broadcast operand's cotangent summed back to its extents (reduce_to).
template <arithmetic Op, class A, class B>
auto traced_arithmetic(const A& a, const B& b) {
  using AV = value_t<A>;
  using BV = value_t<B>;
  const AV& av = value_of(a);
  const BV& bv = value_of(b);
  if constexpr (Op == arithmetic::plus) {
    return record(
        av + bv, a, b, [e = av.extents()](const auto& g) { return reduce_to<AV>(g, e); },
        [e = bv.extents()](const auto& g) { return reduce_to<BV>(g, e); },
        &describe_elementwise);
  } else if constexpr (Op == arithmetic::minus) {
    return record(
        av - bv, a, b, [e = av.extents()](const auto& g) { return reduce_to<AV>(g, e); },
        [e = bv.extents()](const auto& g) { return reduce_to<BV>(-g, e); },
        &describe_elementwise);
  } else if constexpr (Op == arithmetic::multiplies) {
    return record(
        av * bv, a, b, [bv, e = av.extents()](const auto& g) { return reduce_to<AV>(g * bv, e); },
        [av, e = bv.extents()](const auto& g) { return reduce_to<BV>(g * av, e); },
        &describe_elementwise);
  } else {
    auto y = av / bv;
    return record(
        y, a, b, [bv, e = av.extents()](const auto& g) { return reduce_to<AV>(g / bv, e); },
        [bv, y, e = bv.extents()](const auto& g) { return reduce_to<BV>(-(g * y) / bv, e); },
        &describe_elementwise);
  }
}

// The backward rules of -x and the unary functions (declared in ops/elementwise.hpp, whose
// entry points call them on a traced x): y = f(x), d x = g f'(x).
template <unary_function F, class X>
auto traced_unary(const X& x) {
  using T = scalar_t<X>;
  const auto& xv = x.value();
  if constexpr (F == unary_function::negate) {
    return record(-xv, x, [](const auto& g) { return -g; }, &describe_elementwise);
  } else if constexpr (F == unary_function::exp) {
    auto y = typeshard::exp(xv);
    return record(y, x, [y](const auto& g) { return g * y; }, &describe_elementwise);
  } else if constexpr (F == unary_function::log) {
    return record(typeshard::log(xv), x, [xv](const auto& g) { return g / xv; },
                  &describe_elementwise);
  } else if constexpr (F == unary_function::tanh) {
    auto y = typeshard::tanh(xv);
    return record(y, x, [y](const auto& g) { return g * (T(1) - y * y); },
                  &describe_elementwise);
  } else if constexpr (F == unary_function::relu) {
    return record(typeshard::relu(xv), x,
                  [xv](const auto& g) { return typeshard::zip(g, xv, relu_backward_t{}); },
                  &describe_elementwise);
  } else if constexpr (F == unary_function::sin) {
    return record(typeshard::sin(xv), x, [xv](const auto& g) { return g * typeshard::cos(xv); },
                  &describe_elementwise);
  } else if constexpr (F == unary_function::cos) {
    return record(typeshard::cos(xv), x,
                  [xv](const auto& g) { return -(g * typeshard::sin(xv)); },
                  &describe_elementwise);
  } else {
    static_assert(F == unary_function::sqrt);
    auto y = typeshard::sqrt(xv);
    return record(y, x, [y](const auto& g) { return (g * T(0.5)) / y; }, &describe_elementwise);
  }
}

}  // namespace detail

// Scalars on either side: d(x + s) = d(s + x) = d(x - s) = g, d(s - x) = -g, d(x * s) = g s,
// d(x / s) = g / s, d(s / x) = -g y / x.
template <traced_like X>
[[nodiscard]] auto operator+(const X& x, detail::scalar_arg_t<X> s) {
  return detail::record(x.value() + s, x, [](const auto& g) { return g; },
                        &detail::describe_elementwise);
}
template <traced_like X>
[[nodiscard]] auto operator+(detail::scalar_arg_t<X> s, const X& x) {
  return x + s;
}
template <traced_like X>
[[nodiscard]] auto operator-(const X& x, detail::scalar_arg_t<X> s) {
  return detail::record(x.value() - s, x, [](const auto& g) { return g; },
                        &detail::describe_elementwise);
}
template <traced_like X>
[[nodiscard]] auto operator-(detail::scalar_arg_t<X> s, const X& x) {
  return detail::record(s - x.value(), x, [](const auto& g) { return -g; },
                        &detail::describe_elementwise);
}
template <traced_like X>
[[nodiscard]] auto operator*(const X& x, detail::scalar_arg_t<X> s) {
  return detail::record(x.value() * s, x, [s](const auto& g) { return g * s; },
                        &detail::describe_elementwise);
}
template <traced_like X>
[[nodiscard]] auto operator*(detail::scalar_arg_t<X> s, const X& x) {
  return x * s;
}
template <traced_like X>
[[nodiscard]] auto operator/(const X& x, detail::scalar_arg_t<X> s) {
  return detail::record(x.value() / s, x, [s](const auto& g) { return g / s; },
                        &detail::describe_elementwise);
}
template <traced_like X>
[[nodiscard]] auto operator/(detail::scalar_arg_t<X> s, const X& x) {
  auto y = s / x.value();
  return detail::record(y, x, [y, xv = x.value()](const auto& g) { return -(g * y) / xv; },
                        &detail::describe_elementwise);
}

// Not differentiable (rule 9): map and zip of a traced value (ts::max, ts::min, ts::maximum
// and ts::minimum: detail/traced_extrema.hpp).
template <traced_like X, class F>
[[nodiscard]] auto map(const X& x, F) {
  static_assert(detail::require<false, diagnostic::grad_map_not_differentiable<F>>::value);
  return x;
}
template <class A, class B, class F>
  requires traced_operands<A, B>
[[nodiscard]] auto zip(const A& a, const B&, F) {
  static_assert(detail::require<false, diagnostic::grad_map_not_differentiable<F>>::value);
  return a;
}

}  // namespace typeshard
