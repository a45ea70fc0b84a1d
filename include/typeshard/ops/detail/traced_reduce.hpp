// typeshard/ops/detail/traced_reduce.hpp: sum, mean, softmax, log_softmax, reshard and psum on
// traced values (see ops/traced.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "../reduce.hpp"
#include "../reshard.hpp"
#include "../softmax.hpp"
#include "traced_value.hpp"

namespace typeshard {

// ---- reductions: sum and mean ------------------------------------------------------------

namespace detail {

// The extents of x with the reduced dimensions set to 1 (the keep-dims shape), and the
// number of elements reduced into each result element.
template <std::size_t Rank, int... Dims>
std::pair<shape<Rank>, std::size_t> keep_shape(const shape<Rank>& x) {
  shape<Rank> k = x;
  std::size_t count = 1;
  std::array<bool, Rank> reduced{};
  if constexpr (sizeof...(Dims) == 0) {
    reduced.fill(true);
  } else {
    for (int d : {Dims...})
      reduced[static_cast<std::size_t>(d < 0 ? d + static_cast<int>(Rank) : d)] = true;
  }
  for (std::size_t d = 0; d < Rank; ++d)
    if (reduced[d]) {
      count *= x[d];
      k[d] = 1;
    }
  return {k, count};
}

inline std::string describe_reduce() {
  return "sum/mean backward: the cotangent broadcast back over the reduced dimensions "
         "(local, no communication; mean scales by 1 / count)";
}

// sum or mean (Mean) over Dims of a traced x, keeping the dimensions or not: the backward
// reads the result's cotangent as the keep-dims array (the same blocks) and broadcasts it.
template <bool Mean, bool KeepDims, int... Dims, class X>
auto traced_reduce(const X& x) {
  using XV = typename X::array_type;
  using T = typename XV::value_type;
  const XV& xv = x.value();
  constexpr reduction op = Mean ? reduction::mean : reduction::sum;
  using K = decltype(detail::reduce<op, auto_out, true, Dims...>(xv));
  const std::pair<shape<XV::rank>, std::size_t> keep = keep_shape<XV::rank, Dims...>(xv.extents());
  const T scale = Mean ? T(1) / static_cast<T>(keep.second) : T(1);
  return record(detail::reduce<op, auto_out, KeepDims, Dims...>(xv), x,
                [kext = keep.first, scale, xext = xv.extents()](const auto& g) {
                  (void)scale;  // used by mean only
                  const auto gk = retype<cotangent_t<K>>(g, kext);
                  const auto dx = filled<cotangent_t<XV>>(g.device_mesh(), xext, T(0)) + gk;
                  if constexpr (Mean)
                    return dx * scale;
                  else
                    return dx;
                },
                &describe_reduce);
}

}  // namespace detail

template <int... Dims, traced_like X>
[[nodiscard]] auto sum(const X& x) {
  return detail::traced_reduce<false, false, Dims...>(x);
}
template <int... Dims, traced_like X>
[[nodiscard]] auto sum(const X& x, keep_dims_t) {
  return detail::traced_reduce<false, true, Dims...>(x);
}
template <int... Dims, traced_like X>
[[nodiscard]] auto mean(const X& x) {
  return detail::traced_reduce<true, false, Dims...>(x);
}
template <int... Dims, traced_like X>
[[nodiscard]] auto mean(const X& x, keep_dims_t) {
  return detail::traced_reduce<true, true, Dims...>(x);
}
// With an output spec (a template argument or a value first, keep_dims or not, every form
// arrays take): the reduction, then the reshard to it (what the plan does). Also the output
// spec forms of max and min (traced_extrema.hpp, which undefines it).
#define TYPESHARD_TRACED_REDUCTION_OUT_SPEC(name)                                            \
  template <spec_like OutSpec, int... Dims, traced_like X>                                  \
  [[nodiscard]] auto name(const X& x) {                                                     \
    return reshard<OutSpec>(name<Dims...>(x));                                              \
  }                                                                                         \
  template <spec_like OutSpec, int... Dims, traced_like X>                                  \
  [[nodiscard]] auto name(const X& x, keep_dims_t) {                                        \
    return reshard<OutSpec>(name<Dims...>(x, keep_dims));                                   \
  }                                                                                         \
  template <int... Dims, spec_like OutSpec, traced_like X>                                  \
  [[nodiscard]] auto name(OutSpec, const X& x) {                                            \
    return reshard<OutSpec>(name<Dims...>(x));                                              \
  }                                                                                         \
  template <int... Dims, spec_like OutSpec, traced_like X>                                  \
  [[nodiscard]] auto name(OutSpec, const X& x, keep_dims_t) {                               \
    return reshard<OutSpec>(name<Dims...>(x, keep_dims));                                   \
  }
TYPESHARD_TRACED_REDUCTION_OUT_SPEC(sum)
TYPESHARD_TRACED_REDUCTION_OUT_SPEC(mean)

// ---- softmax and log_softmax -------------------------------------------------------------

namespace detail {
// The row sum along Dim, kept as a dimension of extent 1 and reduced (a psum when Dim is
// sharded: the same collective the forward's row sum ran).
template <int Dim, class V>
auto row_sum(const V& v) {
  auto s = typeshard::sum<Dim>(v, keep_dims);
  return typeshard::reshard<typename decltype(s)::spec>(s);
}
// Descriptions for ts::backward_plans (record's describers).
template <class X, int Dim>
struct describe_softmax {
  static std::string text();
};
template <class X, int Dim>
std::string describe_softmax<X, Dim>::text() {
  using V = cotangent_t<typename X::array_type>;
  using S = decltype(typeshard::sum<Dim>(std::declval<const V&>(), keep_dims));
  return "softmax backward: y * (g - rowsum(g * y)), the row sum: " +
         reshard_plan_for<S, typename S::spec>::describe();
}
}  // namespace detail

template <int Dim = -1, traced_like X>
[[nodiscard]] auto softmax(const X& x) {
  auto y = typeshard::softmax<Dim>(x.value());
  return detail::record(y, x,
                        [y](const auto& g) { return y * (g - detail::row_sum<Dim>(g * y)); },
                        detail::describe_softmax<X, Dim>{});
}
template <int Dim = -1, traced_like X>
[[nodiscard]] auto log_softmax(const X& x) {
  auto y = typeshard::log_softmax<Dim>(x.value());
  return detail::record(
      y, x, [y](const auto& g) { return g - typeshard::exp(y) * detail::row_sum<Dim>(g); },
      detail::describe_softmax<X, Dim>{});
}

// ---- reshard and psum: the reverse reshard, the identity ---------------------------------

namespace detail {
template <class X, class Spec>
struct describe_reshard {
  static std::string text();
};
template <class X, class Spec>
std::string describe_reshard<X, Spec>::text() {
  using V = typename X::array_type;
  using Y = sharded_array<typename V::value_type, typename V::mesh_type, Spec,
                          typename V::extents_type>;
  return "reshard backward (the reverse reshard):\n" +
         delivery_description<X, cotangent_t<Y>>();
}
}  // namespace detail

template <spec_like Spec, traced_like X>
[[nodiscard]] auto reshard(const X& x) {
  return detail::record(typeshard::reshard<Spec>(x.value()), x,
                        [](const auto& g) { return g; }, detail::describe_reshard<X, Spec>{});
}

// The same on a dying traced value (a temporary): its value is resharded in place when no
// other array shares its blocks (ops/reshard.hpp).
template <spec_like Spec, class X>
  requires(traced_like<X> && !std::is_reference_v<X> && !std::is_const_v<X>)
[[nodiscard]] auto reshard(X&& x) {
  auto value = typeshard::reshard<Spec>(std::move(x).take_value());
  return detail::record(std::move(value), x, [](const auto& g) { return g; },
                        detail::describe_reshard<X, Spec>{});
}

template <axis_name... Axes, traced_like X>
  requires(sizeof...(Axes) >= 1)
[[nodiscard]] auto psum(const X& x) {
  return detail::record(typeshard::psum<Axes...>(x.value()), x, [](const auto& g) { return g; },
                        detail::describe_reshard<X, typename X::spec>{});
}

}  // namespace typeshard
