// typeshard/core/rules/rule2_einsum.hpp: the messages of rule 2 for ts::einsum: the subscript
// string, the operands against it, and the per-letter sharding rules.
//
// Checked in: plan/einsum_plan.hpp (detail::check_einsum_inputs, check_einsum_choice),
// ops/einsum.hpp (check_operand_types). A partial-sum operand that clashes with the other,
// or a product partial over more than 4 axes, is rule 3's message (rule3_unreduced.hpp).
// Compile-fail tests: tests/compile_fail/rule2_einsum_*.cpp. Table: docs/rules.md.
// Letters and axes arrive as character template arguments, which both g++ and clang++
// print readably in the line that names the diagnostic.
#pragma once

#include <cstddef>

#include "../detail/diagnose.hpp"

namespace typeshard::diagnostic {

template <std::size_t Position>
struct einsum_subscripts_malformed {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Position>,
                  "typeshard: rule 2 (einsum): the subscripts are not \"<lhs>,<rhs>-><out>\" "
                  "with 0 to 8 letters (a-z, A-Z) in each operand and in the output "
                  "(Position: the first character that does not fit); fix: write them as "
                  "ts::einsum<\"bsd,df->bsf\">, without spaces or \"...\"");
    return true;
  }
};

template <char Letter>
struct einsum_letter_repeated {
  static constexpr bool fire() {
    static_assert(detail::always_false_chars<Letter>,
                  "typeshard: rule 2 (einsum): a letter appears twice in one operand (a "
                  "diagonal) or in the output; fix: give each dimension of an operand its own "
                  "letter (take a diagonal with ts::shard_map)");
    return true;
  }
};

template <char Letter>
struct einsum_output_letter_unknown {
  static constexpr bool fire() {
    static_assert(detail::always_false_chars<Letter>,
                  "typeshard: rule 2 (einsum): an output letter appears in neither operand; "
                  "fix: every output letter names a dimension of lhs or rhs (broadcast with "
                  "an elementwise op instead)");
    return true;
  }
};

template <std::size_t Operand, std::size_t SubscriptLetters, std::size_t ArrayRank>
struct einsum_operand_rank_differs {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Operand, SubscriptLetters, ArrayRank>,
                  "typeshard: rule 2 (einsum): an operand's rank is not the number of its "
                  "letters (Operand 0 is lhs, 1 rhs); fix: write one letter per dimension of "
                  "each operand");
    return true;
  }
};

// The condition spells the letter and both extents, so the compiler prints them beside the
// message: clang++ on the error line ("requirement 'letter_lhs_extent_rhs_extent<'j', 8, 6>'"),
// g++ in the note under it.
template <char Letter, std::size_t LhsExtent, std::size_t RhsExtent>
inline constexpr bool letter_lhs_extent_rhs_extent = false;

template <char Letter, std::size_t LhsExtent, std::size_t RhsExtent>
struct einsum_letter_extents_differ {
  static constexpr bool fire() {
    static_assert(letter_lhs_extent_rhs_extent<Letter, LhsExtent, RhsExtent>,
                  "typeshard: rule 2 (einsum): a letter of both operands has different static "
                  "extents in lhs and rhs (letter_lhs_extent_rhs_extent<letter, lhs, rhs>, "
                  "printed with this message); fix: a letter names one dimension: give it the "
                  "same extent in both operands");
    return true;
  }
};

template <class Element>
struct einsum_element_not_float_or_double {
  static constexpr bool fire() {
    static_assert(detail::always_false<Element>,
                  "typeshard: rule 2 (einsum): the per-shard GEMM supports float, double and "
                  "bfloat16 elements; fix: convert the operands (ts::astype<float>(x)), or "
                  "write the product per shard with ts::shard_map");
    return true;
  }
};

template <class Element, class Preferred>
struct einsum_preferred_element_unsupported {
  static constexpr bool fire() {
    static_assert(detail::always_false<Element, Preferred>,
                  "typeshard: rule 2 (einsum): preferred_element<U> is the operands' element "
                  "type, or float for bfloat16 operands; fix: convert the operands "
                  "(ts::astype<U>(x)) or the result");
    return true;
  }
};

template <class LhsMesh, class RhsMesh>
struct einsum_meshes_differ {
  static constexpr bool fire() {
    static_assert(detail::always_false<LhsMesh, RhsMesh>,
                  "typeshard: rule 2 (einsum): the operands live on different mesh types; fix: "
                  "put both arrays on the same mesh");
    return true;
  }
};

template <class LhsElement, class RhsElement>
struct einsum_element_types_differ {
  static constexpr bool fire() {
    static_assert(detail::always_false<LhsElement, RhsElement>,
                  "typeshard: rule 2 (einsum): the operands have different element types; fix: "
                  "convert one so both match, e.g. ts::astype<float>(x)");
    return true;
  }
};

template <char... Axis>
struct einsum_out_spec_not_on_mesh {
  static constexpr bool fire() {
    static_assert(detail::always_false_chars<Axis...>,
                  "typeshard: rule 2 (einsum): the output spec names an axis the operands' mesh "
                  "does not have; fix: name the output sharding with the axes of the operands' "
                  "mesh");
    return true;
  }
};

template <char Letter>
struct einsum_batch_specs_differ {
  static constexpr bool fire() {
    static_assert(detail::always_false_chars<Letter>,
                  "typeshard: rule 2 (einsum): a batch letter (in both operands and the output) "
                  "is sharded differently in the two operands (over different mesh axes: "
                  "sharded in one operand only, it keeps that sharding); fix: name the output spec "
                  "(ts::einsum<\"...\", OutSpec>(a, b) picks the cheapest reshard), or reshard "
                  "one operand (ts::reshard<Spec>(x)) so the letter has the same spec entry in "
                  "both");
    return true;
  }
};

template <char... Axis>
inline constexpr bool clashing_output_axis = false;

template <char... Axis>
struct einsum_output_letters_share_axis {
  static constexpr bool fire() {
    static_assert(clashing_output_axis<Axis...>,
                  "typeshard: rule 2 (einsum): a free letter of lhs and a free letter of rhs are "
                  "sharded over the same mesh axis (the axis a spelled by "
                  "clashing_output_axis<...> printed with this message), so the result would "
                  "use it twice; fix: name the output spec with a on the output letter that "
                  "keeps it, which picks the cheapest plan (ts::einsum<\"ij,jk->ik\", "
                  "ts::spec<\"a\", ts::none>>(x, y) gathers y's k with one all_gather)");
    return true;
  }
};

// A batch letter sharded in one operand only keeps its sharding: the operand that holds it
// whole reads the other's block of it, so it cannot also shard an output letter over that
// axis. The condition spells the axis.
template <char... Axis>
struct einsum_batch_axis_taken_twice {
  static constexpr bool fire() {
    static_assert(clashing_output_axis<Axis...>,
                  "typeshard: rule 2 (einsum): a batch letter sharded in one operand only keeps "
                  "that sharding (the other operand, which holds it whole, reads its block), "
                  "but the other operand shards one of its output letters over the same mesh "
                  "axis (the axis a spelled by clashing_output_axis<...> printed with this "
                  "message), so the result would use it twice; fix: name the output spec, "
                  "which picks the cheapest plan (ts::einsum<\"...\", OutSpec>(x, y)), or "
                  "reshard one operand (ts::reshard<Spec>(x)) so a shards one output letter");
    return true;
  }
};

}  // namespace typeshard::diagnostic
