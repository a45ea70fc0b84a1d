// typeshard/ops/reduce.hpp: sum, mean, max and min over some dimensions of a sharded array.
//
//   auto s = ts::sum<1>(x);                  // x: spec<"x", "y">: spec<"x">, unreduced over "y"
//   auto r = ts::reshard<ts::spec<"x">>(s);  //   reduce when you want (psum over y)
//   auto t = ts::sum<ts::spec<"x">, 1>(x);   // or name the output spec: the plan reduces
//   auto m = ts::mean<>(x);                  // every dimension: rank 0 (spec<>), unreduced
//   float v = ts::reshard<ts::spec<>>(m).item();   //   over x and y until resharded; JAX's float()
//   auto k = ts::max<0>(x, ts::keep_dims);   // pmax over "x"; dimension 0 kept, extent 1
//   using plan = ts::reduce_plan_for<ts::reduction::max, decltype(x), 0>;   // inspect it
//
// Dims are NumPy's axis numbers (negative ones count from the last); none means every
// dimension, and the result is then a rank-0 array (ts::spec<>, ts::extents<>), as in JAX
// (ts::keep_dims keeps every dimension at extent 1 instead). The plan (plan/reduce_plan.hpp)
// says what runs: each device reduces its block (a reduced dimension sharded over some axes
// leaves a partial result over them), then sum and mean stay unreduced over those axes (no
// communication, rule 7) while max and min all-reduce over them (pmax / pmin); with an
// output spec named, the reshard to it follows.
// mean divides by the global count of reduced elements, so uneven shards are exact. Rule 3:
// sum and mean of an unreduced value stay unreduced (they are linear), max and min of one do
// not compile.
#pragma once

#include <array>
#include <cstddef>
#include <limits>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "../array/block.hpp"
#include "../array/sharded_array.hpp"
#include "../backend/backend.hpp"
#include "../core/layout.hpp"
#include "../detail/buffer.hpp"
#include "../kernels/functors.hpp"
#include "../plan/reduce_plan.hpp"
#include "detail/executor.hpp"

namespace typeshard {

namespace detail {

// The identity of a reduction: what an empty block (uneven shards) contributes.
template <class T>
constexpr T reduce_identity(reduction op) {
  if (op == reduction::max)
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::lowest();
  if (op == reduction::min)
    return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::max();
  return T{};
}

// out[j] = f(out[j], in[i]) for every element i of a row-major block of shape `s`, j its
// index with the masked dimensions dropped. The innermost dimension runs as a plain loop
// (a running value when it is reduced, a vector update when it is not).
template <class T, std::size_t Rank, class F>
void reduce_block_rows(const T* in, const shape<Rank>& s, const std::array<bool, Rank>& mask,
                       T* out, F f) {
  std::array<std::size_t, Rank> stride{};
  std::size_t st = 1;
  std::size_t n = 1;
  for (std::size_t d = Rank; d-- > 0;) {
    stride[d] = mask[d] ? 0 : st;
    if (!mask[d]) st *= s[d];
    n *= s[d];
  }
  if (n == 0) return;
  const std::size_t len = s[Rank - 1];
  const std::size_t inner = stride[Rank - 1];
  std::array<std::size_t, Rank> idx{};
  std::size_t o = 0;
  for (std::size_t i = 0; i < n; i += len) {
    if (inner == 0) {
      T acc = out[o];
      for (std::size_t k = 0; k < len; ++k) acc = f(acc, in[i + k]);
      out[o] = acc;
    } else {
      for (std::size_t k = 0; k < len; ++k) out[o + k] = f(out[o + k], in[i + k]);
    }
    for (std::size_t d = Rank - 1; d-- > 0;) {
      o += stride[d];
      if (++idx[d] < s[d]) break;
      o -= stride[d] * s[d];
      idx[d] = 0;
    }
  }
}

// reduce_block at any rank (a rank-0 block is its one element).
template <class T, std::size_t Rank, class F>
void reduce_block(const T* in, const shape<Rank>& s, const std::array<bool, Rank>& mask, T* out,
                  F f) {
  if constexpr (Rank == 0) {  // a rank-0 block: its one element
    (void)s, (void)mask;
    *out = f(*out, *in);
  } else {
    reduce_block_rows(in, s, mask, out, f);
  }
}

// The local_reduce step on one device's block: the block of the result (reduced dimensions
// extent 1) as a new buffer; mean's partial sums scaled by 1 / count.
template <class T, std::size_t Rank>
buffer<T> local_reduce(reduction op, std::span<const T> in, const shape<Rank>& s,
                       const std::array<bool, Rank>& mask, double count) {
  if constexpr (std::is_same_v<T, bfloat16>) {  // accumulated in float, rounded once
    const std::vector<float> wide(in.begin(), in.end());
    const buffer<float> r = local_reduce<float, Rank>(op, wide, s, mask, count);
    buffer<T> out(r.size());
    for (std::size_t i = 0; i < r.size(); ++i) out.data()[i] = bfloat16(r.data()[i]);
    return out;
  }
  std::size_t n = 1;
  for (std::size_t d = 0; d < Rank; ++d) n *= mask[d] ? 1 : s[d];
  buffer<T> out(n);
  T* o = out.data();
  for (std::size_t i = 0; i < n; ++i) o[i] = reduce_identity<T>(op);
  switch (op) {
    case reduction::sum:
    case reduction::mean:
      reduce_block(in.data(), s, mask, o, fn::plus);
      break;
    case reduction::max:
      reduce_block(in.data(), s, mask, o, fn::maximum);
      break;
    case reduction::min:
      reduce_block(in.data(), s, mask, o, fn::minimum);
      break;
  }
  if constexpr (std::is_floating_point_v<T>)
    if (op == reduction::mean) {
      const T scale = static_cast<T>(1.0 / count);
      for (std::size_t i = 0; i < n; ++i) o[i] *= scale;
    }
  return out;
}

// Runs a reduce plan on the blocks `in` of an array sharded by `in_spec` (extents `global`)
// on the devices of a mesh (`devices`, by mesh position, on backend `b`), the plan given as
// values: each device reduces its block (op over the dimensions of `reduced`, mean by the
// global count) into `local`, then walks the rest of the plan's steps for the evenness of
// the kept extents (collectives, slices) in the one executor. Sets `kept_global` (the
// reduced dimensions at extent 1). A template of the element type and rank only, whatever
// the plan and the mesh, so a program's reductions share it and typeshard::runtime compiles
// the common ones once.
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE std::vector<buffer<T>> reduce_blocks_on(
    backend& b, std::span<const device_id> devices, const mesh_value& mv, reduction op,
    const std::array<bool, Rank>& reduced, const std::vector<buffer<T>>& in,
    const spec_array<Rank>& in_spec, const shape<Rank>& global, const spec_array<Rank>& local,
    const spec_array<Rank>& target, std::span<const step<Rank>> even_steps,
    std::span<const step<Rank>> uneven_steps, shape<Rank>& kept_global) {
  kept_global = global;
  double count = 1;
  for (std::size_t d = 0; d < Rank; ++d)
    if (reduced[d]) {
      kept_global[d] = 1;
      count *= static_cast<double>(global[d]);
    }
  const bool even = is_even(mv, local, kept_global) && is_even(mv, target, kept_global);
  // steps[0] is the local_reduce step; the executor runs the rest.
  const std::span<const step<Rank>> rest = (even ? even_steps : uneven_steps).subspan(1);
  std::vector<buffer<T>> out(mv.size);
  b.run(devices, [&](std::size_t p) {
    operand_block<T, Rank> x(nullptr, local, kept_global);
    x.adopt(local_reduce<T, Rank>(op, in[p].span(), local_shape_of(mv, in_spec, global, p),
                                  reduced, count),
            local);
    run_steps<T, Rank>(b, mv, p, rest, std::span<operand_block<T, Rank>>(&x, 1), [](auto) {});
    take_slices<T, Rank>(mv, p, x);
    out[p] = std::move(x.owned);
  });
  return out;
}

#if defined(TYPESHARD_SEPARATE_COMPILATION)
#define TYPESHARD_REDUCE_BLOCKS_INSTANCE(prefix, T, R)                                         \
  prefix std::vector<buffer<T>> reduce_blocks_on<T, R>(                                        \
      backend&, std::span<const device_id>, const mesh_value&, reduction,                      \
      const std::array<bool, R>&, const std::vector<buffer<T>>&, const spec_array<R>&,          \
      const shape<R>&, const spec_array<R>&, const spec_array<R>&, std::span<const step<R>>,   \
      std::span<const step<R>>, shape<R>&);
TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(TYPESHARD_REDUCE_BLOCKS_INSTANCE, extern template)
#endif

// Runs a reduce plan on `a`: one multi-device run in which each device reduces its block and
// then walks the plan's remaining steps (collectives, slices) in the one executor.
template <class Plan, class T, class Mesh, class S, class E, class U>
auto run_reduce(const sharded_array<T, Mesh, S, E, U>& a) {
  constexpr std::size_t Rank = E::rank;
  shape<Rank> kept_global{};
  std::vector<buffer<T>> out = reduce_blocks_on<T, Rank>(
      a.device_mesh().get_backend(), std::span<const device_id>(a.device_mesh().devices()),
      mesh_value_of<Mesh>(), Plan::op, Plan::reduced, *a.shared_shards(),
      sharded_array<T, Mesh, S, E, U>::layout_type::entries, a.extents(),
      spec_array_of<typename Plan::local_spec, Rank>(),
      spec_array_of<typename Plan::keep_spec, Rank>(), Plan::even_steps, Plan::uneven_steps,
      kept_global);

  // The result at the input's rank, then (no copy) at the output's rank.
  constexpr std::size_t OutRank = Plan::out_rank;
  shape<OutRank> out_shape{};
  for (std::size_t j = 0; j < OutRank; ++j) out_shape[j] = kept_global[Plan::kept.dims[j]];
  using result = sharded_array<T, Mesh, typename Plan::out_spec, typename Plan::out_extents,
                               typename Plan::out_unreduced>;
  return result(adopt_shards, a.device_mesh(), out_shape, std::move(out));
}

template <reduction Op, class OutSpec, bool KeepDims, int... Dims, class A>
auto reduce(const A& a) {
  using arr = std::remove_cvref_t<A>;
  using plan = reduce_plan_with<Op, arr, OutSpec, KeepDims, Dims...>;
  using result = sharded_array<typename arr::value_type, typename arr::mesh_type,
                               typename plan::out_spec, typename plan::out_extents,
                               typename plan::out_unreduced>;
  if constexpr (!plan::valid)
    // The plan's diagnostic fired: a value of the type the caller expects (never run), so
    // the code around the call compiles on and the user sees one message.
    return result(adopt_shards, a.device_mesh(), shape<plan::out_rank>{},
                  std::shared_ptr<const std::vector<buffer<typename arr::value_type>>>{});
  else
    return run_reduce<plan>(a);
}

// ---- reductions of a block inside ts::shard_map: local, no collective ----------------------

// Op over Dims of block b (every dimension when none), keeping the dimensions at extent 1
// or dropping them (reducing every dimension without keep_dims gives a rank-0 block).
// Rule 7's dimension checks, as for arrays; the block varies over what b varies over.
template <reduction Op, bool KeepDims, int... Dims, class B>
auto reduce_block_local(const B& b) {
  using blk = std::remove_cvref_t<B>;
  using T = typename blk::value_type;
  constexpr std::size_t Rank = blk::rank;
  constexpr reduce_dims_problem p = find_reduce_dims_problem<Rank, Dims...>();
  constexpr std::array<bool, Rank> mask = reduced_mask<Rank, Dims...>();
  constexpr std::size_t kept = [] {
    std::size_t n = 0;
    for (bool m : reduced_mask<Rank, Dims...>()) n += !m;
    return n;
  }();
  constexpr std::size_t OutRank = KeepDims ? Rank : kept;
  using result = block<T, OutRank, typename blk::mesh_type, blk::varying>;
  if constexpr (p.what == reduce_dims_problem::out_of_range) {
    static_assert(require<false, diagnostic::reduce_dim_out_of_range<p.dim, Rank>>::value);
    return result(b.context(), shape<OutRank>{});
  } else if constexpr (p.what == reduce_dims_problem::repeated) {
    static_assert(require<false, diagnostic::reduce_dim_repeated<p.dim>>::value);
    return result(b.context(), shape<OutRank>{});
  } else if constexpr (Op == reduction::mean && !std::is_floating_point_v<T>) {
    static_assert(require<false, diagnostic::mean_needs_floating_point<T>>::value);
    return result(b.context(), shape<OutRank>{});
  } else {
    double count = 1;
    for (std::size_t d = 0; d < Rank; ++d)
      if (mask[d]) count *= static_cast<double>(b.extent(d));
    shape<OutRank> out{};
    for (std::size_t d = 0, j = 0; d < Rank; ++d) {
      if constexpr (KeepDims)
        out[d] = mask[d] ? 1 : b.extent(d);
      else if (!mask[d])
        out[j++] = b.extent(d);
    }
    return result(b.context(), out,
                  local_reduce<T, Rank>(Op, b.values(), b.extents(), mask, count));
  }
}

}  // namespace detail

// sum<Dims...>(x), sum<OutSpec, Dims...>(x), sum<Dims...>(out_spec, x), each with an optional
// trailing ts::keep_dims; and the same for mean, max and min. On a block inside ts::shard_map:
// sum<Dims...>(b) and sum<Dims...>(b, ts::keep_dims), over the block's own elements (local,
// no collective: follow with ts::psum<"x"> / ts::pmax<"x"> for the reduction over devices).
#define TYPESHARD_REDUCTION(name)                                                            \
  template <int... Dims, sharded_array_type A>                                               \
  auto name(const A& a,                                                                      \
            detail::source_site loc = detail::source_site::current()) {                      \
    const detail::call_site_scope site(loc);                                                 \
    return detail::reduce<reduction::name, auto_out, false, Dims...>(a);                     \
  }                                                                                          \
  template <int... Dims, sharded_array_type A>                                               \
  auto name(const A& a, keep_dims_t,                                                         \
            detail::source_site loc = detail::source_site::current()) {                      \
    const detail::call_site_scope site(loc);                                                 \
    return detail::reduce<reduction::name, auto_out, true, Dims...>(a);                      \
  }                                                                                          \
  template <spec_type OutSpec, int... Dims, sharded_array_type A>                            \
  auto name(const A& a,                                                                      \
            detail::source_site loc = detail::source_site::current()) {                      \
    const detail::call_site_scope site(loc);                                                 \
    return detail::reduce<reduction::name, OutSpec, false, Dims...>(a);                      \
  }                                                                                          \
  template <spec_type OutSpec, int... Dims, sharded_array_type A>                            \
  auto name(const A& a, keep_dims_t,                                                         \
            detail::source_site loc = detail::source_site::current()) {                      \
    const detail::call_site_scope site(loc);                                                 \
    return detail::reduce<reduction::name, OutSpec, true, Dims...>(a);                       \
  }                                                                                          \
  template <int... Dims, spec_type OutSpec, sharded_array_type A>                            \
  auto name(OutSpec, const A& a,                                                             \
            detail::source_site loc = detail::source_site::current()) {                      \
    const detail::call_site_scope site(loc);                                                 \
    return detail::reduce<reduction::name, OutSpec, false, Dims...>(a);                      \
  }                                                                                          \
  template <int... Dims, spec_type OutSpec, sharded_array_type A>                            \
  auto name(OutSpec, const A& a, keep_dims_t,                                                \
            detail::source_site loc = detail::source_site::current()) {                      \
    const detail::call_site_scope site(loc);                                                 \
    return detail::reduce<reduction::name, OutSpec, true, Dims...>(a);                       \
  }                                                                                          \
  template <int... Dims, block_type B>                                                       \
  auto name(const B& b) {                                                                    \
    return detail::reduce_block_local<reduction::name, false, Dims...>(b);                   \
  }                                                                                          \
  template <int... Dims, block_type B>                                                       \
  auto name(const B& b, keep_dims_t) {                                                       \
    return detail::reduce_block_local<reduction::name, true, Dims...>(b);                    \
  }
TYPESHARD_REDUCTION(sum)
TYPESHARD_REDUCTION(mean)
TYPESHARD_REDUCTION(max)
TYPESHARD_REDUCTION(min)
#undef TYPESHARD_REDUCTION

}  // namespace typeshard
