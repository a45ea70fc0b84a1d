// typeshard/ops/detail/traced_extrema.hpp: ts::max and ts::min (every reduction form) and the
// elementwise ts::maximum and ts::minimum on traced values (see ops/traced.hpp).
//
// Ties share the gradient equally, as JAX's rules do: a reduction's cotangent goes to every
// element equal to the extremum, divided by their number (reduce_max's chooser rule); an
// elementwise maximum(a, b) gives the cotangent to the larger operand, half to each where they
// are equal (lax.max's balanced rule). A NaN extremum gives NaN gradients along its reduction
// (no element equals it), as in JAX. The forward is the ordinary reduction (its pmax or pmin over
// the sharded dimensions' axes); the backward's tie count is a sum over the same dimensions,
// reduced to the extremum's spec (a psum over those axes where they are sharded), then a local
// product.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <utility>

#include "../elementwise.hpp"
#include "../reduce.hpp"
#include "../reshard.hpp"
#include "../where.hpp"
#include "traced_reduce.hpp"
#include "traced_value.hpp"

namespace typeshard {

namespace detail {

inline std::string describe_extremum() {
  return "max/min backward: the cotangent to the elements equal to the extremum, shared "
         "equally among ties (their count a sum over the reduced dimensions, a psum where "
         "they are sharded)";
}
inline std::string describe_maximum() {
  return "maximum/minimum backward: the cotangent to the chosen operand, half to each on a tie "
         "(local), summed over broadcast dimensions";
}

// Which dimensions of a rank-Rank array Dims names (all when none).
template <std::size_t Rank, int... Dims>
constexpr std::array<bool, Rank> reduced_dims() {
  std::array<bool, Rank> out{};
  if constexpr (sizeof...(Dims) == 0)
    out.fill(true);
  else
    for (int d : {Dims...})
      out[static_cast<std::size_t>(d < 0 ? d + static_cast<int>(Rank) : d)] = true;
  return out;
}

// max or min (Op) over Dims of a traced x, keeping the dimensions or not.
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
      const std::array<bool, XV::rank> reduced = reduced_dims<XV::rank, Dims...>();
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

// maximum (Max) or minimum of a and b, one of them traced.
template <bool Max, class A, class B>
auto traced_maximum(const A& a, const B& b) {
  using AV = value_t<A>;
  using BV = value_t<B>;
  const AV& av = value_of(a);
  const BV& bv = value_of(b);
  using T = typename AV::value_type;
  // a's share: 1 where a wins, 1/2 on a tie, 0 where b wins; b's: the rest
  auto wa = [&] {
    if constexpr (Max)
      return typeshard::greater(av, bv) + typeshard::equal(av, bv) * T(0.5);
    else
      return typeshard::less(av, bv) + typeshard::equal(av, bv) * T(0.5);
  }();
  auto y = [&] {
    if constexpr (Max)
      return typeshard::maximum(av, bv);
    else
      return typeshard::minimum(av, bv);
  }();
  return record(
      std::move(y), a, b,
      [wa, e = av.extents()](const auto& g) { return reduce_to<AV>(g * wa, e); },
      [wa, e = bv.extents()](const auto& g) { return reduce_to<BV>(g - g * wa, e); },
      &describe_maximum);
}

}  // namespace detail

// max<Dims...>(x) and min<Dims...>(x), with ts::keep_dims, and with an output spec (a template
// argument or a value first): every form arrays take.
#define TYPESHARD_TRACED_EXTREMUM(name)                                                      \
  template <int... Dims, traced_like X>                                                     \
  [[nodiscard]] auto name(const X& x) {                                                     \
    return detail::traced_extremum<reduction::name, false, Dims...>(x);                     \
  }                                                                                         \
  template <int... Dims, traced_like X>                                                     \
  [[nodiscard]] auto name(const X& x, keep_dims_t) {                                        \
    return detail::traced_extremum<reduction::name, true, Dims...>(x);                      \
  }                                                                                         \
  TYPESHARD_TRACED_REDUCTION_OUT_SPEC(name)
TYPESHARD_TRACED_EXTREMUM(max)
TYPESHARD_TRACED_EXTREMUM(min)
#undef TYPESHARD_TRACED_EXTREMUM
#undef TYPESHARD_TRACED_REDUCTION_OUT_SPEC

template <class A, class B>
  requires traced_operands<A, B>
[[nodiscard]] auto maximum(const A& a, const B& b) {
  return detail::traced_maximum<true>(a, b);
}
template <class A, class B>
  requires traced_operands<A, B>
[[nodiscard]] auto minimum(const A& a, const B& b) {
  return detail::traced_maximum<false>(a, b);
}

}  // namespace typeshard
