// typeshard/core/rules/rule3_unreduced.hpp: the messages of rule 3 (unreduced): a partial sum
// takes only linear operations until it is reduced.
//
// Checked in: ops/elementwise.hpp (linear_zip, map), ops/reshard.hpp (ts::psum),
// plan/reshard_plan.hpp (check_reshard), plan/matmul_plan.hpp (the planner's problems),
// array/sharded_array.hpp (to_host), ops/move.hpp and ops/checkpoint.hpp (the last two).
// Compile-fail tests: tests/compile_fail/rule3_*.cpp, rule2_unreduced_operand.cpp. Table:
// docs/rules.md.
// Each message is a class template in ts::diagnostic whose fire() holds the static_assert;
// a check instantiates it through detail::require (core/detail/diagnose.hpp).
#pragma once

#include <cstddef>

#include "../detail/diagnose.hpp"

namespace typeshard::diagnostic {

template <class Unreduced>
struct nonlinear_op_on_unreduced {
  static constexpr bool fire() {
    static_assert(detail::always_false<Unreduced>,
                  "typeshard: rule 3 (unreduced): a non-linear operation on a value that is "
                  "still a partial sum over a mesh axis; fix: reduce it first with "
                  "ts::reshard<Spec>(x) or ts::psum<\"axis\">(x), then apply the operation");
    return true;
  }
};

template <class LhsUnreduced, class RhsUnreduced>
struct unreduced_axes_differ {
  static constexpr bool fire() {
    static_assert(detail::always_false<LhsUnreduced, RhsUnreduced>,
                  "typeshard: rule 3 (unreduced): adding values that are unreduced over "
                  "different mesh axes (or a partial sum and a full value) is not linear in "
                  "the partial sums; fix: reduce both first, or make both unreduced over the "
                  "same axes");
    return true;
  }
};

template <char... Axis>
struct psum_over_reduced_axis {
  static constexpr bool fire() {
    static_assert(detail::always_false_chars<Axis...>,
                  "typeshard: rule 3 (unreduced): ts::psum<\"axis\">(array) over an axis the "
                  "array is not unreduced over (it would multiply the value by the axis size); "
                  "fix: psum only the axes of the array's unreduced<...>, or use ts::psum "
                  "inside ts::shard_map for per-device sums");
    return true;
  }
};

template <char... Axis>
struct unreduced_axis_also_shards {
  static constexpr bool fire() {
    static_assert(detail::always_false_chars<Axis...>,
                  "typeshard: rule 3 (unreduced): an axis is both unreduced and sharding a "
                  "dimension of the same array; fix: a partial sum over an axis must be "
                  "replicated over it: shard that dimension over another axis");
    return true;
  }
};

template <std::size_t Count>
struct too_many_unreduced_axes {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Count>,
                  "typeshard: rule 3 (unreduced): a value unreduced over more than 4 mesh axes; "
                  "fix: reduce some of them first");
    return true;
  }
};

template <char... Axis>
struct matmul_unreduced_conflict {
  static constexpr bool fire() {
    static_assert(detail::always_false_chars<Axis...>,
                  "typeshard: rule 3 (unreduced): one operand of ts::matmul is a partial sum over "
                  "a mesh axis the other operand is sharded or unreduced over, so the local "
                  "products would not add up to the product; fix: reduce the partial operand "
                  "first with ts::reshard<Spec>(x) or ts::psum<\"axis\">(x)");
    return true;
  }
};

template <std::size_t Unused>
struct matmul_too_many_partial_axes {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Unused>,
                  "typeshard: rule 3 (unreduced): the product would be a partial sum over more "
                  "than 4 mesh axes (the contraction's and the operands' unreduced axes); fix: "
                  "reduce an operand first with ts::reshard<Spec>(x)");
    return true;
  }
};

template <class Unreduced>
struct to_host_unreduced {
  static constexpr bool fire() {
    static_assert(detail::always_false<Unreduced>,
                  "typeshard: rule 3 (unreduced): to_host of a value that is still a partial sum "
                  "over some mesh axis; fix: reduce it first with ts::reshard<Spec>(x) or "
                  "ts::psum<\"axis\">(x)");
    return true;
  }
};

// ts::device_put<Spec>(x, mesh) onto another mesh type (ops/move.hpp): the move copies boxes
// of the shards, it does not sum partial sums.
template <class Unreduced>
struct move_unreduced {
  static constexpr bool fire() {
    static_assert(detail::always_false<Unreduced>,
                  "typeshard: rule 3 (unreduced): ts::device_put onto another mesh of a value "
                  "that is still a partial sum over some mesh axis (a move copies shards, it "
                  "does not sum them); fix: reduce it first with ts::reshard<Spec>(x) or "
                  "ts::psum<\"axis\">(x), then move it");
    return true;
  }
};

// ts::checkpoint::save's item (ops/checkpoint.hpp): a checkpoint holds values, not partial sums.
template <class Unreduced>
struct checkpoint_unreduced {
  static constexpr bool fire() {
    static_assert(detail::always_false<Unreduced>,
                  "typeshard: rule 3 (unreduced): saving a checkpoint of a value that is still "
                  "a partial sum over some mesh axis; fix: reduce it first with "
                  "ts::reshard<Spec>(x) or ts::psum<\"axis\">(x), then save it");
    return true;
  }
};

}  // namespace typeshard::diagnostic
