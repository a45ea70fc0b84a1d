// typeshard/core/detail/mesh_group.hpp: the devices a collective over some mesh axes runs over.
// Internal: do not rely on anything in detail/.
//
// A collective over axes A, called on the device at mesh position p, runs over the
// positions that share every coordinate of p except those of A: the group. Members are
// ordered by their coordinates on A read as a mixed-radix number, the first axis of A
// major, as JAX orders a multi-axis collective (and as a spec entry ts::axes("x", "y")
// numbers its shards). Pure arithmetic, usable at compile time.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "../layout.hpp"
#include "../mesh.hpp"
#include "../spec.hpp"
#include "mesh_value.hpp"

namespace typeshard::detail {

// group_axes: a list of mesh axes, major first, held in a dim_spec (at most 4).
using group_axes = dim_spec;

// Number of devices in every group over `axes`, and the rank of position p in its group:
// the number of shards and the shard of a spec entry over the same axes (the layout core).
template <class Mesh>
constexpr std::size_t group_size(const group_axes& axes) {
  return shards_of<Mesh>(axes);
}
template <class Mesh>
constexpr std::size_t group_rank(const group_axes& axes, std::size_t position) {
  return shard_of<Mesh>(axes, position);
}

// The position of member `rank` of the group over `axes` that contains position p.
template <class Mesh>
constexpr std::size_t group_member(const group_axes& axes, std::size_t position,
                                   std::size_t rank) {
  auto c = Mesh::coordinates(position);
  for (std::size_t a = axes.count; a-- > 0;) {
    const std::size_t i = Mesh::index_of(axes.axes[a]);
    c[i] = rank % Mesh::shape[i];
    rank /= Mesh::shape[i];
  }
  return Mesh::position(c);
}

// mesh_group: the members (mesh positions, in rank order), the caller's rank, and the axes
// the group runs over (which a communication report names).
template <class Mesh>
struct mesh_group {
  std::array<std::size_t, Mesh::size> members{};
  std::size_t size = 0;
  std::size_t rank = 0;
  group_axes axes{};
};

template <class Mesh>
constexpr mesh_group<Mesh> group_of(const group_axes& axes, std::size_t position) {
  mesh_group<Mesh> g;
  g.axes = axes;
  g.size = group_size<Mesh>(axes);
  g.rank = group_rank<Mesh>(axes, position);
  for (std::size_t r = 0; r < g.size; ++r) g.members[r] = group_member<Mesh>(axes, position, r);
  return g;
}

// The group over `axes` that contains position p, on a mesh held as a value (for the
// executor, ops/detail/executor.hpp): the same members, rank and axes as group_of<Mesh>.
struct group_members {
  std::vector<std::size_t> members;
  std::size_t rank = 0;
  group_axes axes{};
};

TYPESHARD_NOINLINE inline group_members group_of(const mesh_value& m, const group_axes& axes,
                                                 std::size_t position) {
  group_members g;
  g.axes = axes;
  g.rank = shard_of(m, axes, position);
  const std::size_t size = shards_of(m, axes);
  g.members.resize(size);
  for (std::size_t r = 0; r < size; ++r) {
    std::size_t p = position, rest = r;
    for (std::size_t a = axes.count; a-- > 0;) {
      const std::size_t i = m.index_of(axes.axes[a]);
      if (i >= m.rank()) continue;
      p = m.with_coordinate(p, i, rest % m.axes[i].size);
      rest /= m.axes[i].size;
    }
    g.members[r] = p;
  }
  return g;
}

}  // namespace typeshard::detail
