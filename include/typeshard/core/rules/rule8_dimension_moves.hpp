// typeshard/core/rules/rule8_dimension_moves.hpp: the messages of rule 8 (dimension moves):
// permute, transpose, split_dim and merge_dims move data only within each device.
//
// A permutation moves each dimension with its spec entry: always local. Splitting a
// dimension of extent n sharded into k blocks into (Parts, n / Parts), the new major
// dimension keeping the axes, keeps every device's elements when
//   ceil(n / k) == ceil(Parts / k) * (n / Parts),
// exactly when core/layout.hpp's blocks of the flat dimension and of the major one cover the
// same flat ranges: always when k divides Parts (or the minor extent is 1), sometimes
// otherwise (4 -> (2, 2) over 3 shards: blocks of 2, 2, 0 both ways). Merging (A, B)
// into A * B is the same equation read backwards, and needs the minor dimension unsharded.
// Statically known violations are these compile errors; dynamic extents throw shape_error.
//
// Checked in: plan/dims_plan.hpp (detail::check_permute, check_reshape), called by
// ops/dims.hpp; array/block.hpp (ts::transpose of a sharded array).
// Compile-fail tests: tests/compile_fail/rule8_*.cpp. Table: docs/rules.md.
// Each message is a class template in ts::diagnostic whose fire() holds the static_assert;
// a check instantiates it through detail::require (core/detail/diagnose.hpp).
#pragma once

#include <cstddef>

#include "../detail/diagnose.hpp"

namespace typeshard::diagnostic {

template <std::size_t Rank, std::size_t Given>
struct permutation_invalid {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Rank, Given>,
                  "typeshard: rule 8 (dimension moves): ts::permute<Perm...> needs a "
                  "permutation of the array's dimensions (each of 0 .. rank-1 exactly once); "
                  "fix: name every dimension once, e.g. ts::permute<0, 2, 1>(x) for rank 3");
    return true;
  }
};

template <std::size_t Rank>
struct transpose_rank_not_two {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Rank>,
                  "typeshard: rule 8 (dimension moves): ts::transpose(x) needs a rank-2 array; "
                  "fix: use ts::permute<Perm...>(x) to name the order of the dimensions");
    return true;
  }
};

template <std::size_t Dim, std::size_t Rank>
struct dimension_out_of_range {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Dim, Rank>,
                  "typeshard: rule 8 (dimension moves): the dimension named is not one of the "
                  "array's (ts::merge_dims<Dim> merges Dim and Dim + 1); fix: name a dimension "
                  "below the rank (below rank - 1 for merge_dims)");
    return true;
  }
};

template <std::size_t Dim, std::size_t Extent, std::size_t Parts>
struct split_extent_not_divisible {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Dim, Extent, Parts>,
                  "typeshard: rule 8 (dimension moves): ts::split_dim<Dim, Parts>: the "
                  "dimension's static extent is not a multiple of Parts (the new major "
                  "extent); fix: choose Parts >= 1 dividing the extent");
    return true;
  }
};

template <std::size_t Dim, std::size_t Parts, std::size_t Shards>
struct split_needs_communication {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Dim, Parts, Shards>,
                  "typeshard: rule 8 (dimension moves): ts::split_dim<Dim, Parts>: Parts is "
                  "not a multiple of the dimension's number of shards, so the split blocks "
                  "would not be the devices' blocks (data would move); fix: choose Parts "
                  "divisible by the product of the dimension's axis sizes, or reshard the "
                  "dimension to ts::none first (ts::reshard<Spec>(x))");
    return true;
  }
};

template <std::size_t Dim>
struct merge_minor_sharded {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Dim>,
                  "typeshard: rule 8 (dimension moves): ts::merge_dims<Dim>: dimension Dim + 1 "
                  "(the minor one) is sharded, so the merged dimension would not be in blocks "
                  "(data would move); fix: reshard dimension Dim + 1 to ts::none first "
                  "(ts::reshard<Spec>(x)), sharding dimension Dim instead if you need to");
    return true;
  }
};

template <std::size_t Dim, std::size_t MajorExtent, std::size_t Shards>
struct merge_needs_communication {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Dim, MajorExtent, Shards>,
                  "typeshard: rule 8 (dimension moves): ts::merge_dims<Dim>: dimension Dim is "
                  "unevenly sharded (its extent is not a multiple of its number of shards), so "
                  "the merged blocks would not be the devices' blocks (data would move); fix: "
                  "make its extent a multiple of the product of its axis sizes, or reshard it "
                  "to ts::none first (ts::reshard<Spec>(x))");
    return true;
  }
};

}  // namespace typeshard::diagnostic
