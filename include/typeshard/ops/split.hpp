// typeshard/ops/split.hpp: ts::split, a dimension of a sharded array cut into N equal parts in
// the global view (jnp.split(x, N, axis=Dim); lax.split): Q, K and V from a fused projection.
//
//   // qkv: [B, S, 3, E], spec<"data", none, none, "model">
//   auto [q, k, v] = ts::split<2, 3>(qkv);         // each [B, S, 1, E]: local (dimension 2
//                                                   // is unsharded)
//   auto parts = ts::split<3, 3>(x);               // along a sharded dimension: see below
//   ts::split_plans_of<3, 3>(x)[1].describe();     // the plan of part 1
//
// Part i is ts::slice_in_dim<Dim>(x, i * n / N, n / N) (ops/slice.hpp), so each part keeps the
// operand's spec and unreduced axes, and its plan is that slice's: local along an unsharded
// dimension or where the part's shards lie in the same devices' operand shards, else one
// all_gather of the dimension over its axes. A static extent that N does not divide is a
// compile error; a dynamic one a ts::shape_error. Gradient: each part's slice transposes to a
// pad, and the pads add up to the concatenation of the parts' cotangents.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <utility>

#include "../core/detail/diagnose.hpp"
#include "../core/rules/indexing.hpp"
#include "../core/errors.hpp"
#include "slice.hpp"

namespace typeshard {

namespace detail {

[[noreturn]] TYPESHARD_COLD inline void throw_split_does_not_divide(std::size_t dim,
                                                                   std::size_t extent,
                                                                   std::size_t parts) {
  throw shape_error(message({"typeshard: ts::split: dimension ", dim, " of extent ", extent,
                             " does not split into ", parts,
                             " equal parts; fix: a part count that divides the extent, or "
                             "ts::slice_in_dim for unequal parts"}));
}

template <std::size_t Dim, std::size_t N, class X>
constexpr bool split_is_valid() {
  if constexpr (Dim >= X::rank)
    return require<false, diagnostic::slice_dim_out_of_range<Dim, X::rank>>::value && false;
  else if constexpr (N == 0 || (X::extents_type::is_static(Dim) &&
                                X::extents_type::static_extents[Dim] % N != 0))
    return require<false, diagnostic::split_parts_do_not_divide<
                              X::extents_type::static_extents[Dim], N>>::value &&
           false;
  else
    return true;
}

// The extents of one part.
template <std::size_t Dim, std::size_t N, class E>
using split_part_extents_t =
    with_extent_t<E, Dim, E::is_static(Dim) ? E::static_extents[Dim] / N : dyn>;

template <std::size_t Dim, std::size_t N, class X>
std::size_t split_part_extent(const X& x) {
  if (x.extent(Dim) % N != 0) throw_split_does_not_divide(Dim, x.extent(Dim), N);
  return x.extent(Dim) / N;
}

}  // namespace detail

// split<Dim, N>(x): N equal parts of x along Dim, as a std::array (each part: x's spec and
// unreduced axes, extent n / N along Dim).
template <std::size_t Dim, std::size_t N, sharded_array_like X>
[[nodiscard]] auto split(const X& x) {
  if constexpr (!detail::split_is_valid<Dim, N, X>()) {
    return std::array<X, 1>{x};  // the diagnostic fired: one error only
  } else {
    using R = detail::with_extents_t<X, detail::split_part_extents_t<Dim, N,
                                                                      typename X::extents_type>>;
    const std::size_t n = detail::split_part_extent<Dim, N>(x);
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::array<R, N>{detail::slice_as<R, Dim>(x, I * n, n)...};
    }(std::make_index_sequence<N>{});
  }
}

// split<Dim, N>(b) on a block inside ts::shard_map: N equal parts of the block itself (local).
template <std::size_t Dim, std::size_t N, block_like B>
[[nodiscard]] auto split(const B& b) {
  if constexpr (Dim >= B::rank) {
    static_assert(
        detail::require<false, diagnostic::slice_dim_out_of_range<Dim, B::rank>>::value);
    return std::array<B, 1>{b};
  } else if constexpr (N == 0) {
    static_assert(detail::require<false, diagnostic::split_parts_do_not_divide<0, N>>::value);
    return std::array<B, 1>{b};
  } else {
    const std::size_t n = detail::split_part_extent<Dim, N>(b);
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::array<B, N>{detail::slice_block<Dim>(b, I * n, n)...};
    }(std::make_index_sequence<N>{});
  }
}

// split_plans_for<A, Dim, N>(extents): the plan of each part of split<Dim, N> on an array of
// type A with these extents (nothing runs); split_plans_of<Dim, N>(x): on x.
template <class A, std::size_t Dim, std::size_t N>
  requires(Dim < A::rank && N > 0)
[[nodiscard]] std::array<slice_plan<A::rank>, N> split_plans_for(const shape<A::rank>& extents) {
  if (extents[Dim] % N != 0) detail::throw_split_does_not_divide(Dim, extents[Dim], N);
  const std::size_t n = extents[Dim] / N;
  std::array<slice_plan<A::rank>, N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = slice_plan_for<A, Dim>(extents, i * n, n);
  return out;
}
template <std::size_t Dim, std::size_t N, class X>
  requires(Dim < std::remove_cvref_t<X>::rank && N > 0)
[[nodiscard]] std::array<slice_plan<X::rank>, N> split_plans_of(const X& x) {
  return split_plans_for<X, Dim, N>(x.extents());
}

}  // namespace typeshard
