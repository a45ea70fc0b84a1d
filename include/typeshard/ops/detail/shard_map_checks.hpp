// typeshard/ops/detail/shard_map_checks.hpp: a shard_map call's arguments and results checked
// against its in and out specs: at compile time (the mesh, rule 1, rule 6's static extents,
// the number of arguments and results, rule 4's claimed replication), one diagnostic per
// mistake; at run time the dynamic extents (even blocks) and the arguments' devices.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../../array/block.hpp"
#include "../../array/device_mesh.hpp"
#include "../../core/config.hpp"
#include "../../core/detail/diagnose.hpp"
#include "../../core/detail/mesh_value.hpp"
#include "../../core/errors.hpp"
#include "../../core/layout.hpp"
#include "../../core/mesh.hpp"
#include "../../core/rules/rule4_shard_map.hpp"
#include "../../core/rules/rule6_extents.hpp"
#include "../../core/spec.hpp"

namespace typeshard {

template <spec_like... S>
struct specs;  // ops/shard_map.hpp

namespace detail {

template <class S>
struct as_specs {
  using type = specs<S>;
};
template <spec_like... S>
struct as_specs<specs<S...>> {
  using type = specs<S...>;
};

template <class T>
inline constexpr bool is_specs_v = false;
template <spec_like... S>
inline constexpr bool is_specs_v<specs<S...>> = true;

template <std::size_t I, class Specs>
struct spec_element;
template <std::size_t I, spec_like... S>
struct spec_element<I, specs<S...>> {
  using type = std::tuple_element_t<I, std::tuple<S...>>;
};

// The first mesh axis the block varies over that Spec does not shard over, or "".
template <class Mesh, class Spec, std::uint64_t Varying>
constexpr axis_name first_unclaimed_axis() {
  for (std::size_t i = 0; i < Mesh::rank; ++i)
    if (((Varying >> i) & 1) && !Spec::uses(Mesh::axes[i].name)) return Mesh::axes[i].name;
  return {};
}

// The first static extent of E that does not divide by Spec's shards, as {dim, extent,
// shards}, or dim == Rank.
template <class Mesh, class Spec, class E>
constexpr std::array<std::size_t, 3> first_uneven_static_extent() {
  for (std::size_t d = 0; d < E::rank; ++d) {
    const std::size_t shards = layout<Mesh, Spec, E::rank>::shards_along(d);
    if (E::is_static(d) && E::static_extents[d] % shards != 0)
      return {d, E::static_extents[d], shards};
  }
  return {E::rank, 0, 0};
}

// Checks one argument against its in spec; one diagnostic, false, on the first problem.
template <class Mesh, class Spec, class A>
constexpr bool check_argument() {
  using arr = std::remove_cvref_t<A>;
  if constexpr (!std::is_same_v<typename arr::mesh_type, Mesh>) {
    return require<false,
                   diagnostic::shard_map_mesh_differs<Mesh, typename arr::mesh_type>>::value &&
           false;
  } else if constexpr (!check_spec<Mesh, Spec, arr::rank>()) {
    return false;
  } else {
    constexpr auto bad = first_uneven_static_extent<Mesh, Spec, typename arr::extents_type>();
    if constexpr (bad[0] != arr::rank) {
      return require<false,
                     diagnostic::static_extent_not_divisible<bad[0], bad[1], bad[2]>>::value &&
             false;
    } else {
      return true;
    }
  }
}

template <class Mesh, class InSpecs, class... A, std::size_t... I>
constexpr bool check_arguments(std::index_sequence<I...>) {
  if constexpr (InSpecs::size != sizeof...(A)) {
    return require<false,
                   diagnostic::shard_map_argument_count<InSpecs::size, sizeof...(A)>>::value &&
           false;
  } else {
    bool ok = true;
    // Stop at the first bad argument so only one diagnostic fires.
    ((ok = ok && check_argument<Mesh, typename spec_element<I, InSpecs>::type, A>()), ...);
    return ok;
  }
}

// check_even_blocks on values: one copy per TU, whatever the meshes and specs.
[[noreturn]] TYPESHARD_COLD inline void throw_uneven_block(const mesh_value& m,
                                                         const dim_spec& ds,
                                                         std::size_t argument, std::size_t d,
                                                         std::size_t extent,
                                                         std::size_t shards) {
  std::string axes;
  for (std::size_t i = 0; i < ds.count; ++i)
    axes += (i ? " x '" : "'") + std::string(ds.axes[i].view()) + "' (" +
            std::to_string(m.size_of(ds.axes[i])) + ")";
  throw shape_error("typeshard: shard_map: argument " + std::to_string(argument) +
                    ", dimension " + std::to_string(d) + " has extent " +
                    std::to_string(extent) + ", not divisible by its " +
                    std::to_string(shards) + " shards over " + axes +
                    "; shard_map needs even blocks (as JAX): use a multiple of " +
                    std::to_string(shards) + " or shard that dimension less");
}
TYPESHARD_NOINLINE inline void check_even_blocks_on(const mesh_value& m,
                                                    std::span<const dim_spec> spec,
                                                    std::span<const std::size_t> extents,
                                                    std::size_t argument) {
  for (std::size_t d = 0; d < extents.size(); ++d) {
    const std::size_t shards = shards_of(m, spec[d]);
    if (extents[d] % shards != 0)
      throw_uneven_block(m, spec[d], argument, d, extents[d], shards);
  }
}

template <class Spec, class A>
void check_even_blocks(const A& a, std::size_t argument) {
  check_even_blocks_on(mesh_value_of<typename A::mesh_type>(),
                       layout<typename A::mesh_type, Spec, A::rank>::entries, a.extents(),
                       argument);
}

// An argument on other devices than argument 0's, out of line: one copy per mesh type, not a
// message built for every argument of every shard_mapped call.
template <class Mesh>
[[noreturn]] TYPESHARD_COLD void throw_argument_on_other_devices(std::size_t argument,
                                                                 const device_mesh<Mesh>& got,
                                                                 const device_mesh<Mesh>& first) {
  throw device_mesh_error("typeshard: shard_map: argument " + std::to_string(argument) +
                          " lives on " + got.to_string() + " but argument 0 on " +
                          first.to_string() + "; put every argument on the same devices");
}

template <class R>
struct result_blocks {
  static constexpr bool valid = is_block_v<R>;
  using tuple = std::tuple<R>;
};
template <class... R>
struct result_blocks<std::tuple<R...>> {
  static constexpr bool valid = (is_block_v<R> && ...);
  using tuple = std::tuple<R...>;
};

// Checks f's result against the out specs: blocks of the mesh, one per out spec, valid
// specs (rule 1), and rule 4.
template <class Mesh, class OutSpecs, class R, std::size_t I>
constexpr bool check_output() {
  using b = std::tuple_element_t<I, typename result_blocks<R>::tuple>;
  using S = typename spec_element<I, OutSpecs>::type;
  if constexpr (!std::is_same_v<typename b::mesh_type, Mesh>) {
    return require<false, diagnostic::shard_map_result_not_blocks<R>>::value && false;
  } else if constexpr (!check_spec<Mesh, S, b::rank>()) {
    return false;
  } else {
    constexpr axis_name unclaimed =
        first_unclaimed_axis<Mesh, typename padded_spec<S, b::rank>::type, b::varying>();
    return require_named<unclaimed.empty(), unclaimed,
                         diagnostic::out_spec_claims_replication>::value &&
           unclaimed.empty();
  }
}

template <class Mesh, class OutSpecs, class R, std::size_t... I>
constexpr bool check_outputs(std::index_sequence<I...>) {
  if constexpr (!result_blocks<R>::valid ||
                std::tuple_size_v<typename result_blocks<R>::tuple> != OutSpecs::size) {
    return require<false, diagnostic::shard_map_result_not_blocks<R>>::value && false;
  } else {
    bool ok = true;
    ((ok = ok && check_output<Mesh, OutSpecs, R, I>()), ...);
    return ok;
  }
}

}  // namespace detail
}  // namespace typeshard
