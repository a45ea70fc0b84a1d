// typeshard/core/rules/rule5_elementwise.hpp: the messages of rule 5 (elementwise): binary
// elementwise operands have one spec, mesh and rank (arrays), one mesh and rank (blocks).
//
// Checked in: ops/elementwise.hpp (check_elementwise_operands), array/block.hpp (zip_blocks).
// Compile-fail tests: tests/compile_fail/rule5_*.cpp. Table: docs/rules.md.
// Each message is a class template in ts::diagnostic whose fire() holds the static_assert;
// a check instantiates it through detail::require (core/detail/diagnose.hpp).
#pragma once

#include <cstddef>

#include "../detail/diagnose.hpp"

namespace typeshard::diagnostic {

template <class LhsSpec, class RhsSpec>
struct elementwise_specs_differ {
  static constexpr bool fire() {
    static_assert(detail::always_false<LhsSpec, RhsSpec>,
                  "typeshard: rule 5 (elementwise): the operands have different specs; "
                  "fix: bring one to the other's spec first with ts::reshard<Spec>(array)");
    return true;
  }
};

template <class LhsMesh, class RhsMesh>
struct elementwise_meshes_differ {
  static constexpr bool fire() {
    static_assert(detail::always_false<LhsMesh, RhsMesh>,
                  "typeshard: rule 5 (elementwise): the operands live on different mesh types; "
                  "fix: put both arrays on the same mesh");
    return true;
  }
};

template <std::size_t LhsRank, std::size_t RhsRank>
struct elementwise_ranks_differ {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<LhsRank, RhsRank>,
                  "typeshard: rule 5 (elementwise): the operands have different ranks; "
                  "fix: reshape one operand so both have the same dimensions");
    return true;
  }
};

template <class LhsBlock, class RhsBlock>
struct block_operands_differ {
  static constexpr bool fire() {
    static_assert(detail::always_false<LhsBlock, RhsBlock>,
                  "typeshard: rule 5 (elementwise): elementwise operations on blocks need "
                  "blocks of the same mesh and rank; fix: combine blocks of one shard_map, "
                  "reshaped to the same rank");
    return true;
  }
};

}  // namespace typeshard::diagnostic
