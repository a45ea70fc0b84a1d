// typeshard/ops/detail/traced_slices.hpp: ts::slice_in_dim, ts::split and ts::concat on traced
// values (see ops/traced.hpp). A slice's backward pads the cotangent with zeros into the
// operand's extent (a window with the opposite shift, planned as the slice is: local where the
// pieces stay on their devices, else one all_gather along the dimension); a split's parts are
// slices, whose pads add up to the concatenation of their cotangents; a concatenation's
// backward gives each operand its slice of the cotangent.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <utility>

#include "../concat.hpp"
#include "../slice.hpp"
#include "../split.hpp"
#include "traced_value.hpp"

namespace typeshard {

namespace detail {
inline std::string describe_slice_backward() {
  return "slice backward: the cotangent padded with zeros into the operand's extent (local "
         "where every piece stays on its device, else an all_gather along the dimension and "
         "a local slice)";
}
inline std::string describe_concat_backward() {
  return "concat backward: each operand's slice of the cotangent (local along an unsharded "
         "dimension, else an all_gather along it and a local slice)";
}

// Records value (x's slice [start, start + value's extent) along Dim) with its backward.
template <std::size_t Dim, class R, class X>
auto record_slice(R value, const X& x, std::size_t start) {
  using C = cotangent_t<typename X::array_type>;
  return record(std::move(value), x,
                [start, e = x.extent(Dim)](const auto& g) {
                  return window_as<C>(g, Dim, -static_cast<std::ptrdiff_t>(start), e, "pad");
                },
                &describe_slice_backward);
}

// concat<Dim>(a, b), one of them traced.
template <std::size_t Dim, class A, class B>
auto traced_concat2(const A& a, const B& b) {
  auto value = typeshard::concat<Dim>(value_of(a), value_of(b));
  if constexpr (!concat_is_valid<Dim, value_t<A>, value_t<B>>() ||
                (!traced_like<A> && !traced_like<B>)) {
    return value;
  } else {
    using CA = cotangent_t<value_t<A>>;
    using CB = cotangent_t<value_t<B>>;
    const std::size_t na = a.extent(Dim), nb = b.extent(Dim);
    return record(
        std::move(value), a, b,
        [na](const auto& g) { return window_as<CA>(g, Dim, 0, na, "slice"); },
        [na, nb](const auto& g) {
          return window_as<CB>(g, Dim, static_cast<std::ptrdiff_t>(na), nb, "slice");
        },
        &describe_concat_backward);
  }
}

template <std::size_t Dim, class A, class B, class... Rest>
auto traced_concat(const A& a, const B& b, const Rest&... rest) {
  if constexpr (sizeof...(Rest) == 0)
    return traced_concat2<Dim>(a, b);
  else
    return traced_concat<Dim>(traced_concat2<Dim>(a, b), rest...);
}
}  // namespace detail

template <std::size_t Dim, traced_like X>
[[nodiscard]] auto slice_in_dim(const X& x, std::size_t start, std::size_t size) {
  auto value = typeshard::slice_in_dim<Dim>(x.value(), start, size);
  if constexpr (Dim >= X::rank)
    return value;  // the diagnostic fired
  else
    return detail::record_slice<Dim>(std::move(value), x, start);
}

template <std::size_t Dim, std::size_t Start, std::size_t Size, traced_like X>
[[nodiscard]] auto slice_in_dim(const X& x) {
  auto value = typeshard::slice_in_dim<Dim, Start, Size>(x.value());
  if constexpr (std::is_same_v<decltype(value), typename X::array_type>)
    return value;  // the diagnostic fired
  else
    return detail::record_slice<Dim>(std::move(value), x, Start);
}

template <std::size_t Dim, std::size_t N, traced_like X>
[[nodiscard]] auto split(const X& x) {
  auto parts = typeshard::split<Dim, N>(x.value());
  if constexpr (!detail::split_is_valid<Dim, N, typename X::array_type>()) {
    return parts;  // the diagnostic fired
  } else {
    const std::size_t n = x.extent(Dim) / N;
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::array{detail::record_slice<Dim>(std::move(parts[I]), x, I * n)...};
    }(std::make_index_sequence<N>{});
  }
}

// concat<Dim>(xs...) with at least one traced operand (the others plain arrays).
template <std::size_t Dim, grad_operand X, grad_operand... Xs>
  requires(sizeof...(Xs) >= 1 && (traced_like<X> || (traced_like<Xs> || ...)))
[[nodiscard]] auto concat(const X& x, const Xs&... xs) {
  return detail::traced_concat<Dim>(x, xs...);
}

}  // namespace typeshard
