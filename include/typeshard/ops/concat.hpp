// typeshard/ops/concat.hpp: ts::concat, sharded arrays joined along one dimension in the global
// view (jnp.concatenate([a, b, ...], axis=Dim); lax.concatenate).
//
//   // a: [B, S, E], b: [B, S, F], both spec<"data", none, "model">
//   auto c = ts::concat<2>(a, b);              // [B, S, E + F], spec<"data", none, "model">
//   ts::concat_plan_of<2>(a, b).describe();    // an all_gather of each operand along 2
//   auto r = ts::concat<1>(a, a, a);           // along an unsharded dimension: local
//
// The operands have one element type, mesh, spec and unreduced axes (JAX's concatenate asks
// the same of their shardings; a spec that differs is a compile error naming the reshard),
// and the same extents but along Dim (checked at run time: ts::shape_error). The result keeps
// that spec and those unreduced axes (a concatenation is linear); its extent along Dim is the
// sum, static where every operand's is. Along an unsharded dimension each device joins its
// blocks (local); along a sharded one each operand is gathered along it (one all_gather per
// operand over the dimension's axes), joined, and each device keeps its shard (the plan,
// plan/slice_plan.hpp, says so). Gradient (ops/detail/traced_slices.hpp): the cotangent's
// slices, one per operand.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../array/block.hpp"
#include "../array/device_mesh.hpp"
#include "../array/sharded_array.hpp"
#include "../core/detail/diagnose.hpp"
#include "../core/rules/indexing.hpp"
#include "../core/errors.hpp"
#include "slice.hpp"

namespace typeshard {

namespace detail {

template <class A, class B>
constexpr bool concat_compatible() {
  return std::is_same_v<typename A::value_type, typename B::value_type> &&
         A::rank == B::rank && std::is_same_v<typename A::mesh_type, typename B::mesh_type> &&
         std::is_same_v<typename A::spec, typename B::spec> &&
         std::is_same_v<typename A::unreduced_type, typename B::unreduced_type>;
}

template <std::size_t Dim, class X, class... Xs>
constexpr bool concat_is_valid() {
  if constexpr (Dim >= X::rank) {
    return require<false, diagnostic::slice_dim_out_of_range<Dim, X::rank>>::value && false;
  } else if constexpr (!(concat_compatible<X, Xs>() && ...)) {
    constexpr std::array<bool, sizeof...(Xs)> ok{concat_compatible<X, Xs>()...};
    constexpr std::size_t bad = [&] {
      std::size_t i = 0;
      while (ok[i]) ++i;
      return i;
    }();
    using other = std::tuple_element_t<bad, std::tuple<Xs...>>;
    return require<false, diagnostic::concat_operands_differ<X, other>>::value && false;
  } else {
    return true;
  }
}

// The result's extent along Dim in its type: the sum if every operand's is static.
template <std::size_t Dim, class... Xs>
constexpr std::size_t concat_static_extent() {
  if constexpr ((Xs::extents_type::is_static(Dim) && ...))
    return (Xs::extents_type::static_extents[Dim] + ...);
  else
    return dyn;
}

[[noreturn]] TYPESHARD_COLD inline void throw_concat_extents_differ(std::size_t operand,
                                                                   std::size_t dim,
                                                                   std::size_t got,
                                                                   std::size_t want) {
  throw shape_error(message({"typeshard: ts::concat: operand ", operand, " has extent ", got,
                             " in dimension ", dim, ", the first operand ", want,
                             "; fix: operands that differ only along the joined dimension"}));
}

template <std::size_t Dim, class X, class... Xs>
auto concat_arrays(const X& x, const Xs&... xs) {
  using R = with_extents_t<X, with_extent_t<typename X::extents_type, Dim,
                                             concat_static_extent<Dim, X, Xs...>()>>;
  constexpr std::size_t Rank = X::rank;
  const std::vector<shape<Rank>> globals{x.extents(), xs.extents()...};
  std::size_t total = 0;
  for (std::size_t k = 0; k < globals.size(); ++k) {
    for (std::size_t d = 0; d < Rank; ++d)
      if (d != Dim && globals[k][d] != globals[0][d])
        throw_concat_extents_differ(k, d, globals[k][d], globals[0][d]);
    total += globals[k][Dim];
  }
  const auto& m = x.device_mesh();
  (check_same_device_mesh(m, xs.device_mesh(), "concat", move_to_other_devices_fix), ...);
  const slice_plan<Rank> plan =
      plan_concat<Rank>(mesh_value_of<typename X::mesh_type>(), X::layout_type::entries,
                        unreduced_axes<typename X::unreduced_type>(), Dim, x.extent(Dim), total);
  const std::vector<const std::vector<buffer<typename X::value_type>>*> blocks{
      x.shared_shards().get(), xs.shared_shards().get()...};
  shape<Rank> global = x.extents();
  global[Dim] = total;
  return R(adopt_shards, m, global,
           concat_blocks_on<typename X::value_type, Rank>(
               m.get_backend(), std::span<const device_id>(m.devices()),
               mesh_value_of<typename X::mesh_type>(), X::layout_type::entries, globals, blocks,
               plan));
}

}  // namespace detail

// concat<Dim>(x, xs...): the operands joined along Dim (their spec and unreduced axes kept).
template <std::size_t Dim, sharded_array_like X, sharded_array_like... Xs>
[[nodiscard]] auto concat(const X& x, const Xs&... xs) {
  if constexpr (!detail::concat_is_valid<Dim, X, Xs...>())
    return x;  // the diagnostic fired: one error only
  else
    return detail::concat_arrays<Dim>(x, xs...);
}

namespace detail {
// The block form: the blocks themselves joined (local); the result varies where any does.
template <std::size_t Dim, class B, class... Bs>
auto concat_blocks(const B& b, const Bs&... bs) {
  using R = block<typename B::value_type, B::rank, typename B::mesh_type,
                  (B::varying | ... | Bs::varying)>;
  constexpr std::size_t Rank = B::rank;
  const std::array<shape<Rank>, 1 + sizeof...(Bs)> e{b.extents(), bs.extents()...};
  const std::array<const typename B::value_type*, 1 + sizeof...(Bs)> in{b.data(), bs.data()...};
  shape<Rank> out_e = e[0];
  out_e[Dim] = 0;
  for (std::size_t k = 0; k < e.size(); ++k) {
    for (std::size_t d = 0; d < Rank; ++d)
      if (d != Dim && e[k][d] != e[0][d]) throw_concat_extents_differ(k, d, e[k][d], e[0][d]);
    out_e[Dim] += e[k][Dim];
  }
  std::size_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < Dim; ++d) outer *= out_e[d];
  for (std::size_t d = Dim + 1; d < Rank; ++d) inner *= out_e[d];
  buffer<typename B::value_type> out(outer * out_e[Dim] * inner);
  for (std::size_t o = 0, at = 0; o < outer; ++o)
    for (std::size_t k = 0; k < e.size(); ++k) {
      std::copy_n(in[k] + o * e[k][Dim] * inner, e[k][Dim] * inner, out.data() + at);
      at += e[k][Dim] * inner;
    }
  return R(b.context(), out_e, std::move(out));
}

template <class A, class B>
constexpr bool concat_blocks_compatible() {
  return std::is_same_v<typename A::value_type, typename B::value_type> && A::rank == B::rank &&
         std::is_same_v<typename A::mesh_type, typename B::mesh_type>;
}
}  // namespace detail

// concat<Dim>(b, bs...) on blocks inside ts::shard_map: the blocks joined along Dim (local).
template <std::size_t Dim, block_like B, block_like... Bs>
[[nodiscard]] auto concat(const B& b, const Bs&... bs) {
  if constexpr (Dim >= B::rank) {
    static_assert(
        detail::require<false, diagnostic::slice_dim_out_of_range<Dim, B::rank>>::value);
    return b;
  } else if constexpr (!(detail::concat_blocks_compatible<B, Bs>() && ...)) {
    using other = std::tuple_element_t<0, std::tuple<Bs...>>;
    static_assert(detail::require<false, diagnostic::concat_operands_differ<B, other>>::value);
    return b;
  } else {
    return detail::concat_blocks<Dim>(b, bs...);
  }
}

// concat_plan_of<Dim>(x, xs...): the plan concat<Dim>(x, xs...) runs.
template <std::size_t Dim, class X, class... Xs>
  requires(Dim < std::remove_cvref_t<X>::rank)
[[nodiscard]] slice_plan<X::rank> concat_plan_of(const X& x, const Xs&... xs) {
  return detail::plan_concat<X::rank>(
      detail::mesh_value_of<typename X::mesh_type>(), X::layout_type::entries,
      detail::unreduced_axes<typename X::unreduced_type>(), Dim, x.extent(Dim),
      (x.extent(Dim) + ... + xs.extent(Dim)));
}

}  // namespace typeshard
