// typeshard/core/rules/rule6_extents.hpp: the messages of rule 6 (extents): static extents fit:
// divisible where even shards are needed, one extent per dimension.
//
// Checked in: ops/shard_map.hpp (static extents), array/sharded_array.hpp (device_put).
// Compile-fail tests: tests/compile_fail/rule6_*.cpp. Table: docs/rules.md.
// Each message is a class template in ts::diagnostic whose fire() holds the static_assert;
// a check instantiates it through detail::require (core/detail/diagnose.hpp).
#pragma once

#include <cstddef>

#include "../detail/diagnose.hpp"

namespace typeshard::diagnostic {

template <std::size_t Dimension, std::size_t Extent, std::size_t Shards>
struct static_extent_not_divisible {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Dimension, Extent, Shards>,
                  "typeshard: rule 6 (extents): a static extent is not divisible by the number "
                  "of shards along its dimension, and this operation needs even shards; fix: "
                  "choose an extent that is a multiple of the product of the axis sizes, or "
                  "shard that dimension over fewer axes");
    return true;
  }
};

// device_put with explicit Extents: one extent per dimension of the data (host_tensor) or
// of the global shape (make_block).
template <std::size_t ExtentsRank, std::size_t DataRank>
struct extents_rank_differs_from_data {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<ExtentsRank, DataRank>,
                  "typeshard: rule 6 (extents): device_put: the Extents given have a different "
                  "rank than the host data; fix: give one extent per dimension");
    return true;
  }
};

template <std::size_t ExtentsRank, std::size_t ShapeRank>
struct extents_rank_differs_from_shape {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<ExtentsRank, ShapeRank>,
                  "typeshard: rule 6 (extents): device_put: the Extents given have a different "
                  "rank than the global shape; fix: give one extent per dimension");
    return true;
  }
};

template <class Block, std::size_t Rank>
struct make_block_result_not_a_shard {
  static constexpr bool fire() {
    static_assert(detail::always_false<Block>,
                  "typeshard: rule 6 (extents): device_put(mesh, shape, make_block): "
                  "make_block(index) must return a ts::host_tensor<T, Rank> of the array's "
                  "rank, holding the slices `index`; fix: return the device's shard as a "
                  "host_tensor of that rank");
    return true;
  }
};

}  // namespace typeshard::diagnostic
