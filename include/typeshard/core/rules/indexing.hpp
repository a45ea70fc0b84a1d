// typeshard/core/rules/indexing.hpp: the messages of the indexing operations: slices,
// concatenation and splitting along one dimension, take (row lookup by id) and iota.
//
// Checked in: ops/slice.hpp, ops/concat.hpp, ops/split.hpp, ops/take.hpp, ops/indices.hpp.
// Compile-fail tests: tests/compile_fail/ (slice_*, concat_*, split_*, take_*, iota_*).
// Table: docs/rules.md. Each message is a class template in ts::diagnostic whose fire() holds
// the static_assert; a check instantiates it through detail::require (core/detail/diagnose.hpp).
#pragma once

#include <cstddef>

#include "../detail/diagnose.hpp"

namespace typeshard::diagnostic {

template <std::size_t Dim, std::size_t Rank>
struct slice_dim_out_of_range {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Dim, Rank>,
                  "typeshard: ts::slice_in_dim / ts::split / ts::concat: the dimension is out "
                  "of range for the array's rank (dimensions count from 0); fix: name a "
                  "dimension below the rank");
    return true;
  }
};
template <std::size_t Start, std::size_t Size, std::size_t Extent>
struct slice_past_static_extent {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Start, Size, Extent>,
                  "typeshard: ts::slice_in_dim<Dim, Start, Size>: the range [Start, Start + "
                  "Size) ends past the dimension's static extent; fix: a range inside the "
                  "extent");
    return true;
  }
};

template <class First, class Other>
struct concat_operands_differ {
  static constexpr bool fire() {
    static_assert(detail::always_false<First, Other>,
                  "typeshard: ts::concat: the operands differ in element type, rank, mesh, "
                  "spec or unreduced axes (a concatenation keeps one sharding); fix: "
                  "ts::reshard<Spec> (or ts::astype) the operands to the first's first");
    return true;
  }
};

template <std::size_t Extent, std::size_t Parts>
struct split_parts_do_not_divide {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Extent, Parts>,
                  "typeshard: ts::split<Dim, N>: the dimension's static extent is not a "
                  "multiple of N, so the parts cannot be equal; fix: a part count that "
                  "divides the extent, or ts::slice_in_dim for unequal parts");
    return true;
  }
};

template <class TableSpec, class IdsSpec>
struct take_axes_shared {
  static constexpr bool fire() {
    static_assert(detail::always_false<TableSpec, IdsSpec>,
                  "typeshard: ts::take: the ids are sharded over a mesh axis the table is "
                  "sharded over too (each device would need rows or ids another device "
                  "holds); fix: reshard one of them first, the table with "
                  "ts::reshard<ts::spec<ts::none, ...>>(table) or the ids off that axis");
    return true;
  }
};
template <std::size_t TableRank>
struct take_table_not_rank_2 {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<TableRank>,
                  "typeshard: ts::take: the table must have rank 2 ([V, D], rows looked up "
                  "by id); fix: ts::merge_dims or ts::split_dim it to rank 2 first");
    return true;
  }
};

template <std::size_t Dim, std::size_t Rank>
struct iota_dim_out_of_range {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Dim, Rank>,
                  "typeshard: ts::iota: the counting dimension is out of range for the shape's "
                  "rank; fix: name a dimension from 0 to rank - 1 (ts::iota<T, Spec, Dim>)");
    return true;
  }
};

}  // namespace typeshard::diagnostic
