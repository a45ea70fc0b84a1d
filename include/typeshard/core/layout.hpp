// typeshard/core/layout.hpp: where each shard of an array lives (JAX's NamedSharding arithmetic).
//
// layout<Mesh, Spec, Rank> answers, for every mesh position (a device's row-major place in
// the mesh), which index slices of the global array it holds, their local extents, and
// which positions hold the same slices (replica groups). Pure arithmetic: usable at
// compile time, no devices involved.
//
// Uneven extents follow JAX and PyTorch's DTensor (torch.chunk): a dimension of extent n
// split into k shards has blocks of ceil(n / k); shard i holds [i*b, min((i+1)*b, n)), so
// the trailing shards are smaller and may be empty. Every element is held by exactly one
// shard per replica group, never two, never none; tests check that against brute force.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "config.hpp"
#include "detail/message.hpp"
#include "detail/mesh_value.hpp"
#include "mesh.hpp"
#include "spec.hpp"

namespace typeshard {

// slice: the half-open index range [start, stop) of one dimension, JAX's slice(start, stop).
struct slice {
  std::size_t start = 0;
  std::size_t stop = 0;

  constexpr std::size_t size() const { return stop - start; }
  friend constexpr bool operator==(const slice&, const slice&) = default;

  // "slice(0, 4096, None)", as Python prints it.
  std::string to_string() const {
    return "slice(" + std::to_string(start) + ", " + std::to_string(stop) + ", None)";
  }
};

template <std::size_t Rank>
using index_slices = std::array<slice, Rank>;

template <std::size_t Rank>
using shape = std::array<std::size_t, Rank>;

// "(slice(0, 2, None), slice(0, 4, None))", as JAX prints a shard's index.
template <std::size_t Rank>
std::string to_string(const index_slices<Rank>& index) {
  std::string out = "(";
  for (std::size_t d = 0; d < Rank; ++d) {
    if (d) out += ", ";
    out += index[d].to_string();
  }
  if (Rank == 1) out += ",";
  return out + ")";
}

namespace detail {
// A function of the values only (one copy per TU, not per rank): shapes are printed in
// error messages, which every operation builds on its failure paths.
TYPESHARD_COLD inline std::string shape_string(std::span<const std::size_t> s) {
  std::string out = "(";
  for (std::size_t d = 0; d < s.size(); ++d) {
    if (d) out += ", ";
    append_integer(out, s[d]);
  }
  out += s.size() == 1 ? ",)" : ")";
  return out;
}
}  // namespace detail

// "(4096, 4096)", as numpy prints a shape.
template <std::size_t Rank>
std::string to_string(const shape<Rank>& s) {
  return detail::shape_string(s);
}

#if defined(TYPESHARD_SEPARATE_COMPILATION)
// With the separately compiled runtime (core/config.hpp), compiled once in typeshard::runtime.
#define TYPESHARD_SHAPE_STRING_INSTANCE(prefix, R)                                             \
  prefix std::string to_string<R>(const index_slices<R>&);                                     \
  prefix std::string to_string<R>(const shape<R>&);
TYPESHARD_FOR_RUNTIME_RANKS(TYPESHARD_SHAPE_STRING_INSTANCE, extern template)
#endif

// The extent of one shard when `extent` is split into `shards`: ceil(extent / shards).
constexpr std::size_t shard_extent(std::size_t extent, std::size_t shards) {
  return shards == 0 ? extent : (extent + shards - 1) / shards;
}

// The k-th shard's slice of a dimension of `extent` split into `shards` (the trailing
// shards may be short or empty).
constexpr slice shard_slice(std::size_t extent, std::size_t shards, std::size_t k) {
  const std::size_t b = shard_extent(extent, shards);
  const std::size_t start = k * b < extent ? k * b : extent;
  const std::size_t stop = start + b < extent ? start + b : extent;
  return {start, stop};
}

namespace detail {

// ---- the layout core: the arithmetic of a spec held as a value ----------------------------
// A spec value is a std::array<dim_spec, Rank> (a type's entries via spec_array_of, or an
// intermediate sharding of a plan). layout<> below, the planners, the executors and the
// groups of collectives (detail/mesh_group.hpp) all call these; none repeats them.

template <std::size_t Rank>
using spec_array = std::array<dim_spec, Rank>;

// The entries of Spec, padded with none to Rank.
template <class Spec, std::size_t Rank>
constexpr spec_array<Rank> spec_array_of() {
  spec_array<Rank> out{};
  for (std::size_t d = 0; d < Rank; ++d) out[d] = Spec::dim(d);
  return out;
}

// Number of shards of a dimension whose entry is `ds`: the product of its axes' sizes. On a
// mesh held as a value (core/detail/mesh_value.hpp): the executor runs one instantiation for
// every mesh of a program, and the typed forms below forward here, so that the arithmetic is
// written once.
TYPESHARD_NOINLINE constexpr std::size_t shards_of(const mesh_value& m, const dim_spec& ds) {
  std::size_t n = 1;
  for (std::size_t a = 0; a < ds.count; ++a) n *= m.size_of(ds.axes[a]);
  return n;
}

// Which of those shards the device at `position` holds: its coordinates on the entry's
// axes read as a mixed-radix number, the first axis major, as in P(('x', 'y')). (An axis
// the mesh does not have counts for nothing; rule 1 has rejected it already.)
TYPESHARD_NOINLINE constexpr std::size_t shard_of(const mesh_value& m, const dim_spec& ds,
                                                  std::size_t position) {
  std::size_t k = 0;
  for (std::size_t a = 0; a < ds.count; ++a) {
    const std::size_t i = m.index_of(ds.axes[a]);
    if (i < m.rank()) k = k * m.axes[i].size + m.coordinate(position, i);
  }
  return k;
}

// The global index slices held by the device at `position`.
template <std::size_t Rank>
TYPESHARD_NOINLINE constexpr index_slices<Rank> index_of(const mesh_value& m,
                                                         const spec_array<Rank>& s,
                                                         const shape<Rank>& global,
                                                         std::size_t position) {
  index_slices<Rank> out{};
  for (std::size_t d = 0; d < Rank; ++d)
    out[d] = shard_slice(global[d], shards_of(m, s[d]), shard_of(m, s[d], position));
  return out;
}

// Its local extents.
template <std::size_t Rank>
constexpr shape<Rank> local_shape_of(const mesh_value& m, const spec_array<Rank>& s,
                                     const shape<Rank>& global, std::size_t position) {
  const index_slices<Rank> ix = index_of(m, s, global, position);
  shape<Rank> out{};
  for (std::size_t d = 0; d < Rank; ++d) out[d] = ix[d].size();
  return out;
}

// The largest local extents (the block size).
template <std::size_t Rank>
constexpr shape<Rank> block_shape_of(const mesh_value& m, const spec_array<Rank>& s,
                                     const shape<Rank>& global) {
  shape<Rank> out{};
  for (std::size_t d = 0; d < Rank; ++d) out[d] = shard_extent(global[d], shards_of(m, s[d]));
  return out;
}

// Whether every dimension divides evenly among its shards.
template <std::size_t Rank>
constexpr bool is_even(const mesh_value& m, const spec_array<Rank>& s, const shape<Rank>& global) {
  for (std::size_t d = 0; d < Rank; ++d)
    if (global[d] % shards_of(m, s[d]) != 0) return false;
  return true;
}

// The replica index of `position`: its coordinates on the mesh axes the spec does not use,
// row-major; 0 for the primary copy of its slices (layout::replica_index).
TYPESHARD_NOINLINE constexpr std::size_t replica_index_of(const mesh_value& m,
                                                          std::span<const dim_spec> spec,
                                                          std::size_t position) {
  std::size_t r = 0;
  for (std::size_t i = 0; i < m.rank(); ++i) {
    bool used = false;
    for (const dim_spec& ds : spec) used = used || ds.uses(m.axes[i].name);
    if (!used) r = r * m.axes[i].size + m.coordinate(position, i);
  }
  return r;
}

// The same on a mesh type (the plans' and layout<>'s form).
template <class Mesh>
constexpr std::size_t shards_of(const dim_spec& ds) {
  return shards_of(mesh_value_of<Mesh>(), ds);
}
template <class Mesh>
constexpr std::size_t shard_of(const dim_spec& ds, std::size_t position) {
  return shard_of(mesh_value_of<Mesh>(), ds, position);
}
template <class Mesh, std::size_t Rank>
constexpr index_slices<Rank> index_of(const spec_array<Rank>& s, const shape<Rank>& global,
                                      std::size_t position) {
  return index_of(mesh_value_of<Mesh>(), s, global, position);
}
template <class Mesh, std::size_t Rank>
constexpr shape<Rank> local_shape_of(const spec_array<Rank>& s, const shape<Rank>& global,
                                     std::size_t position) {
  return local_shape_of(mesh_value_of<Mesh>(), s, global, position);
}
template <class Mesh, std::size_t Rank>
constexpr shape<Rank> block_shape_of(const spec_array<Rank>& s, const shape<Rank>& global) {
  return block_shape_of(mesh_value_of<Mesh>(), s, global);
}
template <class Mesh, std::size_t Rank>
constexpr bool is_even(const spec_array<Rank>& s, const shape<Rank>& global) {
  return is_even(mesh_value_of<Mesh>(), s, global);
}

}  // namespace detail

template <mesh_like Mesh, spec_like Spec, std::size_t Rank>
struct layout {
  using mesh_type = Mesh;
  using spec_type = typename detail::padded_spec<Spec, Rank>::type;
  static constexpr std::size_t rank = Rank;
  using coordinates_type = std::array<std::size_t, Mesh::rank>;

  // The spec's entries as a value, for the layout core (detail:: above).
  static constexpr detail::spec_array<Rank> entries = detail::spec_array_of<spec_type, Rank>();

  // Number of shards along dimension d: the product of its axes' sizes.
  static constexpr std::size_t shards_along(std::size_t d) {
    return detail::shards_of<Mesh>(entries[d]);
  }

  // Which of those shards the device at `position` holds (its axes' coordinates read as a
  // mixed-radix number, the first axis major, as in P(('x', 'y'))).
  static constexpr std::size_t shard_along(std::size_t d, std::size_t position) {
    return detail::shard_of<Mesh>(entries[d], position);
  }

  // Number of distinct shards, and how many devices hold each.
  static constexpr std::size_t distinct_shards() {
    std::size_t n = 1;
    for (std::size_t d = 0; d < Rank; ++d) n *= shards_along(d);
    return n;
  }
  static constexpr std::size_t replication() { return Mesh::size / distinct_shards(); }

  // Whether the mesh axis at index i shards some dimension (else the data is replicated
  // along it).
  static constexpr bool axis_is_used(std::size_t i) { return spec_type::uses(Mesh::axes[i].name); }

  // The global index slices held by the device at `position`, its local extents, the
  // largest local extents (the block size, equal on every device when even), and whether
  // every dimension divides evenly among its shards.
  static constexpr index_slices<Rank> index(const shape<Rank>& global, std::size_t position) {
    return detail::index_of<Mesh>(entries, global, position);
  }
  static constexpr shape<Rank> local_shape(const shape<Rank>& global, std::size_t position) {
    return detail::local_shape_of<Mesh>(entries, global, position);
  }
  static constexpr shape<Rank> block_shape(const shape<Rank>& global) {
    return detail::block_shape_of<Mesh>(entries, global);
  }
  static constexpr bool is_even(const shape<Rank>& global) {
    return detail::is_even<Mesh>(entries, global);
  }

  // Devices holding the same slices form a replica group: they share every coordinate
  // of the axes the spec uses. replica_index numbers a device within its group (by its
  // coordinates on the unused axes, row-major); the device with replica_index 0 is the
  // group's primary.
  static constexpr std::size_t replica_index(std::size_t position) {
    return detail::replica_index_of(detail::mesh_value_of<Mesh>(), entries, position);
  }
  static constexpr bool is_primary(std::size_t position) { return replica_index(position) == 0; }

  // The mesh positions of each replica group, groups ordered by their primary's position.
  static std::vector<std::vector<std::size_t>> replica_groups() {
    std::vector<std::vector<std::size_t>> groups;
    for (std::size_t p = 0; p < Mesh::size; ++p) {
      if (!is_primary(p)) continue;
      std::vector<std::size_t> group;
      for (std::size_t q = 0; q < Mesh::size; ++q)
        if (same_shard(p, q)) group.push_back(q);
      groups.push_back(std::move(group));
    }
    return groups;
  }

  // Whether the devices at positions p and q hold the same slices.
  static constexpr bool same_shard(std::size_t p, std::size_t q) {
    const coordinates_type a = Mesh::coordinates(p);
    const coordinates_type b = Mesh::coordinates(q);
    for (std::size_t i = 0; i < Mesh::rank; ++i)
      if (axis_is_used(i) && a[i] != b[i]) return false;
    return true;
  }
};

}  // namespace typeshard
