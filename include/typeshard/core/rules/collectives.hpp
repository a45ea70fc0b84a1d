// typeshard/core/rules/collectives.hpp: the messages of collectives, part of rule 4
// (shard_map): a collective inside shard_map names axes of the block's mesh, each once, at
// most 4.
//
// Checked in: ops/detail/block_collective.hpp (detail::check_collective_axes).
// Compile-fail tests: tests/compile_fail/collective_*.cpp. Table: docs/rules.md.
// Each message is a class template in ts::diagnostic whose fire() holds the static_assert;
// a check instantiates it through detail::require (core/detail/diagnose.hpp).
#pragma once

#include <cstddef>

#include "../detail/diagnose.hpp"

namespace typeshard::diagnostic {

template <char... Axis>
struct collective_unknown_axis {
  static constexpr bool fire() {
    static_assert(detail::always_false_chars<Axis...>,
                  "typeshard: rule 4 (shard_map): a collective names an axis the mesh does "
                  "not have; fix: name one of the axes of the block's mesh, e.g. "
                  "ts::psum<\"x\">(block) on a mesh with an axis \"x\"");
    return true;
  }
};

template <char... Axis>
struct collective_axis_repeated {
  static constexpr bool fire() {
    static_assert(detail::always_false_chars<Axis...>,
                  "typeshard: rule 4 (shard_map): a collective names a mesh axis twice; "
                  "fix: name each axis once, e.g. ts::psum<\"x\", \"y\">(block)");
    return true;
  }
};

template <std::size_t Count>
struct collective_too_many_axes {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Count>,
                  "typeshard: rule 4 (shard_map): a collective names more than 4 mesh axes; "
                  "fix: split it into several collectives");
    return true;
  }
};

}  // namespace typeshard::diagnostic
