// typeshard/core/detail/mesh_value.hpp: a mesh held as a value (its axes and size), for the
// run-time code that needs a mesh's arithmetic but not its type. Internal: do not rely on
// anything in detail/.
//
// The executor of plans (ops/detail/executor.hpp) walks a plan's steps on one device's
// blocks: which slices a position holds and which positions a collective runs over are
// arithmetic on the mesh's axis names and sizes. Taking them as a value instead of a type
// makes the executor a template of the element type and rank only: instantiated once per
// TU for all the meshes of a program, and compiled once in typeshard::runtime for the
// common element types and ranks (core/config.hpp). Mesh types stay the compile-time
// vocabulary (rules, plans); mesh_value_of<Mesh>() points at the type's own axes.
#pragma once

#include <cstddef>
#include <span>

#include "../mesh.hpp"

namespace typeshard::detail {

struct mesh_value {
  std::span<const axis> axes;  // in mesh order, the last axis minor
  std::size_t size = 1;        // the number of devices (positions)

  constexpr std::size_t rank() const { return axes.size(); }

  // The index of the named axis; rank() when the mesh has none (rule 1 rejects that
  // earlier; such an axis counts for nothing, as with Mesh::index_of).
  constexpr std::size_t index_of(const axis_name& name) const {
    for (std::size_t i = 0; i < axes.size(); ++i)
      if (axes[i].name == name) return i;
    return axes.size();
  }
  constexpr std::size_t size_of(const axis_name& name) const {
    const std::size_t i = index_of(name);
    return i < axes.size() ? axes[i].size : 1;
  }

  // The coordinate of `position` (row-major, the last axis minor) on axis i.
  constexpr std::size_t coordinate(std::size_t position, std::size_t i) const {
    for (std::size_t j = axes.size(); j-- > i + 1;) position /= axes[j].size;
    return position % axes[i].size;
  }

  // The position that differs from `position` only in its coordinate on axis i, which is c.
  constexpr std::size_t with_coordinate(std::size_t position, std::size_t i,
                                        std::size_t c) const {
    std::size_t stride = 1;
    for (std::size_t j = axes.size(); j-- > i + 1;) stride *= axes[j].size;
    return position - coordinate(position, i) * stride + c * stride;
  }
};

template <class Mesh>
constexpr mesh_value mesh_value_of() {
  return {std::span<const axis>(Mesh::axes), Mesh::size};
}

}  // namespace typeshard::detail
