// typeshard/core/detail/spec_layout.hpp: layout arithmetic for a spec held as a value.
// Internal: do not rely on anything in detail/.
//
// layout<Mesh, Spec, Rank> takes the spec as a type. A reshard plan passes through
// intermediate shardings that are values (the sharding after each step), so the same
// arithmetic is needed on a std::array<dim_spec, Rank>; one executor then serves every
// pair of specs instead of one instantiation per pair.
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "../layout.hpp"
#include "../mesh.hpp"
#include "../spec.hpp"

namespace typeshard::detail {

template <std::size_t Rank>
using spec_array = std::array<dim_spec, Rank>;

// The entries of Spec, padded with none to Rank.
template <class Spec, std::size_t Rank>
constexpr spec_array<Rank> spec_array_of() {
  spec_array<Rank> out{};
  for (std::size_t d = 0; d < Rank; ++d) out[d] = Spec::dim(d);
  return out;
}

template <class Mesh>
constexpr std::size_t shards_of(const dim_spec& ds) {
  std::size_t n = 1;
  for (std::size_t a = 0; a < ds.count; ++a) n *= Mesh::size_of(ds.axes[a]);
  return n;
}

// Which shard of dimension entry `ds` the device at `position` holds (first axis major).
template <class Mesh>
constexpr std::size_t shard_of(const dim_spec& ds, std::size_t position) {
  const auto c = Mesh::coordinates(position);
  std::size_t k = 0;
  for (std::size_t a = 0; a < ds.count; ++a) {
    const std::size_t i = Mesh::index_of(ds.axes[a]);
    k = k * Mesh::shape[i] + c[i];
  }
  return k;
}

template <class Mesh, std::size_t Rank>
constexpr index_slices<Rank> index_of(const spec_array<Rank>& s, const shape<Rank>& global,
                                      std::size_t position) {
  index_slices<Rank> out{};
  for (std::size_t d = 0; d < Rank; ++d)
    out[d] = block_slice(global[d], shards_of<Mesh>(s[d]), shard_of<Mesh>(s[d], position));
  return out;
}

template <class Mesh, std::size_t Rank>
constexpr shape<Rank> local_shape_of(const spec_array<Rank>& s, const shape<Rank>& global,
                                     std::size_t position) {
  const index_slices<Rank> ix = index_of<Mesh>(s, global, position);
  shape<Rank> out{};
  for (std::size_t d = 0; d < Rank; ++d) out[d] = ix[d].size();
  return out;
}

template <class Mesh, std::size_t Rank>
constexpr bool is_even(const spec_array<Rank>& s, const shape<Rank>& global) {
  for (std::size_t d = 0; d < Rank; ++d)
    if (global[d] % shards_of<Mesh>(s[d]) != 0) return false;
  return true;
}

// Whether `prefix` lists the first axes of `full`, in order.
constexpr bool is_prefix(const dim_spec& prefix, const dim_spec& full) {
  if (prefix.count > full.count) return false;
  for (std::size_t a = 0; a < prefix.count; ++a)
    if (!(prefix.axes[a] == full.axes[a])) return false;
  return true;
}

inline std::string axes_string(const dim_spec& d) {
  if (d.count == 0) return "None";
  if (d.count == 1) return "'" + std::string(d.axes[0].view()) + "'";
  std::string out = "(";
  for (std::size_t a = 0; a < d.count; ++a) {
    if (a) out += ", ";
    out += "'" + std::string(d.axes[a].view()) + "'";
  }
  return out + ")";
}

// "PartitionSpec('x', None)", as spec<...>::to_string prints the same spec.
template <std::size_t Rank>
std::string spec_string(const spec_array<Rank>& s) {
  std::string out = "PartitionSpec(";
  for (std::size_t d = 0; d < Rank; ++d) {
    if (d) out += ", ";
    out += axes_string(s[d]);
  }
  if (Rank == 1) out += ",";
  return out + ")";
}

}  // namespace typeshard::detail
