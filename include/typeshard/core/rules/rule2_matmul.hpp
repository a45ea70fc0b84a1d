// typeshard/core/rules/rule2_matmul.hpp: the messages of rule 2 (matmul): the operands of
// ts::matmul (arrays and blocks): one mesh, one element type, ranks, extents, batch and free
// dimensions.
//
// Checked in: plan/matmul_plan.hpp (detail::check_matmul_inputs, matmul_form::check_choice),
// ops/matmul.hpp (check_operand_types), array/block_matmul.hpp, array/block.hpp (transpose).
// Compile-fail tests: tests/compile_fail/rule2_*.cpp. Table: docs/rules.md.
// Each message is a class template in ts::diagnostic whose fire() holds the static_assert;
// a check instantiates it through detail::require (core/detail/diagnose.hpp).
#pragma once

#include <cstddef>

#include "../detail/diagnose.hpp"

namespace typeshard::diagnostic {

template <class LhsMesh, class RhsMesh>
struct matmul_meshes_differ {
  static constexpr bool fire() {
    static_assert(detail::always_false<LhsMesh, RhsMesh>,
                  "typeshard: rule 2 (matmul): the operands live on different mesh types; fix: "
                  "put both arrays on the same mesh");
    return true;
  }
};

template <class LhsElement, class RhsElement>
struct matmul_element_types_differ {
  static constexpr bool fire() {
    static_assert(detail::always_false<LhsElement, RhsElement>,
                  "typeshard: rule 2 (matmul): the operands have different element types; fix: "
                  "convert one so both match, e.g. ts::astype<float>(x)");
    return true;
  }
};

template <class Element>
struct matmul_element_not_float_or_double {
  static constexpr bool fire() {
    static_assert(detail::always_false<Element>,
                  "typeshard: rule 2 (matmul): the per-shard GEMM supports float, double and "
                  "bfloat16 elements; fix: convert the operands (ts::astype<float>(x)), or write "
                  "the product per shard with ts::shard_map");
    return true;
  }
};

template <class Element, class Preferred>
struct matmul_preferred_element_unsupported {
  static constexpr bool fire() {
    static_assert(detail::always_false<Element, Preferred>,
                  "typeshard: rule 2 (matmul): preferred_element<U> is the operands' element "
                  "type, or float for bfloat16 operands; fix: convert the operands "
                  "(ts::astype<U>(x)) or the result");
    return true;
  }
};

template <std::size_t LhsRank, std::size_t RhsRank>
struct matmul_ranks_unsupported {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<LhsRank, RhsRank>,
                  "typeshard: rule 2 (matmul): the operands need the same rank, at least 2 "
                  "(A[..., I, J] . B[..., J, K], the leading dimensions being batch "
                  "dimensions); fix: reshape the operands so both are matrices or both are "
                  "batches of matrices with the same batch dimensions");
    return true;
  }
};

template <char... Axis>
struct matmul_out_spec_not_on_mesh {
  static constexpr bool fire() {
    static_assert(detail::always_false_chars<Axis...>,
                  "typeshard: rule 2 (matmul): the output spec names an axis the operands' mesh "
                  "does not have (a spec written for another mesh?); fix: name the output "
                  "sharding with the axes of the operands' mesh");
    return true;
  }
};

template <std::size_t BatchDimension>
struct matmul_batch_specs_differ {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<BatchDimension>,
                  "typeshard: rule 2 (matmul): a batch (leading) dimension is sharded "
                  "differently in the two operands (over different mesh axes: sharded in one "
                  "operand only, it keeps that sharding); fix: reshard one operand "
                  "(ts::reshard<Spec>(x)) so every batch dimension has the same spec entry in "
                  "both, or ts::none in one of them");
    return true;
  }
};

// The static_assert's condition names the two extents, so the compiler prints them beside
// the message: clang++ on the error line itself ("requirement
// 'lhs_J_extent_vs_rhs_J_extent<8, 6>'"), g++ (whose error line holds only the message) in
// the note right under it ("'...lhs_J_extent_vs_rhs_J_extent<8, 6>' evaluates to false").
template <std::size_t LhsJ, std::size_t RhsJ>
inline constexpr bool lhs_J_extent_vs_rhs_J_extent = false;

template <std::size_t LhsExtent, std::size_t RhsExtent>
struct matmul_contracting_extents_differ {
  static constexpr bool fire() {
    static_assert(lhs_J_extent_vs_rhs_J_extent<LhsExtent, RhsExtent>,
                  "typeshard: rule 2 (matmul): the contracting dimension J has different static "
                  "extents in lhs (its last dimension) and rhs (its second-to-last), the two "
                  "numbers of lhs_J_extent_vs_rhs_J_extent<lhs, rhs> printed with this message; "
                  "fix: A[..., I, J] . B[..., J, K] needs the same J in both operands");
    return true;
  }
};

template <std::size_t BatchDimension, std::size_t LhsExtent, std::size_t RhsExtent>
struct matmul_batch_extents_differ {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<BatchDimension, LhsExtent, RhsExtent>,
                  "typeshard: rule 2 (matmul): a batch (leading) dimension has different static "
                  "extents in the two operands; fix: both operands need the same batch "
                  "extents");
    return true;
  }
};

// The condition spells the clashing axis (clang++ prints it on the error line, g++ in the
// note under it), and the fix refers to it: a static_assert message is a fixed literal.
template <char... Axis>
inline constexpr bool clashing_axis = false;

template <char... Axis>
struct matmul_free_dims_share_axis {
  static constexpr bool fire() {
    static_assert(clashing_axis<Axis...>,
                  "typeshard: rule 2 (matmul): lhs's rows I and rhs's columns K are sharded "
                  "over the same mesh axis (A[I_a, J] . B[J, K_a], case 4, the axis a spelled "
                  "by clashing_axis<...> printed with this message), so the result C[I_a, K_a] "
                  "would use it twice; fix: name the output spec with that axis on the "
                  "dimension that keeps it, which decides the operand to gather with one "
                  "all_gather: ts::matmul<ts::spec<\"a\", ts::none>>(A, B) gathers B, "
                  "ts::matmul<ts::spec<ts::none, \"a\">>(A, B) gathers A (for batched "
                  "operands, the batch entries first)");
    return true;
  }
};

// A batch dimension sharded in one operand only keeps its sharding (the other operand reads
// its block), so the other operand's I or K cannot be sharded over that axis too. The
// condition spells the axis.
template <char... Axis>
struct matmul_batch_axis_on_free_dim {
  static constexpr bool fire() {
    static_assert(clashing_axis<Axis...>,
                  "typeshard: rule 2 (matmul): a batch (leading) dimension sharded in one "
                  "operand only keeps that sharding (the other operand, which holds it whole, "
                  "reads its block), but the other operand's I or K is sharded over the same "
                  "mesh axis (the axis a spelled by clashing_axis<...> printed with this "
                  "message), so the result would use it twice; fix: name the output spec, "
                  "which picks the cheapest plan (ts::matmul<OutSpec>(A, B)), or reshard one "
                  "operand (ts::reshard<Spec>(x)) so a shards one dimension of the result");
    return true;
  }
};

// ts::matmul and ts::transpose of blocks, inside shard_map (array/block_matmul.hpp, block.hpp).
template <class LhsElement, class RhsElement>
struct block_matmul_element_types_differ {
  static constexpr bool fire() {
    static_assert(detail::always_false<LhsElement, RhsElement>,
                  "typeshard: rule 2 (matmul): ts::matmul of blocks needs equal element types; "
                  "fix: convert one block, e.g. ts::astype<float>(b)");
    return true;
  }
};

template <class LhsMesh, class RhsMesh>
struct block_matmul_meshes_differ {
  static constexpr bool fire() {
    static_assert(detail::always_false<LhsMesh, RhsMesh>,
                  "typeshard: rule 2 (matmul): ts::matmul of blocks needs blocks of the same "
                  "mesh; fix: multiply blocks of one shard_map");
    return true;
  }
};

template <std::size_t LhsRank, std::size_t RhsRank>
struct block_matmul_ranks_unsupported {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<LhsRank, RhsRank>,
                  "typeshard: rule 2 (matmul): ts::matmul of blocks: a has rank >= 2, b has "
                  "rank 2 or a's rank; fix: reshape the operands (a matrix or a batch of "
                  "matrices, times a matrix or a batch of the same rank)");
    return true;
  }
};

template <std::size_t Rank>
struct block_transpose_needs_rank_2 {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Rank>,
                  "typeshard: rule 2 (matmul): ts::transpose(block) needs a rank-2 block (a "
                  "matrix); fix: transpose the rank-2 operand (matmul(batch, ts::transpose(w)) "
                  "takes a batched a), or build the permuted block with a loop over its "
                  "elements");
    return true;
  }
};

}  // namespace typeshard::diagnostic
