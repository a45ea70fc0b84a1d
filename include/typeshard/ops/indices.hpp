// typeshard/ops/indices.hpp: indices as arrays: ts::iota, ts::one_hot, ts::argmax, ts::argmin.
//
//   auto i = ts::iota<std::int64_t, ts::spec<"x", "y">, 1>(m, ts::shape<2>{4, 8});  // i[r, c] = c
//   auto y = ts::one_hot(labels, 10);   // labels [B] of integers, spec<"x">: [B, 10] of float,
//                                       // spec<"x", none>
//   auto k = ts::argmax<1>(logits);     // [B, V] spec<"x", "y">: [B] of std::int64_t, spec<"x">
//   auto j = ts::argmin<0>(x, ts::keep_dims);
//
// iota (jax.lax.broadcasted_iota): each device makes its own block from its global index, no
// communication. one_hot (jax.nn.one_hot): local; a label outside [0, n) gives a row of zeros,
// as JAX's. argmax / argmin (jnp.argmax): the index of the first maximum (minimum) along Dim,
// NaN counted as the maximum (minimum) as in JAX, correct over a sharded Dim with uneven
// shards: the reduction's pmax (pmin) over Dim's axes, each device's candidate global indices
// from an iota, then a pmin of them, so two collectives of the result's size (none when Dim
// is not sharded). The index is std::int64_t; the result is sharded as ts::max<Dim>'s.
// On a value traced by ts::value_and_grad argmax and argmin read its forward value (an index
// has no gradient). On a block inside ts::shard_map argmax and argmin are local: the block's
// own indices, no collective. Not on unreduced values (rule 3).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "../array/block.hpp"
#include "../array/block_elementwise.hpp"
#include "../array/sharded_array.hpp"
#include "../backend/backend.hpp"
#include "../core/detail/diagnose.hpp"
#include "../core/rules/indexing.hpp"
#include "../core/rules/rule3_unreduced.hpp"
#include "../core/spec.hpp"
#include "../array/detail/buffer.hpp"
#include "../kernels/functors.hpp"
#include "elementwise.hpp"
#include "reduce.hpp"

namespace typeshard {

// iota<T, Spec, Dim>(m, global): an array of extents `global` sharded by Spec whose element
// at index i is i[Dim] (as T).
template <class T, spec_like Spec = spec<>, std::size_t Dim = 0, mesh_like Mesh, std::size_t Rank>
[[nodiscard]] auto iota(const device_mesh<Mesh>& m, const shape<Rank>& global) {
  if constexpr (Dim >= Rank) {
    static_assert(detail::require<false, diagnostic::iota_dim_out_of_range<Dim, Rank>>::value);
    return detail::after_diagnostic<T, Mesh, Spec, Rank>(m);
  } else {
    return device_put<Spec>(m, global, [](const index_slices<Rank>& ix) {
      shape<Rank> local{};
      for (std::size_t d = 0; d < Rank; ++d) local[d] = ix[d].size();
      host_tensor<T, Rank> out(local);
      std::size_t inner = 1;
      for (std::size_t d = Dim + 1; d < Rank; ++d) inner *= local[d];
      const std::size_t along = local[Dim];
      for (std::size_t i = 0; i < out.size(); ++i)
        out.data()[i] = static_cast<T>(ix[Dim].start + (i / inner) % along);
      return out;
    });
  }
}

// iota<T, Dim>(context, extents) inside ts::shard_map (context: a block's b.context()): a
// block of those extents whose element at index i is i[Dim], the block's own indices (as
// lax.broadcasted_iota inside shard_map; add the block's offset for global ones). The same on
// every device: it varies over no axis.
template <class T, std::size_t Dim, mesh_like Mesh, std::size_t Rank>
[[nodiscard]] auto iota(const shard_context<Mesh>& context, const shape<Rank>& extents) {
  if constexpr (Dim >= Rank) {
    static_assert(detail::require<false, diagnostic::iota_dim_out_of_range<Dim, Rank>>::value);
    return block<T, Rank, Mesh>(context, extents);
  } else {
    block<T, Rank, Mesh> out(context, extents);
    std::size_t inner = 1;
    for (std::size_t d = Dim + 1; d < Rank; ++d) inner *= extents[d];
    T* p = out.data();
    for (std::size_t i = 0; i < out.size(); ++i)
      p[i] = static_cast<T>((i / inner) % extents[Dim]);
    return out;
  }
}

namespace detail {

// Each device's block of one_hot: labels' block (any rank, row-major) times n classes.
template <class T, class L>
TYPESHARD_NOINLINE std::vector<buffer<T>> one_hot_blocks(backend& b,
                                                         std::span<const device_id> devices,
                                                         const std::vector<buffer<L>>& labels,
                                                         std::size_t n) {
  std::vector<buffer<T>> out(labels.size());
  b.run(devices, [&](std::size_t p) {
    const std::span<const L> l = labels[p].span();
    buffer<T> r(l.size() * n);
    std::fill_n(r.data(), r.size(), T{});
    for (std::size_t i = 0; i < l.size(); ++i)
      if (l[i] >= L{} && static_cast<std::size_t>(l[i]) < n) r.data()[i * n + l[i]] = T(1);
    out[p] = std::move(r);
  });
  return out;
}

template <class S, std::size_t... I>
spec<S::dim(I)..., dim_spec{}> spec_with_last_none(std::index_sequence<I...>);

// argmax's two element-wise steps: whether x is the extremum m (NaN matches NaN), and the
// candidate index (the index where it is, else the largest index, which pmin ignores).
struct is_extremum_t {
  template <class X>
  X operator()(X x, X m) const {
    return x == m || (fn::is_nan(x) && fn::is_nan(m)) ? X(1) : X(0);
  }
};
struct candidate_index_t {
  template <class H>
  std::int64_t operator()(H hit, std::int64_t i) const {
    return hit != H{} ? i : std::numeric_limits<std::int64_t>::max();
  }
};

template <reduction Op, bool KeepDims, int Dim, class A>
auto arg_extremum(const A& x) {
  using arr = std::remove_cvref_t<A>;
  constexpr reduction pick = Op == reduction::max ? reduction::max : reduction::min;
  constexpr int rank = static_cast<int>(arr::rank);
  constexpr bool in_range = Dim >= -rank && Dim < rank;
  if constexpr (!in_range || !arr::unreduced_type::empty) {
    return reduce<pick, auto_out, KeepDims, Dim>(x);  // its diagnostic (rule 7 or 3) fires
  } else {
    constexpr std::size_t d = static_cast<std::size_t>(Dim < 0 ? Dim + rank : Dim);
    const auto m = reduce<pick, auto_out, true, Dim>(x);  // replicated over Dim's axes
    const auto hit = zip(x, m, is_extremum_t{});
    const auto index = iota<std::int64_t, typename arr::spec, d>(x.device_mesh(), x.extents());
    return reduce<reduction::min, auto_out, KeepDims, Dim>(zip(hit, index, candidate_index_t{}));
  }
}

// On a block inside ts::shard_map: the same steps, local (the block's own indices, no
// collective; add the block's offset, from ts::axis_index, for a global index).
template <reduction Op, bool KeepDims, int Dim, class B>
auto block_arg_extremum(const B& x) {
  using blk = std::remove_cvref_t<B>;
  constexpr reduction pick = Op == reduction::max ? reduction::max : reduction::min;
  constexpr int rank = static_cast<int>(blk::rank);
  if constexpr (!(Dim >= -rank && Dim < rank)) {
    return reduce_block_local<pick, KeepDims, Dim>(x);  // its diagnostic (rule 7) fires
  } else {
    constexpr std::size_t d = static_cast<std::size_t>(Dim < 0 ? Dim + rank : Dim);
    const auto m = reduce_block_local<pick, true, Dim>(x);
    const auto hit = zip_blocks(x, m, is_extremum_t{}, "argmax");
    block<std::int64_t, blk::rank, typename blk::mesh_type, blk::varying> index(x.context(),
                                                                              x.extents());
    std::size_t inner = 1;
    for (std::size_t k = d + 1; k < blk::rank; ++k) inner *= x.extent(k);
    std::int64_t* o = index.data();
    for (std::size_t i = 0; i < index.size(); ++i)
      o[i] = static_cast<std::int64_t>((i / inner) % x.extent(d));
    return reduce_block_local<reduction::min, KeepDims, Dim>(
        zip_blocks(hit, index, candidate_index_t{}, "argmax"));
  }
}

}  // namespace detail

// one_hot<T = float>(labels, n): labels [B...] of integers, spec S: [B..., n] of T, spec S
// with the class dimension whole (ts::none).
template <class T = float, sharded_array_like L>
  requires std::is_integral_v<typename L::value_type>
[[nodiscard]] auto one_hot(const L& labels, std::size_t n) {
  using Mesh = typename L::mesh_type;
  constexpr std::size_t Rank = L::rank;
  using S = decltype(detail::spec_with_last_none<typename L::spec>(
      std::make_index_sequence<Rank>{}));
  using result = sharded_array<T, Mesh, S, dextents<Rank + 1>>;
  static_assert(detail::require<L::unreduced_type::empty,
                                diagnostic::nonlinear_op_on_unreduced<
                                    typename L::unreduced_type>>::value);
  shape<Rank + 1> global{};
  for (std::size_t d = 0; d < Rank; ++d) global[d] = labels.extent(d);
  global[Rank] = n;
  const device_mesh<Mesh>& m = labels.device_mesh();
  return result(adopt_shards, m, global,
                detail::one_hot_blocks<T, typename L::value_type>(
                    m.get_backend(), std::span<const device_id>(m.devices()),
                    *labels.shared_shards(), n));
}

// one_hot<T = float>(labels, n) on a block of integer labels inside ts::shard_map: the block's
// own rows (local), varying where the labels do.
template <class T = float, block_like L>
  requires std::is_integral_v<typename L::value_type>
[[nodiscard]] auto one_hot(const L& labels, std::size_t n) {
  constexpr std::size_t Rank = L::rank;
  shape<Rank + 1> e{};
  for (std::size_t d = 0; d < Rank; ++d) e[d] = labels.extent(d);
  e[Rank] = n;
  detail::buffer<T> out(labels.size() * n);
  std::fill_n(out.data(), out.size(), T{});
  const auto* v = labels.data();
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (v[i] >= 0 && static_cast<std::size_t>(v[i]) < n)
      out.data()[i * n + static_cast<std::size_t>(v[i])] = T(1);
  return block<T, Rank + 1, typename L::mesh_type, L::varying>(labels.context(), e,
                                                                std::move(out));
}

namespace detail {
template <reduction Pick, bool KeepDims, int Dim, class A>
auto any_arg_extremum(const A& x) {
  if constexpr (block_like<A>)
    return block_arg_extremum<Pick, KeepDims, Dim>(x);
  else
    return arg_extremum<Pick, KeepDims, Dim>(x);
}
}  // namespace detail

// argmax<Dim>(x), argmax<Dim>(x, ts::keep_dims); argmin likewise. On a block: local.
#define TYPESHARD_ARG_EXTREMUM(name, pick)                                     \
  template <int Dim, class A>                                                  \
    requires(sharded_array_like<A> || block_like<A>)                           \
  [[nodiscard]] auto name(const A& x) {                                        \
    return detail::any_arg_extremum<reduction::pick, false, Dim>(x);           \
  }                                                                            \
  template <int Dim, class A>                                                  \
    requires(sharded_array_like<A> || block_like<A>)                           \
  [[nodiscard]] auto name(const A& x, keep_dims_t) {                           \
    return detail::any_arg_extremum<reduction::pick, true, Dim>(x);            \
  }
TYPESHARD_ARG_EXTREMUM(argmax, max)
TYPESHARD_ARG_EXTREMUM(argmin, min)
#undef TYPESHARD_ARG_EXTREMUM

}  // namespace typeshard
