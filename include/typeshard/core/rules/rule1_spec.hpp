// typeshard/core/rules/rule1_spec.hpp: the messages of rule 1 (spec): a spec names axes of its
// mesh, each at most once, at most one entry per dimension.
//
// Checked in: core/spec.hpp (detail::check_spec), used by every array and plan.
// Compile-fail tests: tests/compile_fail/rule1_*.cpp, spec_too_many_axes_in_dim.cpp. Table:
// docs/rules.md.
// Each message is a class template in ts::diagnostic whose fire() holds the static_assert;
// a check instantiates it through detail::require (core/detail/diagnose.hpp).
#pragma once

#include <cstddef>

#include "../detail/diagnose.hpp"

namespace typeshard::diagnostic {

template <char... Axis>
struct axis_not_in_mesh {
  static constexpr bool fire() {
    static_assert(detail::always_false_chars<Axis...>,
                  "typeshard: rule 1 (spec): the spec names an axis the mesh does not have; "
                  "fix: use one of the mesh's axis names, or add the axis to the mesh");
    return true;
  }
};

template <char... Axis>
struct axis_used_twice {
  static constexpr bool fire() {
    static_assert(detail::always_false_chars<Axis...>,
                  "typeshard: rule 1 (spec): a mesh axis appears more than once in the spec; "
                  "fix: shard over each mesh axis at most once (combine axes in one entry "
                  "with ts::axes(\"x\", \"y\") instead of repeating one)");
    return true;
  }
};

template <std::size_t SpecEntries, std::size_t ArrayRank>
struct spec_longer_than_rank {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<SpecEntries, ArrayRank>,
                  "typeshard: rule 1 (spec): the spec has more entries than the array has "
                  "dimensions; fix: give at most one entry per dimension (missing trailing "
                  "entries mean ts::none)");
    return true;
  }
};

}  // namespace typeshard::diagnostic
