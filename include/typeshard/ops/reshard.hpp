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
// The plan (reshard_plan.hpp) is computed at compile time; here it runs: one multi-device
// operation in which every device walks the steps on its own block, each step writing a
// new block straight from the previous one (the collective is the only copy; a local slice
// is one copy of the kept part). A plan with no step returns an array sharing the input's
// shards. The input is never modified.
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
#include "../detail/buffer.hpp"
#include "detail/collective_calls.hpp"
#include "../array/detail/copy_box.hpp"
#include "../core/detail/diagnose.hpp"
#include "../core/detail/mesh_group.hpp"
#include "../core/detail/spec_layout.hpp"
#include "../array/device_mesh.hpp"
#include "../core/errors.hpp"
#include "../plan/reshard_plan.hpp"
#include "../array/sharded_array.hpp"
#include "../core/unreduced.hpp"

namespace typeshard {

namespace diagnostic {

template <char... Axis>
struct psum_over_reduced_axis {
  static constexpr bool fire() {
    static_assert(detail::always_false_chars<Axis...>,
                  "typeshard: rule 3 (unreduced): ts::psum<\"axis\">(array) over an axis the "
                  "array is not unreduced over (it would multiply the value by the axis size); "
                  "fix: psum only the axes of the array's unreduced<...>, or use ts::psum "
                  "inside ts::shard_map for per-device sums");
    return true;
  }
};

}  // namespace diagnostic

// reshard_plan_for<Array, Spec>: the plan ts::reshard<Spec> runs on an Array.
template <class Array, spec_type Spec>
using reshard_plan_for =
    reshard_plan<typename Array::mesh_type, typename Array::spec, Spec,
                 typename Array::extents_type, typename Array::unreduced_type>;

namespace detail {

template <class Mesh, std::size_t Rank>
std::vector<std::size_t> member_extents(const mesh_group<Mesh>& g, const spec_array<Rank>& s,
                                        const shape<Rank>& global, std::size_t d) {
  std::vector<std::size_t> out(g.size);
  for (std::size_t r = 0; r < g.size; ++r)
    out[r] = local_shape_of<Mesh>(s, global, g.members[r])[d];
  return out;
}

// Runs `steps` on the block of mesh position p (shape from `from`), returning p's new block.
// One instantiation per (T, Mesh, Rank): the steps are values.
template <class T, class Mesh, std::size_t Rank>
buffer<T> run_steps_on(backend& b, std::size_t p, const T* in, const shape<Rank>& global,
                       const spec_array<Rank>& from, std::span<const reshard_step<Rank>> steps) {
  buffer<T> owned;
  const T* cur = in;
  spec_array<Rank> cur_spec = from;
  shape<Rank> cur_shape = local_shape_of<Mesh>(from, global, p);
  for (const reshard_step<Rank>& step : steps) {
    const shape<Rank> next_shape = local_shape_of<Mesh>(step.spec_after, global, p);
    buffer<T> next(host_tensor<T, Rank>::element_count(next_shape));
    const mesh_group<Mesh> g = group_of<Mesh>(step.axes, p);
    switch (step.kind) {
      case reshard_step_kind::all_reduce:
        b.all_reduce(backend_group(g), element_type_of<T>, reduce_op::sum, cur, next.data(),
                     next.size());
        break;
      case reshard_step_kind::reduce_scatter: {
        const auto extents = member_extents(g, step.spec_after, global, step.dim);
        scatter_along(b, backend_group(g), reduce_op::sum, cur, cur_shape, step.dim,
                      std::span<const std::size_t>(extents), next.data());
        break;
      }
      case reshard_step_kind::all_gather: {
        const auto extents = member_extents(g, cur_spec, global, step.dim);
        gather_along(b, backend_group(g), cur, cur_shape, step.dim,
                     std::span<const std::size_t>(extents), next.data());
        break;
      }
      case reshard_step_kind::all_to_all:
        // Even shards only (the plan uses all_to_all only then): split along the
        // dimension the axis joins, concatenate along the one it leaves.
        all_to_all_along(b, backend_group(g), cur, cur_shape, step.to_dim, step.dim, next.data());
        break;
      case reshard_step_kind::slice: {
        const index_slices<Rank> have = index_of<Mesh>(cur_spec, global, p);
        const index_slices<Rank> want = index_of<Mesh>(step.spec_after, global, p);
        shape<Rank> origin{};
        for (std::size_t d = 0; d < Rank; ++d) origin[d] = want[d].start - have[d].start;
        copy_box(cur, cur_shape, origin, next.data(), next_shape, shape<Rank>{}, next_shape);
        break;
      }
    }
    owned = std::move(next);
    cur = owned.data();
    cur_spec = step.spec_after;
    cur_shape = next_shape;
  }
  return owned;
}

// Runs a plan on every device of the array's mesh; returns the new blocks, by position.
// Not a template of the plan (its steps arrive as values), so a program with many
// reshards instantiates this once per element type, mesh and rank.
template <class T, class Mesh, std::size_t Rank>
std::vector<buffer<T>> run_plan(const device_mesh<Mesh>& m, const shape<Rank>& global,
                                const std::vector<std::span<const T>>& blocks,
                                const spec_array<Rank>& from, const spec_array<Rank>& to,
                                std::span<const reshard_step<Rank>> even_steps,
                                std::span<const reshard_step<Rank>> uneven_steps) {
  const bool even = is_even<Mesh>(from, global) && is_even<Mesh>(to, global);
  const std::span<const reshard_step<Rank>> steps = even ? even_steps : uneven_steps;
  std::vector<buffer<T>> out(Mesh::size);
  backend& b = m.get_backend();
  for_each_position(m, [&](std::size_t p) {
    out[p] = run_steps_on<T, Mesh, Rank>(b, p, blocks[p].data(), global, from, steps);
  });
  return out;
}

template <class Plan, class T, class Mesh, class Spec, class Extents, class U>
std::vector<buffer<T>> run_plan(const sharded_array<T, Mesh, Spec, Extents, U>& a) {
  constexpr std::size_t Rank = Extents::rank;
  std::vector<std::span<const T>> blocks(Mesh::size);
  for (std::size_t p = 0; p < Mesh::size; ++p) blocks[p] = a.local_data(p);
  // With static extents the plan already chose; the run-time check then agrees with it.
  return run_plan<T, Mesh, Rank>(a.device_mesh(), a.extents(), blocks,
                                 spec_array_of<typename Plan::from_spec, Rank>(),
                                 spec_array_of<typename Plan::to_spec, Rank>(),
                                 std::span<const reshard_step<Rank>>(Plan::even_steps),
                                 std::span<const reshard_step<Rank>>(Plan::uneven_steps));
}

// Reshards `a` to Spec, leaving it unreduced over Keep only.
template <spec_type Spec, unreduced_type Keep, class T, class Mesh, class S, class E, class U>
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
  struct kept {
    std::array<axis_name, U::size + 1> names{};
    std::size_t count = 0;
  };
  static constexpr kept compute() {
    kept k;
    for (std::size_t i = 0; i < U::size; ++i)
      if (!((U::axes[i] == Axes) || ...)) k.names[k.count++] = U::axes[i];
    return k;
  }
  static constexpr kept k = compute();
  template <std::size_t... I>
  static unreduced<k.names[I]...> make(std::index_sequence<I...>);
  using type = decltype(make(std::make_index_sequence<k.count>{}));
};

inline bool same_device_set(std::vector<device_id> a, std::vector<device_id> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

}  // namespace detail

// reshard<Spec>(a): the same values, sharded by Spec, fully reduced.
template <spec_type Spec, sharded_array_type A>
auto reshard(const A& a) {
  return detail::reshard_keeping<Spec, unreduced<>>(a);
}

// reshard<Spec>(a, target): the same values sharded by Spec on another device mesh of the
// same mesh type. The target must use the same devices (of the same backend), in any
// order: the array is resharded where it is, then each block moves to the device that
// holds its position in the target (one permute). Different device sets are an error, as
// in JAX (seed 002): move data between device sets with to_host and device_put.
template <spec_type Spec, sharded_array_type A>
auto reshard(const A& a, const device_mesh<typename A::mesh_type>& target) {
  using Mesh = typename A::mesh_type;
  using T = typename A::value_type;
  constexpr std::size_t Rank = A::rank;
  const device_mesh<Mesh>& source = a.device_mesh();
  if (&source.get_backend() != &target.get_backend() ||
      !detail::same_device_set(source.devices(), target.devices()))
    throw device_mesh_error(
        "typeshard: reshard: cannot move an array between device meshes with different "
        "devices: it lives on " + source.to_string() + ", the target is " + target.to_string() +
        "; reshard only onto a reordering of the same devices (or go through to_host and "
        "device_put)");
  auto here = reshard<Spec>(a);
  using result = decltype(here);
  if (source == target) return here;
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
      b.permute(collective_group{everyone, p}, element_type_of<T>, mine.data(), mine.size(),
                source_pos[p], block.data(), block.size(), q);
      out[q] = std::move(block);
    });
    return result(adopt_shards, target, a.extents(), std::move(out));
  }
}

// psum<"x", ...>(a): reduces an array unreduced over "x" (and the other axes named) over
// those axes; the spec and the other unreduced axes stay.
template <axis_name... Axes, sharded_array_type A>
  requires(sizeof...(Axes) >= 1)
auto psum(const A& a) {
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

}  // namespace typeshard
