// typeshard/plan/softmax_plan.hpp: the compile-time plan of ts::softmax<Dim> and
// ts::log_softmax<Dim> (DESIGN rule 7: the reductions' collectives are in the plan).
//
//   using X = ts::sharded_array<float, mesh_2x2, ts::spec<"x", "y">, ts::dextents<2>>;
//   using plan = ts::softmax_plan_for<X, 1>;          // along dimension 1, sharded over y
//   static_assert(plan::steps[1].kind == ts::step_kind::pmax);
//   static_assert(plan::steps[3].kind == ts::step_kind::psum);
//   plan::describe();  // "local reduce(stats); pmax(stats, over y); local reduce(stats);
//                      //  psum(stats, over y); local elementwise"
//
// Numerically stable: m = max along Dim, then softmax = exp(x - m) / sum(exp(x - m)) and
// log_softmax = (x - m) - log(sum(exp(x - m))). Each device computes its block's row
// statistics (`local_reduce` steps on the `stats` operand: local_op::row_max, then
// local_op::row_exp_sum); along a dimension sharded over axes A they are partial over A, so a
// pmax and a psum over A (all-reduces of one value per row: slot 0, then slot 1) complete them;
// the normalisation is a `local_elementwise` step (local_op::softmax_normalize or
// log_softmax_normalize) on the array. The result has the
// input's spec; along an unsharded dimension the plan is communication-free. An empty block
// (uneven shards) contributes the identities (-inf, 0). Elements: float, double, long double
// or bfloat16 (its row statistics are accumulated, and all-reduced, in float).
//
//   softmax_plan<Mesh, Spec, Extents, T = float, Unreduced = unreduced<>, Log = false, Dim>
//   softmax_plan_for<X, Dim, Log = false>
//
// Members: valid, dim (non-negative), partial_axes, stats_spec (the row statistics' sharding,
// Dim none), out_spec, out_unreduced, steps, communicates, collectives, bytes_per_device
// (static extents), describe(). A ts::plan_like (plan/plan_like.hpp).
//
// Compile-time vocabulary only: no runtime header is included.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>

#include "../core/bfloat16.hpp"
#include "../core/detail/diagnose.hpp"
#include "../core/extents.hpp"
#include "../core/mesh.hpp"
#include "../core/rules/rule3_unreduced.hpp"
#include "../core/rules/rule7_reduce.hpp"
#include "../core/spec.hpp"
#include "../core/unreduced.hpp"
#include "reduce_plan.hpp"
#include "step.hpp"

namespace typeshard {

namespace detail {

// One row statistic of a row operation: its local kernel (local_op::none: no statistic) and
// the all-reduce completing it along a sharded dimension, with the slots that all-reduce takes.
struct row_stat {
  local_op op = local_op::none;
  step_kind collective = step_kind::psum;
  std::size_t slots = 0;
};

// The steps of a row operation along `dim` of an array sharded as `in`: for each statistic, a
// `local_reduce` on the `stats` operand and, along a sharded dimension, its all-reduce; then
// the `finish` pass (a `local_elementwise` step on the array).
template <std::size_t Rank>
constexpr step_array<Rank, 5> row_op_steps(const spec_array<Rank>& in, std::size_t dim,
                                           row_stat first, row_stat second, local_op finish) {
  step_array<Rank, 5> out;
  std::array<bool, Rank> mask{};
  mask[dim] = true;
  const dim_spec partial = partial_axes_of(in, mask);
  const spec_array<Rank> stats = without_reduced(in, mask);
  for (const row_stat& r : {first, second}) {
    if (r.op == local_op::none) continue;
    out.push(step<Rank>{step_kind::local_reduce, step_operand::stats, dim, dim, partial, stats,
                        partial, r.op, reduction{}, {}, 0});
    if (partial.count != 0)
      out.push(step<Rank>{r.collective, step_operand::stats, dim, dim, partial, stats,
                          dim_spec{}, local_op::none, reduction{}, {}, r.slots});
  }
  out.push(step<Rank>{step_kind::local_elementwise, step_operand::array, dim, dim, dim_spec{}, in,
                      dim_spec{}, finish});
  return out;
}

// softmax's steps (Log: log_softmax's): the row maximum, its pmax, the row sum of exp(x -
// max), its psum, then the normalisation.
template <bool Log>
struct softmax_steps {
  template <std::size_t Rank>
  static constexpr step_array<Rank, 5> of(const spec_array<Rank>& in, std::size_t dim) {
    return row_op_steps(in, dim, {local_op::row_max, step_kind::pmax, stats_slot0},
                        {local_op::row_exp_sum, step_kind::psum, stats_slot1},
                        Log ? local_op::log_softmax_normalize : local_op::softmax_normalize);
  }
};

// The rules of a row operation (rules 1, 3 and 7): one diagnostic fires at most; NotFloating<T>
// is the operation's own for a non floating-point T.
template <class Mesh, class Spec, std::size_t Rank, class T, class U, int Dim,
          template <class> class NotFloating>
constexpr bool check_row_op_inputs() {
  constexpr reduce_dims_problem p = find_reduce_dims_problem<Rank, Dim>();
  if constexpr (p.what != reduce_dims_problem::none) {
    return require<false, diagnostic::reduce_dim_out_of_range<Dim, Rank>>::value && false;
  } else if constexpr (!is_floating_element_v<T>) {
    return require<false, NotFloating<T>>::value && false;
  } else if constexpr (!U::empty) {
    return require<false, diagnostic::nonlinear_op_on_unreduced<U>>::value && false;
  } else {
    return check_spec<Mesh, Spec, Rank>();
  }
}

// Bytes received per device by a row operation's collectives along `dim` (one accumulator
// value per row: float for bfloat16), with static extents; 0 when an extent is dynamic.
template <class Mesh, class Extents, class T, std::size_t Rank, std::size_t N>
constexpr std::size_t row_op_bytes(const std::array<step<Rank>, N>& steps, bool valid,
                                   std::size_t dim) {
  if constexpr (Extents::all_static) {
    if (!valid) return 0;
    shape<Rank> g{};
    for (std::size_t d = 0; d < Rank; ++d) g[d] = d == dim ? 1 : Extents::static_extents[d];
    const std::size_t acc = std::is_same_v<T, bfloat16> ? sizeof(float) : sizeof(T);
    return static_cast<std::size_t>(
        bytes_received<Mesh>(steps, steps[0].spec_after, g, acc) + 0.5);
  } else {
    return 0;
  }
}

// The plan of a row operation (softmax, log_softmax, layer_norm): its rules' check (rules 1,
// 3 and 7; NotFloating<T> the diagnostic of a non floating-point T), the dimension counted
// from the front, the result's sharding (the input's) and its steps, Steps::of(spec, dim).
template <class Mesh, class Spec, class Extents, class T, class Unreduced, int Dim,
          template <class> class NotFloating, class Steps>
struct row_plan_base {
  static constexpr std::size_t rank = Extents::rank;
  using mesh_type = Mesh;
  using value_type = T;

  // Whether the inputs satisfy rules 1, 3 and 7 (else exactly one diagnostic fired).
  static constexpr bool valid =
      check_row_op_inputs<Mesh, Spec, rank, T, Unreduced, Dim, NotFloating>();

  // The dimension, counted from the front.
  static constexpr std::size_t dim = [] {
    const long long d = Dim < 0 ? Dim + static_cast<long long>(rank) : Dim;
    return d >= 0 && d < static_cast<long long>(rank) ? static_cast<std::size_t>(d) : rank - 1;
  }();

  using out_spec = typename padded_spec<Spec, rank>::type;
  using out_unreduced = unreduced<>;

 private:
  static constexpr step_array<rank, 5> list_ =
      Steps::template of<rank>(spec_array_of<out_spec, rank>(), dim);

 public:
  // The mesh axes Dim is sharded over: the row statistics are all-reduced over them.
  static constexpr dim_spec partial_axes = list_.steps[0].axes;

  static constexpr std::array<step<rank>, list_.count> steps = take_steps<list_.count>(list_);
  static constexpr std::size_t collectives = count_collectives(steps);
  static constexpr bool communicates = collectives != 0;
  static constexpr std::size_t bytes_per_device =
      row_op_bytes<Mesh, Extents, T>(steps, valid, dim);

  // The steps for given extents: the same whatever they are.
  static constexpr std::span<const step<rank>> steps_for(const shape<rank>&) {
    return std::span<const step<rank>>(steps);
  }

  static std::string describe() { return describe_calls(steps); }
};

}  // namespace detail

template <mesh_like Mesh, spec_like Spec, extents_like Extents, class T = float,
          unreduced_like Unreduced = unreduced<>, bool Log = false, int Dim = -1>
struct softmax_plan
    : detail::row_plan_base<Mesh, Spec, Extents, T, Unreduced, Dim,
                            diagnostic::mean_needs_floating_point, detail::softmax_steps<Log>> {
 private:
  using base =
      detail::row_plan_base<Mesh, Spec, Extents, T, Unreduced, Dim,
                            diagnostic::mean_needs_floating_point, detail::softmax_steps<Log>>;

 public:
  static constexpr bool log = Log;
  using stats_spec =
      typename detail::reduce_spec_types<typename base::out_spec, base::rank, struct auto_out,
                                         false, true, static_cast<int>(base::dim)>::local_type;
  // partial_axes, steps, collectives, communicates, bytes_per_device, steps_for, describe():
  // from detail::row_plan_base, shared with layer_norm_plan.
};

// softmax_plan_for<X, Dim[, Log]>: the plan ts::softmax<Dim>(x) (Log: ts::log_softmax) runs.
template <class X, int Dim, bool Log = false>
using softmax_plan_for = softmax_plan<typename X::mesh_type, typename X::spec,
                                      typename X::extents_type, typename X::value_type,
                                      typename X::unreduced_type, Log, Dim>;

}  // namespace typeshard
