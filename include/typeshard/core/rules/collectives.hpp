// typeshard/core/rules/collectives.hpp: the messages of collectives: a collective inside
// shard_map names mesh axes, each once, at most 4.
//
// Checked in: ops/collectives.hpp (detail::check_collective_axes).
// Compile-fail tests: tests/compile_fail/collective_*.cpp. Table: docs/rules.md.
// Each message is a class template in ts::diagnostic whose fire() holds the static_assert;
// a check instantiates it through detail::require (core/detail/diagnose.hpp).
#pragma once

#include <cstddef>

#include "../detail/diagnose.hpp"

namespace typeshard::diagnostic {

template <char... Axis>
struct collective_axis_repeated {
  static constexpr bool fire() {
    static_assert(detail::always_false_chars<Axis...>,
                  "typeshard: collectives: a mesh axis is named twice in one collective; "
                  "fix: name each axis once, e.g. ts::psum<\"x\", \"y\">(block)");
    return true;
  }
};

template <std::size_t Count>
struct collective_too_many_axes {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Count>,
                  "typeshard: collectives: at most 4 mesh axes per collective; fix: split it "
                  "into several collectives");
    return true;
  }
};

}  // namespace typeshard::diagnostic
