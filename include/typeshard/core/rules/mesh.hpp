// typeshard/core/rules/mesh.hpp: the messages of mesh: a mesh: distinct axis names, sizes >= 1,
// queries of axes it has.
//
// Checked in: core/mesh.hpp (ts::mesh, its axis queries).
// Compile-fail tests: tests/compile_fail/mesh_*.cpp, axis_name_too_long.cpp. Table:
// docs/rules.md.
// Each message is a class template in ts::diagnostic whose fire() holds the static_assert;
// a check instantiates it through detail::require (core/detail/diagnose.hpp).
#pragma once

#include <cstddef>

#include "../detail/diagnose.hpp"

namespace typeshard::diagnostic {

template <char... Axis>
struct duplicate_mesh_axis {
  static constexpr bool fire() {
    static_assert(detail::always_false_chars<Axis...>,
                  "typeshard: mesh: an axis name appears twice in the mesh; "
                  "fix: give every mesh axis a distinct name");
    return true;
  }
};

template <std::size_t... Position>
struct mesh_axis_of_size_zero {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Position...>,
                  "typeshard: mesh: an axis has size 0; fix: every mesh axis needs size >= 1");
    return true;
  }
};

template <char... Axis>
struct mesh_has_no_such_axis {
  static constexpr bool fire() {
    static_assert(detail::always_false_chars<Axis...>,
                  "typeshard: mesh: no axis of that name in the mesh; "
                  "fix: query one of the names the mesh was declared with");
    return true;
  }
};

}  // namespace typeshard::diagnostic
