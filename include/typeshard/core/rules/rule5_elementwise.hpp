// typeshard/core/rules/rule5_elementwise.hpp: the messages of rule 5 (elementwise): binary
// elementwise operands broadcast as NumPy's do (trailing dimensions aligned, extent 1
// stretches) and a dimension is sharded alike in both or in one only (arrays); blocks have
// one mesh and rank.
//
// Checked in: ops/detail/elementwise_shards.hpp (check_elementwise_operands),
// array/block_elementwise.hpp (zip_blocks). Compile-fail tests: tests/compile_fail/rule5_*.cpp.
// Table: docs/rules.md. Each message is a class template in ts::diagnostic whose fire() holds
// the static_assert; a check instantiates it through detail::require (core/detail/diagnose.hpp).
#pragma once

#include <cstddef>

#include "../detail/diagnose.hpp"

namespace typeshard::diagnostic {

template <class LhsSpec, class RhsSpec>
struct elementwise_specs_differ {
  static constexpr bool fire() {
    static_assert(detail::always_false<LhsSpec, RhsSpec>,
                  "typeshard: rule 5 (elementwise): the operands have different specs (a dimension "
                  "is sharded over different mesh axes in the two); fix: bring one to the "
                  "other's spec first with ts::reshard<Spec>(array)");
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

template <char... Axis>
struct elementwise_axis_on_two_dims {
  static constexpr bool fire() {
    static_assert(detail::always_false_chars<Axis...>,
                  "typeshard: rule 5 (elementwise): the operands shard different dimensions of "
                  "the (broadcast) result over the same mesh axis, so the result would use it "
                  "twice; fix: reshard one operand (ts::reshard<Spec>(array)) so the axis "
                  "shards the same dimension in both, or only one operand");
    return true;
  }
};

template <std::size_t Dim, std::size_t LhsExtent, std::size_t RhsExtent>
struct broadcast_extents_differ {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Dim, LhsExtent, RhsExtent>,
                  "typeshard: rule 5 (elementwise): the operands' static extents do not "
                  "broadcast (trailing dimensions aligned, each pair equal or one of them 1); "
                  "fix: give both operands the same extents there, or extent 1 to the one "
                  "that should stretch");
    return true;
  }
};

template <std::size_t Dim>
struct broadcast_dimension_sharded {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Dim>,
                  "typeshard: rule 5 (elementwise): a dimension of static extent 1 that "
                  "stretches to the other operand's extent is sharded (only one device holds "
                  "its element); fix: leave that dimension unsharded (ts::none) in its spec");
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
