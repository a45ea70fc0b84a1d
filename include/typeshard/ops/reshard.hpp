// typeshard/ops/reshard.hpp: change an array's sharding, with the collectives chosen at compile
// time (JAX's jax.device_put(x, NamedSharding(mesh, P(...))) on a committed array, or
// with_sharding_constraint).
//
//   auto B = ts::reshard<ts::spec<ts::none, "x">>(A);     // A: spec<"x", none>: one all_to_all
//   auto C = ts::reshard<ts::spec<"x", ts::none>>(U);     // U unreduced over "x": psum_scatter
//   auto R = ts::reshard<ts::spec<ts::none, ts::none>>(U);// psum (all-reduce)
//   auto V = ts::psum<"x">(U);                            // reduce over "x" only, spec kept
//   auto M = ts::reshard<ts::spec<"x">>(A, other_mesh);   // onto a reordering of the devices
//   using plan = ts::reshard_plan_for<decltype(A), ts::spec<ts::none, "x">>;  // inspect it
//
// The plan (plan/reshard_plan.hpp) is computed at compile time; here it runs, through the
// one executor of plans (detail/executor.hpp): one multi-device operation in which every
// device walks the steps on its own block, each step writing a new block straight from the
// previous one (the collective is the only copy; a local slice is one copy of the kept part). A
// plan with no step returns an array sharing the input's shards. The input is never modified,
// unless it is about to die (a temporary, std::move(a)) and no other array shares its shards:
// an all-reduce then writes its result back into the input's blocks, which the result adopts.
//
// Unreduced inputs are reduced on the way (rule 3): psum if the target is replicated over
// the unreduced axis, psum_scatter if it shards a dimension over it. Sums run in rank
// order of the group, the same bits on every device.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backend/backend.hpp"
#include "../backend/detail/call_site.hpp"
#include "../array/detail/buffer.hpp"
#include "../core/detail/diagnose.hpp"
#include "../core/detail/unreduced_from.hpp"
#include "detail/executor.hpp"
#include "detail/move_blocks.hpp"
#include "../array/device_mesh.hpp"
#include "../core/errors.hpp"
#include "../plan/reshard_plan.hpp"
#include "../array/sharded_array.hpp"
#include "../core/unreduced.hpp"
#include "../core/rules/rule3_unreduced.hpp"

namespace typeshard {

// reshard_plan_for<Array, Spec>: the plan ts::reshard<Spec> runs on an Array.
template <class Array, spec_like Spec>
using reshard_plan_for =
    reshard_plan<typename Array::mesh_type, typename Array::spec, Spec,
                 typename Array::extents_type, typename Array::unreduced_type>;

namespace detail {

// Reshards `a` to Spec, leaving it unreduced over Keep only.
template <spec_like Spec, unreduced_like Keep, class T, class Mesh, class S, class E, class U>
auto reshard_keeping(const sharded_array<T, Mesh, S, E, U>& a) {
  using plan = reshard_plan<Mesh, S, Spec, E, U, Keep>;
  using result = sharded_array<T, Mesh, Spec, E, Keep>;
  if constexpr (!plan::valid) {
    return a;  // the plan's diagnostic fired; stop here so nothing cascades
  } else if constexpr (plan::even_steps.size() == 0 && plan::uneven_steps.size() == 0) {
    if constexpr (std::is_same_v<result, sharded_array<T, Mesh, S, E, U>>)
      return a;
    else
      return result(adopt_shards, a.device_mesh(), a.extents(), a.shared_shards());
  } else {
    return result(adopt_shards, a.device_mesh(), a.extents(), run_plan<plan>(a));
  }
}

// The same on an array about to die: a plan with steps runs on its blocks when no other array
// shares them (detail::run_plan), so an all-reduce writes back into them.
template <spec_like Spec, unreduced_like Keep, class T, class Mesh, class S, class E, class U>
auto reshard_keeping(sharded_array<T, Mesh, S, E, U>&& a) {
  using plan = reshard_plan<Mesh, S, Spec, E, U, Keep>;
  using result = sharded_array<T, Mesh, Spec, E, Keep>;
  if constexpr (!plan::valid || (plan::even_steps.size() == 0 && plan::uneven_steps.size() == 0))
    return reshard_keeping<Spec, Keep>(std::as_const(a));
  else
    return result(adopt_shards, a.device_mesh(), a.extents(), run_plan<plan>(std::move(a)));
}

// The first of Axes that U does not contain, or an empty name.
template <class U, axis_name... Axes>
constexpr axis_name first_not_in() {
  for (const axis_name& n : std::array<axis_name, sizeof...(Axes)>{Axes...})
    if (!U::contains(n)) return n;
  return {};
}

// unreduced_minus<U, Axes...>: U without Axes.
template <class U, axis_name... Axes>
struct unreduced_minus {
  static constexpr dim_spec compute() {
    dim_spec k;
    for (std::size_t i = 0; i < U::size; ++i)
      if (!((U::axes[i] == Axes) || ...)) k.axes[k.count++] = U::axes[i];
    return k;
  }
  static constexpr dim_spec kept = compute();
  using type = decltype(unreduced_from<kept>(std::make_index_sequence<kept.count>{}));
};

inline bool same_device_set(std::vector<device_id> a, std::vector<device_id> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

}  // namespace detail

// reshard<Spec>(a): the same values, sharded by Spec, fully reduced.
template <spec_like Spec, sharded_array_like A>
[[nodiscard]] auto reshard(const A& a, detail::source_site loc = detail::source_site::current()) {
  const detail::call_site_scope site(loc);
  return detail::reshard_keeping<Spec, unreduced<>>(a);
}

// reshard<Spec>(std::move(a)), or of a temporary: the same, and when no other array shares
// a's blocks an all-reduce writes its result back into them instead of into new blocks.
template <spec_like Spec, class A>
  requires(sharded_array_like<A> && !std::is_reference_v<A> && !std::is_const_v<A>)
[[nodiscard]] auto reshard(A&& a, detail::source_site loc = detail::source_site::current()) {
  const detail::call_site_scope site(loc);
  return detail::reshard_keeping<Spec, unreduced<>>(std::move(a));
}

// reshard<Spec>(a, target): the same values sharded by Spec on another device mesh of the
// same mesh type. Onto the same devices (of the same backend), in any order: the array is
// resharded where it is, then each block moves to the device that holds its position in
// the target (one permute). Onto another device set (JAX's device_put onto other devices):
// each target device gets the boxes it needs from the source blocks (ops/move.hpp's plan:
// copies in one process, messages between MPI ranks, which every rank of either mesh calls);
// between two backends across processes, through the host (to_host then device_put, which
// every process calls).
template <spec_like Spec, sharded_array_like A>
[[nodiscard]] auto reshard(const A& a, const device_mesh<typename A::mesh_type>& target,
                           detail::source_site loc = detail::source_site::current()) {
  const detail::call_site_scope site(loc);
  using Mesh = typename A::mesh_type;
  using T = typename A::value_type;
  constexpr std::size_t Rank = A::rank;
  const device_mesh<Mesh>& source = a.device_mesh();
  auto here = reshard<Spec>(a);
  using result = decltype(here);
  if (source == target) return here;
  if (&source.get_backend() != &target.get_backend() ||
      !detail::same_device_set(source.devices(), target.devices()))
    return detail::move_array<Spec>(here, target);
  {
    // Device source.devices()[p] holds position p's block; it must end up holding the
    // block of the target position q with target.devices()[q] == source.devices()[p].
    std::vector<std::size_t> target_pos(Mesh::size), source_pos(Mesh::size);
    for (std::size_t p = 0; p < Mesh::size; ++p)
      for (std::size_t q = 0; q < Mesh::size; ++q) {
        if (target.devices()[q] == source.devices()[p]) target_pos[p] = q;
        if (source.devices()[q] == target.devices()[p]) source_pos[p] = q;
      }
    std::vector<std::size_t> everyone(Mesh::size);
    for (std::size_t p = 0; p < Mesh::size; ++p) everyone[p] = p;
    std::vector<detail::buffer<T>> out(Mesh::size);
    backend& b = source.get_backend();
    detail::for_each_position(source, [&](std::size_t p) {
      const std::size_t q = target_pos[p];  // the target position this device holds
      detail::buffer<T> block(host_tensor<T, Rank>::element_count(here.local_shape(q)));
      const std::span<const T> mine = here.local_data(p);
      b.permute(collective_group{everyone, p, {}, "move to other devices"}, element_type_of<T>,
                mine.data(), mine.size(), source_pos[p], block.data(), block.size(), q);
      out[q] = std::move(block);
    });
    return result(adopt_shards, target, a.extents(), std::move(out));
  }
}

// psum<"x", ...>(a): reduces an array unreduced over "x" (and the other axes named) over
// those axes; the spec and the other unreduced axes stay.
template <axis_name... Axes, sharded_array_like A>
  requires(sizeof...(Axes) >= 1)
[[nodiscard]] auto psum(const A& a, detail::source_site loc = detail::source_site::current()) {
  const detail::call_site_scope site(loc);
  using U = typename A::unreduced_type;
  constexpr axis_name missing = detail::first_not_in<U, Axes...>();
  if constexpr (!missing.empty()) {
    static_assert(
        detail::require_named<false, missing, diagnostic::psum_over_reduced_axis>::value);
    return a;
  } else {
    return detail::reshard_keeping<typename A::spec,
                                   typename detail::unreduced_minus<U, Axes...>::type>(a);
  }
}

// device_put(a, target): the same array, with the same spec, on another device mesh of its
// mesh type (jax.device_put(x, NamedSharding(other_mesh, spec))): reshard<Spec>(a, target).
template <sharded_array_like A>
[[nodiscard]] auto device_put(const A& a, const device_mesh<typename A::mesh_type>& target,
                              detail::source_site loc = detail::source_site::current()) {
  return reshard<typename A::spec>(a, target, loc);
}

}  // namespace typeshard
