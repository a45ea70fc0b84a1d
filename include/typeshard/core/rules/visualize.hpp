// typeshard/core/rules/visualize.hpp: the messages of visualize: pictures of 1-D and 2-D arrays
// only.
//
// Checked in: viz/visualize.hpp.
// Compile-fail tests: tests/compile_fail/visualize_*.cpp. Table: docs/rules.md.
// Each message is a class template in ts::diagnostic whose fire() holds the static_assert;
// a check instantiates it through detail::require (core/detail/diagnose.hpp).
#pragma once

#include <cstddef>

#include "../detail/diagnose.hpp"

namespace typeshard::diagnostic {

template <std::size_t Rank>
struct visualize_needs_rank_1_or_2 {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Rank>,
                  "typeshard: visualize: only 1-D and 2-D arrays can be drawn (as in "
                  "jax.debug.visualize_array_sharding); fix: draw two of its dimensions, "
                  "ts::visualize_sharding<ts::spec<d0, d1>>(os, mesh, ts::shape<2>{n0, n1}) "
                  "with those dimensions' spec entries and extents");
    return true;
  }
};

}  // namespace typeshard::diagnostic
