// typeshard/ops/detail/traced_layer_norm.hpp: ts::layer_norm on traced values (see
// ops/traced.hpp and ops/layer_norm.hpp).
//
// The forward keeps y and each row's 1 / sqrt(var + eps); the backward is one fused row pass:
// dx = (g - mean(g) - y * mean(g * y)) * rstd, the two row sums in one pass and, along a
// sharded dimension, one psum of both (layer_norm_plan::backward_steps).
#pragma once

#include <string>

#include "../layer_norm.hpp"
#include "traced_value.hpp"

namespace typeshard {

namespace detail {
// The description for ts::backward_plans (record's describer).
template <class X, int Dim>
struct describe_layer_norm {
  static std::string text();
};
template <class X, int Dim>
std::string describe_layer_norm<X, Dim>::text() {
  using V = cotangent_t<typename X::array_type>;
  return "layer_norm backward: (g - mean(g) - y * mean(g * y)) * rstd, one row pass: " +
         layer_norm_plan_for<V, Dim>::describe_backward();
}

// ts::layer_norm<Dim>(x, eps) on a traced x (declared in ops/layer_norm.hpp).
template <int Dim, class X>
auto traced_layer_norm(const X& x, double eps) {
  using T = typename X::array_type::value_type;
  layer_norm_stats<T> rstd;
  auto y = detail::layer_norm<Dim>(x.value(), static_cast<layer_norm_accumulator<T>>(eps), &rstd);
  return record(
      y, x, [y, rstd](const auto& g) { return detail::layer_norm_backward<Dim>(g, y, rstd); },
      describe_layer_norm<X, Dim>{});
}
}  // namespace detail

}  // namespace typeshard
