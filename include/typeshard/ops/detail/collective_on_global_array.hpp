// typeshard/ops/detail/collective_on_global_array.hpp: the collectives of ops/collectives.hpp
// called on a global-view array (a sharded array, or a value traced by ts::value_and_grad)
// instead of a block inside ts::shard_map: one diagnostic that names the fix.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "../../array/block.hpp"
#include "../../core/detail/diagnose.hpp"
#include "../../core/mesh.hpp"

namespace typeshard {

namespace diagnostic {
template <class Array>
struct collective_on_global_array {
  static constexpr bool fire() {
    static_assert(detail::always_false<Array>,
                  "typeshard: collectives (all_gather, psum_scatter, all_to_all, pmax, pmin, "
                  "pmean, ppermute, shift) take a block inside ts::shard_map, not a global array; "
                  "fix: on a global array name the spec you want and the plan picks the "
                  "collective, ts::reshard<ts::spec<...>>(x) (the spec without the axis: an "
                  "all-gather), or call the collective on a block inside ts::shard_map");
    return true;
  }
};
}  // namespace diagnostic

namespace detail {
// A global-view array (a sharded array, or a value traced by ts::value_and_grad).
template <class A>
concept global_array_like = !block_like<A> && requires {
  typename std::remove_cvref_t<A>::layout_type;
  typename std::remove_cvref_t<A>::unreduced_type;
};
}  // namespace detail

#define TYPESHARD_COLLECTIVE_ON_GLOBAL_ARRAY(name)                                            \
  template <axis_name... Axes, detail::global_array_like A, class... Rest>                   \
  auto name(const A& x, const Rest&...) {                                                   \
    static_assert(                                                                          \
        detail::require<false, diagnostic::collective_on_global_array<A>>::value);          \
    return x;                                                                               \
  }
TYPESHARD_COLLECTIVE_ON_GLOBAL_ARRAY(all_gather)
TYPESHARD_COLLECTIVE_ON_GLOBAL_ARRAY(psum_scatter)
TYPESHARD_COLLECTIVE_ON_GLOBAL_ARRAY(all_to_all)
TYPESHARD_COLLECTIVE_ON_GLOBAL_ARRAY(pmax)
TYPESHARD_COLLECTIVE_ON_GLOBAL_ARRAY(pmin)
TYPESHARD_COLLECTIVE_ON_GLOBAL_ARRAY(pmean)
TYPESHARD_COLLECTIVE_ON_GLOBAL_ARRAY(ppermute)
TYPESHARD_COLLECTIVE_ON_GLOBAL_ARRAY(shift)
#undef TYPESHARD_COLLECTIVE_ON_GLOBAL_ARRAY
template <axis_name... Axes, detail::global_array_like A>
auto ppermute(const A& x, std::initializer_list<std::pair<std::size_t, std::size_t>>) {
  static_assert(detail::require<false, diagnostic::collective_on_global_array<A>>::value);
  return x;
}

}  // namespace typeshard
