// typeshard/core/rules/rule7_reduce.hpp: the messages of rule 7 (reductions): ts::sum, mean,
// max, min, softmax, log_softmax and layer_norm name dimensions that exist, each once.
//
// Checked in: plan/reduce_plan.hpp (detail::check_reduce_inputs) and plan/softmax_plan.hpp
// (detail::check_row_op_inputs, for softmax, log_softmax and layer_norm).
// Compile-fail tests: tests/compile_fail/rule7_*.cpp. Table: docs/rules.md.
// Each message is a class template in ts::diagnostic whose fire() holds the static_assert;
// a check instantiates it through detail::require (core/detail/diagnose.hpp).
#pragma once

#include <cstddef>

#include "../detail/diagnose.hpp"

namespace typeshard::diagnostic {

template <int Dim, std::size_t Rank>
struct reduce_dim_out_of_range {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<static_cast<std::size_t>(Dim), Rank>,
                  "typeshard: rule 7 (reductions): a dimension index is out of range for the "
                  "array's rank; fix: name dimensions 0 to rank - 1 (or -1 to -rank, counted "
                  "from the last, as NumPy does)");
    return true;
  }
};

template <int Dim>
struct reduce_dim_repeated {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<static_cast<std::size_t>(Dim)>,
                  "typeshard: rule 7 (reductions): a dimension is named more than once; fix: "
                  "name each dimension to reduce once (ts::sum<0, 1>(x), not ts::sum<0, 0>(x); "
                  "-1 and rank - 1 are the same dimension)");
    return true;
  }
};

template <class T>
struct mean_needs_floating_point {
  static constexpr bool fire() {
    static_assert(detail::always_false<T>,
                  "typeshard: rule 7 (reductions): ts::mean, ts::softmax and ts::log_softmax "
                  "need floating-point elements (an integer mean would truncate); fix: convert "
                  "first, ts::map(x, [](auto v) { return double(v); })");
    return true;
  }
};

template <class T>
struct layer_norm_needs_floating_point {
  static constexpr bool fire() {
    static_assert(detail::always_false<T>,
                  "typeshard: rule 7 (reductions): ts::layer_norm needs floating-point elements "
                  "(an integer mean and variance would truncate); fix: convert first, "
                  "ts::map(x, [](auto v) { return double(v); })");
    return true;
  }
};

}  // namespace typeshard::diagnostic
