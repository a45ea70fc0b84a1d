// typeshard/core/rules/rule4_shard_map.hpp: the messages of rule 4 (shard_map): blocks carry
// the axes they vary over; an out spec may not claim replication they lack; shard_map's
// arguments match its specs.
//
// Checked in: ops/shard_map.hpp, array/block.hpp (as_varying).
// Compile-fail tests: tests/compile_fail/rule4_*.cpp, shard_map_*.cpp. Table: docs/rules.md.
// Each message is a class template in ts::diagnostic whose fire() holds the static_assert;
// a check instantiates it through detail::require (core/detail/diagnose.hpp).
#pragma once

#include <cstddef>

#include "../detail/diagnose.hpp"

namespace typeshard::diagnostic {

template <char... Axis>
struct out_spec_claims_replication {
  static constexpr bool fire() {
    static_assert(detail::always_false_chars<Axis...>,
                  "typeshard: rule 4 (shard_map): the out spec replicates over a mesh axis "
                  "that the returned block still varies over; fix: reduce or gather over that "
                  "axis first (ts::psum<\"axis\">(b), ts::all_gather<\"axis\">(b, dim)), or "
                  "shard an output dimension over it in the out spec");
    return true;
  }
};

template <std::size_t InSpecs, std::size_t Arguments>
struct shard_map_argument_count {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<InSpecs, Arguments>,
                  "typeshard: shard_map: the number of arguments differs from the number of "
                  "in specs; fix: give one in spec per argument (ts::specs<...> for several)");
    return true;
  }
};

template <class Expected, class Got>
struct shard_map_mesh_differs {
  static constexpr bool fire() {
    static_assert(detail::always_false<Expected, Got>,
                  "typeshard: shard_map: an argument lives on a different mesh type than the "
                  "shard_map's; fix: device_put it on the shard_map's mesh");
    return true;
  }
};

template <class Returned>
struct shard_map_result_not_blocks {
  static constexpr bool fire() {
    static_assert(detail::always_false<Returned>,
                  "typeshard: shard_map: the function must return a block of the mesh (or a "
                  "std::tuple of blocks, one per out spec); fix: return the block, e.g. the "
                  "result of a collective or an operation on the input blocks");
    return true;
  }
};

template <std::size_t Varying, std::size_t More>
struct block_narrowed {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Varying, More>,
                  "typeshard: rule 4 (shard_map): a block cannot be retyped as varying over "
                  "fewer axes than it does; fix: reduce or gather over those axes instead");
    return true;
  }
};

}  // namespace typeshard::diagnostic
