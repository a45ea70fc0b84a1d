// typeshard/ops/slice.hpp: ts::slice_in_dim, a contiguous range of one dimension of a sharded
// array in the global view (JAX's lax.dynamic_slice_in_dim(x, start, size, axis), and
// lax.slice_in_dim with static bounds).
//
//   // x: [B, S, 3 E], spec<"data", none, "model">
//   auto k = ts::slice_in_dim<2>(x, e, e);        // [B, S, E], run-time offsets
//   auto h = ts::slice_in_dim<1, 0, 8>(x);        // [B, 8, 3 E], static: extent 8 in the type
//   ts::slice_plan_of<2>(x, e, e).describe();     // the collectives it runs, if any
//
// The result keeps the operand's spec (JAX's sharding rule for slices; an extent that does
// not divide is sharded unevenly, where JAX refuses). Slicing an unsharded dimension is
// local: each device copies its block's range. Along a sharded dimension, where every
// device's result shard lies inside its own operand shard (a range starting at 0 that keeps
// each shard's elements, say), it is local too; otherwise each device needs elements others
// hold: one all_gather of the dimension over its axes, then each device keeps its shard of
// the range (plan/slice_plan.hpp: the plan is a value, printable, checked at run time from
// the extents and offsets, or in a static_assert where they are constants). The operand's
// unreduced axes stay unreduced (a slice is linear). Gradient (ops/detail/traced_slices.hpp):
// the cotangent padded with zeros into the operand's extent, planned the same way.
//
// Mistakes: Dim out of range, or a static range past a static extent, is a compile error;
// a run-time range past the extent is a ts::shape_error naming it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "../array/block.hpp"
#include "../array/device_mesh.hpp"
#include "../array/sharded_array.hpp"
#include "../backend/backend.hpp"
#include "../core/config.hpp"
#include "../core/detail/diagnose.hpp"
#include "../core/rules/indexing.hpp"
#include "../core/errors.hpp"
#include "../core/extents.hpp"
#include "../core/layout.hpp"
#include "../plan/slice_plan.hpp"
#include "detail/slice_blocks.hpp"

namespace typeshard {

namespace detail {

// E with its extent Dim replaced by V (ts::dyn: dynamic).
template <class E, std::size_t Dim, std::size_t V, class I = std::make_index_sequence<E::rank>>
struct with_extent;
template <class E, std::size_t Dim, std::size_t V, std::size_t... I>
struct with_extent<E, Dim, V, std::index_sequence<I...>> {
  using type = extents<(I == Dim ? V : E::static_extents[I])...>;
};
template <class E, std::size_t Dim, std::size_t V>
using with_extent_t = typename with_extent<E, Dim, V>::type;

// X's array type with extents E.
template <class X, class E>
using with_extents_t = sharded_array<typename X::value_type, typename X::mesh_type,
                                     typename X::spec, E, typename X::unreduced_type>;

// U's axes as a dim_spec.
template <class U>
constexpr dim_spec unreduced_axes() {
  dim_spec out;
  for (std::size_t i = 0; i < U::size; ++i) out.axes[out.count++] = U::axes[i];
  return out;
}

// The plan of a window of x along Dim (result j <- operand j + shift).
template <class X>
constexpr slice_plan<X::rank> window_plan_of(std::size_t dim, std::size_t in_extent,
                                             std::ptrdiff_t shift, std::size_t out_extent,
                                             const char* op) {
  return plan_window<X::rank>(mesh_value_of<typename X::mesh_type>(), X::layout_type::entries,
                              unreduced_axes<typename X::unreduced_type>(), dim, in_extent, shift,
                              out_extent, op);
}

[[noreturn]] TYPESHARD_COLD inline void throw_slice_out_of_range(std::size_t dim,
                                                                std::size_t start,
                                                                std::size_t size,
                                                                std::size_t extent) {
  throw shape_error(message({"typeshard: ts::slice_in_dim: the range [", start, ", ",
                             start + size, ") of dimension ", dim, " ends past its extent ",
                             extent, "; fix: start + size <= the extent"}));
}

// The window of x along dim as an array of type R: result index j reads operand j + shift
// (zero outside the operand), result extent out_extent. A slice, or (shift < 0) a pad.
template <class R, class X>
R window_as(const X& x, std::size_t dim, std::ptrdiff_t shift, std::size_t out_extent,
            const char* op) {
  const slice_plan<X::rank> plan = window_plan_of<X>(dim, x.extent(dim), shift, out_extent, op);
  shape<X::rank> global = x.extents();
  global[dim] = out_extent;
  const auto& m = x.device_mesh();
  return R(adopt_shards, m, global,
           window_blocks_on<typename X::value_type, X::rank>(
               m.get_backend(), std::span<const device_id>(m.devices()),
               mesh_value_of<typename X::mesh_type>(), X::layout_type::entries, x.extents(),
               *x.shared_shards(), plan));
}

// The slice [start, start + size) of x along Dim, as an array of type R.
template <class R, std::size_t Dim, class X>
R slice_as(const X& x, std::size_t start, std::size_t size) {
  if (start > x.extent(Dim) || size > x.extent(Dim) - start)
    throw_slice_out_of_range(Dim, start, size, x.extent(Dim));
  return window_as<R>(x, Dim, static_cast<std::ptrdiff_t>(start), size, "slice");
}

// Elements [start, start + n) along d of a row-major block of extents `e`, copied.
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE buffer<T> slice_block_data(const T* in, const shape<Rank>& e, std::size_t d,
                                              std::size_t start, std::size_t n) {
  std::size_t outer = 1, inner = 1;
  for (std::size_t k = 0; k < d; ++k) outer *= e[k];
  for (std::size_t k = d + 1; k < Rank; ++k) inner *= e[k];
  buffer<T> out(outer * n * inner);
  for (std::size_t o = 0; o < outer; ++o)
    std::copy_n(in + (o * e[d] + start) * inner, n * inner, out.data() + o * n * inner);
  return out;
}

// The block form: a slice of the block itself (one device's data; no communication).
template <std::size_t Dim, class B>
B slice_block(const B& b, std::size_t start, std::size_t size) {
  if (start > b.extent(Dim) || size > b.extent(Dim) - start)
    throw_slice_out_of_range(Dim, start, size, b.extent(Dim));
  shape<B::rank> e = b.extents();
  e[Dim] = size;
  return B(b.context(), e,
           slice_block_data<typename B::value_type, B::rank>(b.data(), b.extents(), Dim, start,
                                                             size));
}

}  // namespace detail

// slice_in_dim<Dim>(x, start, size): x's elements [start, start + size) along Dim, the spec
// and unreduced axes kept; the extent of Dim dynamic in the result's type. On a block inside
// ts::shard_map: the block's own elements (local: a block is one device's data).
template <std::size_t Dim, class X>
  requires(sharded_array_like<X> || block_like<X>)
[[nodiscard]] auto slice_in_dim(const X& x, std::size_t start, std::size_t size) {
  if constexpr (Dim >= X::rank) {
    static_assert(
        detail::require<false, diagnostic::slice_dim_out_of_range<Dim, X::rank>>::value);
    return x;
  } else if constexpr (block_like<X>) {
    return detail::slice_block<Dim>(x, start, size);
  } else {
    using R = detail::with_extents_t<X, detail::with_extent_t<typename X::extents_type, Dim, dyn>>;
    return detail::slice_as<R, Dim>(x, start, size);
  }
}

// slice_in_dim<Dim, Start, Size>(b) on a block: the range checked at run time (a block's
// extents are run-time values).
template <std::size_t Dim, std::size_t Start, std::size_t Size, block_like B>
[[nodiscard]] auto slice_in_dim(const B& b) {
  return typeshard::slice_in_dim<Dim>(b, Start, Size);
}

// slice_in_dim<Dim, Start, Size>(x): the same with a static range; the result's extent of Dim
// is Size in its type.
template <std::size_t Dim, std::size_t Start, std::size_t Size, sharded_array_like X>
[[nodiscard]] auto slice_in_dim(const X& x) {
  if constexpr (Dim >= X::rank) {
    static_assert(
        detail::require<false, diagnostic::slice_dim_out_of_range<Dim, X::rank>>::value);
    return x;
  } else if constexpr (X::extents_type::is_static(Dim) &&
                       Start + Size > X::extents_type::static_extents[Dim]) {
    constexpr std::size_t extent = X::extents_type::static_extents[Dim];
    static_assert(
        detail::require<false, diagnostic::slice_past_static_extent<Start, Size, extent>>::value);
    return x;
  } else {
    using R = detail::with_extents_t<X, detail::with_extent_t<typename X::extents_type, Dim, Size>>;
    return detail::slice_as<R, Dim>(x, Start, Size);
  }
}

// slice_plan_for<A, Dim>(extents, start, size): the plan slice_in_dim<Dim> runs on an array of
// type A with these extents (nothing runs); slice_plan_of<Dim>(x, start, size): on x.
template <class A, std::size_t Dim>
  requires(Dim < A::rank)
[[nodiscard]] slice_plan<A::rank> slice_plan_for(const shape<A::rank>& extents, std::size_t start,
                                                 std::size_t size) {
  return detail::window_plan_of<A>(Dim, extents[Dim], static_cast<std::ptrdiff_t>(start), size,
                                   "slice");
}
template <std::size_t Dim, class X>
  requires(Dim < std::remove_cvref_t<X>::rank)
[[nodiscard]] slice_plan<X::rank> slice_plan_of(const X& x, std::size_t start, std::size_t size) {
  return slice_plan_for<X, Dim>(x.extents(), start, size);
}

}  // namespace typeshard
