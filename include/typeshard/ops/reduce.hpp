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
#include "../core/rules/rule9_gradients.hpp"
#include "../array/detail/buffer.hpp"
#include "../kernels/functors.hpp"
#include "../plan/reduce_plan.hpp"
#include "detail/executor.hpp"
#include "detail/forward_value.hpp"
#include "detail/reduce_kernel.hpp"

namespace typeshard {

namespace detail {

// Runs a reduce plan on the blocks `in` of an array sharded by `in_spec` (extents `global`)
// on the devices of a mesh (`devices`, by mesh position, on backend `b`), the plan given as
// values: the one executor runs every step on each device, the local reduction (the step
// names its reduction and dimensions) and the collectives and slices after it, for the
// evenness of the kept extents. Sets `kept_global` (the `reduced` dimensions at extent 1).
// A template of the element type and rank only, whatever the plan and the mesh, so a
// program's reductions share it and typeshard::runtime compiles the common ones once.
// Kernels: the reductions it builds (executor.hpp's sum_kernels, extremum_kernels).
template <class T, std::size_t Rank, unsigned Kernels = reduction_kernels>
TYPESHARD_NOINLINE std::vector<buffer<T>> reduce_blocks_on(
    backend& b, std::span<const device_id> devices, const mesh_value& mv, reduction /*op*/,
    const std::array<bool, Rank>& reduced, const std::vector<buffer<T>>& in,
    const spec_array<Rank>& in_spec, const shape<Rank>& global, const spec_array<Rank>& local,
    const spec_array<Rank>& target, std::span<const step<Rank>> even_steps,
    std::span<const step<Rank>> uneven_steps, shape<Rank>& kept_global) {
  kept_global = global;
  for (std::size_t d = 0; d < Rank; ++d)
    if (reduced[d]) kept_global[d] = 1;
  const bool even = is_even(mv, local, kept_global) && is_even(mv, target, kept_global);
  const std::span<const step<Rank>> steps = even ? even_steps : uneven_steps;
  std::vector<buffer<T>> out(mv.size);
  b.run(devices, [&](std::size_t p) {
    out[p] = run_steps_on<T, Rank, Kernels>(b, mv, p, in[p].data(), global, in_spec, steps);
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
  // Header-only, the plan's own kernels only (sum and mean's, or max and min's); with the
  // separately compiled runtime, the instance it holds (every reduction's).
#if defined(TYPESHARD_SEPARATE_COMPILATION)
  constexpr unsigned kernels = reduction_kernels;
#else
  constexpr unsigned kernels = Plan::op == reduction::max || Plan::op == reduction::min
                                   ? extremum_kernels
                                   : sum_kernels;
#endif
  shape<Rank> kept_global{};
  std::vector<buffer<T>> out = reduce_blocks_on<T, Rank, kernels>(
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
    constexpr bool extremum = Op == reduction::max || Op == reduction::min;
    return result(b.context(), out,
                  local_reduce<T, Rank, !extremum, extremum>(Op, b.values(), b.extents(), mask,
                                                              count));
  }
}

// The reductions' rules on traced values (the forward through the plan above, the backward
// recorded): declared here, defined in ops/detail/traced_reduce.hpp, which ops/traced.hpp
// (where traced values come from) includes.
template <reduction Op, class OutSpec, bool KeepDims, int... Dims, class X>
auto traced_reduction(const X& x);

// Op over Dims of x (with OutSpec unless auto_out), by x's kind: a global array's plan run, a
// block's local reduction, a traced value's forward and recorded backward.
template <reduction Op, class OutSpec, bool KeepDims, int... Dims, class X>
auto reduce_any(const X& x, source_site loc) {
  if constexpr (block_like<X>) {
    (void)loc;
    return reduce_block_local<Op, KeepDims, Dims...>(x);
  } else if constexpr (is_traced_v<X>) {
    (void)loc;
    return traced_reduction<Op, OutSpec, KeepDims, Dims...>(x);
  } else {
    const call_site_scope site(loc);
    return reduce<Op, OutSpec, KeepDims, Dims...>(x);
  }
}

}  // namespace detail

// What a reduction takes: a global array, a value traced by ts::value_and_grad
// (global_operand), or (without an output spec) a block inside ts::shard_map.
template <class X>
concept reduction_operand = global_operand<X> || block_like<X>;

// sum<Dims...>(x), sum<OutSpec, Dims...>(x), sum<Dims...>(out_spec, x), each with an optional
// trailing ts::keep_dims; and the same for mean, max and min. One entry point per form for
// every operand kind (detail::reduce_any). On a block inside ts::shard_map: sum<Dims...>(b)
// and sum<Dims...>(b, ts::keep_dims), over the block's own elements (local, no collective:
// follow with ts::psum<"x"> / ts::pmax<"x"> for the reduction over devices). On a traced
// value: the array's forward; the backward broadcasts the cotangent back (sum, mean) or
// gives it to the extrema, ties sharing it (max, min); an output spec reshards after.
#define TYPESHARD_REDUCTION(name)                                                            \
  template <int... Dims, reduction_operand X>                                                \
  [[nodiscard]] auto name(const X& x,                                                        \
                          detail::source_site loc = detail::source_site::current()) {        \
    return detail::reduce_any<reduction::name, auto_out, false, Dims...>(x, loc);            \
  }                                                                                          \
  template <int... Dims, reduction_operand X>                                                \
  [[nodiscard]] auto name(const X& x, keep_dims_t,                                           \
                          detail::source_site loc = detail::source_site::current()) {        \
    return detail::reduce_any<reduction::name, auto_out, true, Dims...>(x, loc);             \
  }                                                                                          \
  template <spec_like OutSpec, int... Dims, global_operand X>                      \
  [[nodiscard]] auto name(const X& x,                                                        \
                          detail::source_site loc = detail::source_site::current()) {        \
    return detail::reduce_any<reduction::name, OutSpec, false, Dims...>(x, loc);             \
  }                                                                                          \
  template <spec_like OutSpec, int... Dims, global_operand X>                      \
  [[nodiscard]] auto name(const X& x, keep_dims_t,                                           \
                          detail::source_site loc = detail::source_site::current()) {        \
    return detail::reduce_any<reduction::name, OutSpec, true, Dims...>(x, loc);              \
  }                                                                                          \
  template <int... Dims, spec_like OutSpec, global_operand X>                      \
  [[nodiscard]] auto name(OutSpec, const X& x,                                               \
                          detail::source_site loc = detail::source_site::current()) {        \
    return detail::reduce_any<reduction::name, OutSpec, false, Dims...>(x, loc);             \
  }                                                                                          \
  template <int... Dims, spec_like OutSpec, global_operand X>                      \
  [[nodiscard]] auto name(OutSpec, const X& x, keep_dims_t,                                  \
                          detail::source_site loc = detail::source_site::current()) {        \
    return detail::reduce_any<reduction::name, OutSpec, true, Dims...>(x, loc);              \
  }
TYPESHARD_REDUCTION(sum)
TYPESHARD_REDUCTION(mean)
TYPESHARD_REDUCTION(max)
TYPESHARD_REDUCTION(min)
#undef TYPESHARD_REDUCTION

}  // namespace typeshard
