// typeshard/ops/collectives.hpp: collectives on local blocks inside ts::shard_map, with JAX's
// names and tiled semantics (jax.lax.all_gather(..., tiled=True) and friends).
//
//   auto g = ts::all_gather<"x">(b, 1);          // concatenate the group's blocks along dim 1
//   auto s = ts::psum<"x", "y">(b);              // all-reduce over both axes
//   auto r = ts::psum_scatter<"model">(b, 1);    // reduce, keep this device's slice of dim 1
//   auto t = ts::all_to_all<"i">(b, 0, 1);       // split dim 0 among the group, concat dim 1
//   auto p = ts::ppermute<"x">(b, {{0, 1}, {1, 0}});  // (source, destination) pairs
//   auto q = ts::shift<"x">(b, 1);               // ring: rank r sends to r + 1
//   std::size_t i = ts::axis_index<"x">(b);      // this device's coordinate along "x"
//   auto v = ts::pvary<"y">(b);                  // typed as varying over "y" too
//
// A collective over axes A runs over the devices that share every other mesh coordinate
// (the group), ranked by their coordinates on A, the first axis of A major. Every device
// of the mesh calls the same collectives in the same order (SPMD). The result's type says
// how it varies (rule 4): psum, pmax, pmin, pmean and all_gather over A make it invariant
// over A; psum_scatter, all_to_all and ppermute make it vary over A.
//
// Shapes follow JAX: all_gather and all_to_all need equal blocks on the group's devices;
// psum_scatter also takes an extent that does not divide (trailing devices get smaller
// slices, as torch.chunk; JAX requires divisibility). Data moves through the backend's
// primitives, with no copy beyond the collective's own.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backend/backend.hpp"
#include "../backend/detail/call_site.hpp"
#include "../array/block.hpp"
#include "../array/detail/buffer.hpp"
#include "detail/block_collective.hpp"
#include "detail/collective_calls.hpp"
#include "../core/detail/mesh_group.hpp"
#include "../core/layout.hpp"

namespace typeshard {

// psum<Axes...>(x): the sum of x over the group (all-reduce), on every member.
// pmax / pmin: the elementwise maximum / minimum over the group (NaN-aware, as the
// elementwise ts::maximum / ts::minimum: kernels/functors.hpp).
#define TYPESHARD_GROUP_REDUCTION(name, op)                                    \
  template <axis_name... Axes, block_like B>                                   \
    requires(sizeof...(Axes) >= 1)                                             \
  [[nodiscard]]                                                                \
  auto name(const B& x,                                                        \
            detail::source_site loc = detail::source_site::current()) {        \
    const detail::call_site_scope site(loc);                                   \
    return detail::checked_reduce<reduce_op::op, Axes...>(x);                  \
  }
TYPESHARD_GROUP_REDUCTION(psum, sum)
TYPESHARD_GROUP_REDUCTION(pmax, max)
TYPESHARD_GROUP_REDUCTION(pmin, min)
#undef TYPESHARD_GROUP_REDUCTION

// pmean: psum divided by the group size (integer division for integer elements).
template <axis_name... Axes, block_like B>
  requires(sizeof...(Axes) >= 1)
[[nodiscard]] auto pmean(const B& x, detail::source_site loc = detail::source_site::current()) {
  const detail::call_site_scope site(loc);
  return detail::checked_collective<Axes...>(x, [&](const auto& g) {
    using T = typename B::value_type;
    auto s = detail::reduce_block<reduce_op::sum, Axes...>(x, g);
    const T n = static_cast<T>(g.size);
    for (T& v : s.values()) v /= n;
    return s;
  });
}

// all_gather<Axes...>(x, dim): the group's blocks concatenated along dim in rank order
// (tiled); invariant over Axes. The blocks must have equal shapes.
template <axis_name... Axes, block_like B>
  requires(sizeof...(Axes) >= 1)
[[nodiscard]] auto all_gather(const B& x, std::size_t dim = 0,
                              detail::source_site loc = detail::source_site::current()) {
  const detail::call_site_scope site(loc);
  return detail::checked_collective<Axes...>(x, [&](const auto& g) {
    using T = typename B::value_type;
    detail::check_dimension(x, dim, "all_gather");
    typename B::shape_type out_shape = x.extents();
    out_shape[dim] *= g.size;
    detail::buffer<T> out(host_tensor<T, B::rank>::element_count(out_shape));
    const std::vector<std::size_t> extents(g.size, x.extent(dim));
    detail::gather_along(x.context().get_backend(), detail::backend_group(g), x.data(),
                         x.extents(), dim, std::span<const std::size_t>(extents), out.data());
    return detail::invariant_over<B, Axes...>(x.context(), out_shape, std::move(out));
  });
}

// psum_scatter<Axes...>(x, dim): the sum over the group, of which member r keeps slice r
// along dim (tiled reduce-scatter); varies over Axes. An extent that does not divide gives
// slices of ceil(extent / size), the trailing ones shorter.
template <axis_name... Axes, block_like B>
  requires(sizeof...(Axes) >= 1)
[[nodiscard]] auto psum_scatter(const B& x, std::size_t dim = 0,
                                detail::source_site loc = detail::source_site::current()) {
  const detail::call_site_scope site(loc);
  return detail::checked_collective<Axes...>(x, [&](const auto& g) {
    using T = typename B::value_type;
    detail::check_dimension(x, dim, "psum_scatter");
    std::vector<std::size_t> extents(g.size);
    for (std::size_t r = 0; r < g.size; ++r)
      extents[r] = shard_slice(x.extent(dim), g.size, r).size();
    typename B::shape_type out_shape = x.extents();
    out_shape[dim] = extents[g.rank];
    detail::buffer<T> out(host_tensor<T, B::rank>::element_count(out_shape));
    detail::scatter_along(x.context().get_backend(), detail::backend_group(g), reduce_op::sum,
                          x.data(), x.extents(), dim, std::span<const std::size_t>(extents),
                          out.data());
    return detail::varying_over<B, Axes...>(x.context(), out_shape, std::move(out));
  });
}

// all_to_all<Axes...>(x, split_axis, concat_axis): x is cut into equal chunks along
// split_axis, chunk j sent to member j; the chunks received are concatenated along
// concat_axis in rank order (tiled). Varies over Axes.
template <axis_name... Axes, block_like B>
  requires(sizeof...(Axes) >= 1)
[[nodiscard]] auto all_to_all(const B& x, std::size_t split_axis, std::size_t concat_axis,
                              detail::source_site loc = detail::source_site::current()) {
  const detail::call_site_scope site(loc);
  return detail::checked_collective<Axes...>(x, [&](const auto& g) {
    using T = typename B::value_type;
    detail::check_dimension(x, split_axis, "all_to_all");
    detail::check_dimension(x, concat_axis, "all_to_all");
    if (x.extent(split_axis) % g.size != 0)
      detail::throw_split_not_divisible(split_axis, x.extent(split_axis), g.size);
    const auto out_shape =
        detail::all_to_all_shape<T>(x.extents(), g.size, split_axis, concat_axis);
    detail::buffer<T> out(host_tensor<T, B::rank>::element_count(out_shape));
    detail::all_to_all_along(x.context().get_backend(), detail::backend_group(g), x.data(),
                             x.extents(), split_axis, concat_axis, out.data());
    return detail::varying_over<B, Axes...>(x.context(), out_shape, std::move(out));
  });
}

// ppermute<Axes...>(x, perm): perm lists (source rank, destination rank) pairs within the
// group; each destination receives its source's block, a device no pair sends to gets
// zeros (as in JAX). Varies over Axes. Blocks moved must have equal shapes.
template <axis_name... Axes, block_like B>
  requires(sizeof...(Axes) >= 1)
[[nodiscard]] auto ppermute(const B& x, std::span<const std::pair<std::size_t, std::size_t>> perm,
                            detail::source_site loc = detail::source_site::current()) {
  const detail::call_site_scope site(loc);
  return detail::checked_collective<Axes...>(x, [&](const auto& g) {
    using T = typename B::value_type;
    std::size_t send_to = no_peer, recv_from = no_peer;
    std::vector<bool> is_source(g.size, false), is_destination(g.size, false);
    for (const auto& [source, destination] : perm) {
      if (source >= g.size || destination >= g.size || is_source[source] ||
          is_destination[destination])
        detail::throw_bad_permutation_pair(source, destination, g.size);
      is_source[source] = is_destination[destination] = true;
      if (source == g.rank) send_to = destination;
      if (destination == g.rank) recv_from = source;
    }
    detail::buffer<T> out(x.size());
    x.context().get_backend().permute(detail::backend_group(g), element_type_of<T>, x.data(),
                                      send_to == no_peer ? 0 : x.size(), send_to, out.data(),
                                      out.size(), recv_from);
    return detail::varying_over<B, Axes...>(x.context(), x.extents(), std::move(out));
  });
}
template <axis_name... Axes, block_like B>
  requires(sizeof...(Axes) >= 1)
[[nodiscard]]
auto ppermute(const B& x, std::initializer_list<std::pair<std::size_t, std::size_t>> perm,
              detail::source_site loc = detail::source_site::current()) {
  return ppermute<Axes...>(
      x, std::span<const std::pair<std::size_t, std::size_t>>(perm.begin(), perm.size()), loc);
}

// shift<Axes...>(x, offset): the ring permutation in which rank r sends to
// (r + offset) mod size (ppermute with every pair); varies over Axes.
template <axis_name... Axes, block_like B>
  requires(sizeof...(Axes) >= 1)
[[nodiscard]] auto shift(const B& x, std::ptrdiff_t offset,
                         detail::source_site loc = detail::source_site::current()) {
  const detail::call_site_scope site(loc);
  using Mesh = typename B::mesh_type;
  if constexpr (!detail::check_collective_axes<Mesh, Axes...>()) {
    return detail::after_diagnostic(x);
  } else {
    const auto n = static_cast<std::ptrdiff_t>(
        detail::group_size<Mesh>(detail::axes_list<Axes...>()));
    std::vector<std::pair<std::size_t, std::size_t>> perm;
    for (std::ptrdiff_t r = 0; r < n; ++r)
      perm.emplace_back(static_cast<std::size_t>(r),
                        static_cast<std::size_t>(((r + offset) % n + n) % n));
    return ppermute<Axes...>(x, std::span<const std::pair<std::size_t, std::size_t>>(perm),
                             loc);
  }
}

// pvary<Axes...>(x): x typed as varying over Axes too (JAX's pvary); no communication, no
// copy of owned data. Binary operations widen implicitly; this is for being explicit.
template <axis_name... Axes, block_like B>
  requires(sizeof...(Axes) >= 1)
[[nodiscard]] auto pvary(B&& x) {
  using arr = std::remove_cvref_t<B>;
  if constexpr (!detail::check_collective_axes<typename arr::mesh_type, Axes...>())
    return arr(x);
  else
    return std::forward<B>(x).template as_varying<(arr::varying |
                                                   vary<typename arr::mesh_type, Axes...>)>();
}

// axis_index<Axes...>(x): the rank of x's device in the group (its coordinate along a
// single axis), as jax.lax.axis_index.
template <axis_name... Axes, block_like B>
  requires(sizeof...(Axes) >= 1)
[[nodiscard]] std::size_t axis_index(const B& x) {
  return x.context().template axis_index<Axes...>();
}

// axis_size<Axes...>(x): the number of devices in the group.
template <axis_name... Axes, block_like B>
  requires(sizeof...(Axes) >= 1)
[[nodiscard]] constexpr std::size_t axis_size(const B&) {
  if constexpr (!detail::check_collective_axes<typename B::mesh_type, Axes...>())
    return 0;
  else
    return detail::group_size<typename B::mesh_type>(detail::axes_list<Axes...>());
}

}  // namespace typeshard

#include "detail/collective_on_global_array.hpp"
