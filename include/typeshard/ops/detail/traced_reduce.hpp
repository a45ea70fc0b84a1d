// typeshard/ops/detail/traced_reduce.hpp: on traced values (see ops/traced.hpp), the
// reductions' backward rules (ts::sum, mean, max and min: their one entry point is
// ops/reduce.hpp's, which calls detail::traced_reduction), softmax, log_softmax, reshard and
// psum.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "../../plan/detail/reduce_dims.hpp"
#include "../elementwise.hpp"
#include "../reduce.hpp"
#include "../reshard.hpp"
#include "../softmax.hpp"
#include "../where.hpp"
#include "traced_value.hpp"

namespace typeshard {

// ---- reductions: sum, mean, max, min --------------------------------------------------------

namespace detail {

// The extents of x with the reduced dimensions set to 1 (the keep-dims shape), and the
// number of elements reduced into each result element.
template <std::size_t Rank, int... Dims>
std::pair<shape<Rank>, std::size_t> keep_shape(const shape<Rank>& x) {
  constexpr std::array<bool, Rank> reduced = reduced_mask<Rank, Dims...>();
  shape<Rank> k = x;
  std::size_t count = 1;
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
auto traced_sum(const X& x) {
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

inline std::string describe_extremum() {
  return "max/min backward: the cotangent to the elements equal to the extremum, shared "
         "equally among ties (their count a sum over the reduced dimensions, a psum where "
         "they are sharded)";
}
// max or min (Op) over Dims of a traced x, keeping the dimensions or not. Ties share the
// gradient equally, as JAX's rules do: the cotangent goes to every element equal to the
// extremum, divided by their number (reduce_max's chooser rule); a NaN extremum gives NaN
// gradients along its reduction (no element equals it), as in JAX. The forward is the
// ordinary reduction (its pmax or pmin over the sharded dimensions' axes); the backward's tie
// count is a sum over the same dimensions, reduced to the extremum's spec (a psum over those
// axes where they are sharded), then a local product.
template <reduction Op, bool KeepDims, int... Dims, class X>
auto traced_extremum(const X& x) {
  using XV = typename X::array_type;
  const XV& xv = x.value();
  auto yk = detail::reduce<Op, auto_out, true, Dims...>(xv);  // reduced: pmax / pmin
  using K = decltype(yk);
  const shape<XV::rank> kext = keep_shape<XV::rank, Dims...>(xv.extents()).first;
  const auto hit = typeshard::equal(xv, yk);                           // x's layout
  const auto count = detail::reduce<reduction::sum, typename K::spec, true, Dims...>(hit);
  auto share = hit / count;  // 1 / ties where x is an extremum, else 0
  auto value = [&] {
    if constexpr (KeepDims) {
      return yk;
    } else {  // the same blocks without the reduced dimensions (no second pmax)
      using R = decltype(detail::reduce<Op, auto_out, false, Dims...>(xv));
      constexpr std::array<bool, XV::rank> reduced = reduced_mask<XV::rank, Dims...>();
      shape<R::rank> r{};
      r.fill(1);
      std::size_t i = 0;
      for (std::size_t d = 0; d < XV::rank; ++d)
        if (!reduced[d] && i < R::rank) r[i++] = xv.extent(d);
      return retype<R>(yk, r);
    }
  }();
  return record(std::move(value), x,
                [share, kext](const auto& g) {
                  return share * retype<cotangent_t<K>>(g, kext);
                },
                &describe_extremum);
}

}  // namespace detail

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

// softmax (Log: log_softmax) along Dim of a traced x, for ops/softmax.hpp's entry points; the
// backward y * (g - rowsum(g * y)), for log_softmax g - exp(y) * rowsum(g).
template <bool Log, int Dim, class X>
auto traced_softmax(const X& x) {
  if constexpr (Log) {
    auto y = typeshard::log_softmax<Dim>(x.value());
    return record(
        y, x, [y](const auto& g) { return g - typeshard::exp(y) * row_sum<Dim>(g); },
        describe_softmax<X, Dim>{});
  } else {
    auto y = typeshard::softmax<Dim>(x.value());
    return record(y, x, [y](const auto& g) { return y * (g - row_sum<Dim>(g * y)); },
                  describe_softmax<X, Dim>{});
  }
}
}  // namespace detail

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

// ---- the reductions' rules on traced values, for ops/reduce.hpp's entry points -----------

namespace detail {
// Op over Dims of a traced x, keeping the dimensions or not: sum and mean (traced_sum), max
// and min (traced_extremum); with an output spec, the reshard to it after (what the plan
// does on arrays).
template <reduction Op, class OutSpec, bool KeepDims, int... Dims, class X>
auto traced_reduction(const X& x) {
  if constexpr (!std::is_same_v<OutSpec, auto_out>)
    return typeshard::reshard<OutSpec>(traced_reduction<Op, auto_out, KeepDims, Dims...>(x));
  else if constexpr (Op == reduction::sum || Op == reduction::mean)
    return traced_sum<Op == reduction::mean, KeepDims, Dims...>(x);
  else
    return traced_extremum<Op, KeepDims, Dims...>(x);
}
}  // namespace detail

}  // namespace typeshard
