// typeshard/core/diagnostics.hpp: one class template per compile-time rule.
//
// You never use these directly: when a sharding is invalid, typeshard instantiates the
// matching template, and the compiler prints its message (the first `error:` line) and
// its name with the offending axis spelled out, for example
//   in instantiation of 'typeshard::diagnostic::axis_not_in_mesh<'z'>'
// The messages all begin with "typeshard:", name the rule of DESIGN.md, and say the fix.
#pragma once

#include <cstddef>

#include "detail/diagnose.hpp"

namespace typeshard::diagnostic {

// ---- mesh ----------------------------------------------------------------------------
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

// ---- rule 1: spec --------------------------------------------------------------------
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

// ---- rule 5: elementwise -------------------------------------------------------------
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

// ---- rule 6: extents -----------------------------------------------------------------
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

}  // namespace typeshard::diagnostic
