// typeshard/plan/softmax_plan.hpp: the compile-time plan of ts::softmax<Dim> and
// ts::log_softmax<Dim> (DESIGN rule 7: the reductions' collectives are in the plan).
//
//   using X = ts::sharded_array<float, mesh_2x2, ts::spec<"x", "y">, ts::dextents<2>>;
//   using plan = ts::softmax_plan_for<X, 1>;          // along dimension 1, sharded over y
//   static_assert(plan::steps[1].kind == ts::step_kind::pmax);
//   static_assert(plan::steps[3].kind == ts::step_kind::psum);
//   plan::describe();  // "local reduce(out); pmax(out, over y); local reduce(out);
//                      //  psum(out, over y); local elementwise"
//
// Numerically stable: m = max along Dim, then softmax = exp(x - m) / sum(exp(x - m)) and
// log_softmax = (x - m) - log(sum(exp(x - m))). Each device computes its block's row
// statistics (`local_reduce` steps on the `out` operand: a row maximum, then a row sum of
// exponentials); along a dimension sharded over axes A they are partial over A, so a pmax
// and a psum over A (all-reduces of one value per row) complete them. The result has the
// input's spec; along an unsharded dimension the plan is communication-free. An empty block
// (uneven shards) contributes the identities (-inf, 0). Elements: float, double, long double
// or bfloat16 (its row statistics are accumulated, and all-reduced, in float).
//
//   softmax_plan<Mesh, Spec, Extents, T = float, Unreduced = unreduced<>, Log = false, Dim>
//   softmax_plan_for<X, Dim, Log = false>
//
// Members: valid, dim (non-negative), partial_axes, stats_spec (the row statistics' sharding,
// Dim none), out_spec, out_unreduced, steps, communicates, collectives, describe().
//
// Compile-time vocabulary only: no runtime header is included.
#pragma once

#include <array>
#include <cstddef>
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

template <class Mesh, class Spec, std::size_t Rank, class T, class U, int Dim>
constexpr bool check_softmax_inputs() {
  constexpr reduce_dims_problem p = find_reduce_dims_problem<Rank, Dim>();
  if constexpr (p.what != reduce_dims_problem::none) {
    return require<false, diagnostic::reduce_dim_out_of_range<Dim, Rank>>::value && false;
  } else if constexpr (!is_floating_element_v<T>) {
    return require<false, diagnostic::mean_needs_floating_point<T>>::value && false;
  } else if constexpr (!U::empty) {
    return require<false, diagnostic::nonlinear_op_on_unreduced<U>>::value && false;
  } else {
    return check_spec<Mesh, Spec, Rank>();
  }
}

template <std::size_t Rank>
constexpr step_array<Rank, 5> softmax_steps(const spec_array<Rank>& in, std::size_t dim) {
  step_array<Rank, 5> out;
  std::array<bool, Rank> mask{};
  mask[dim] = true;
  const dim_spec partial = partial_axes_of(in, mask);
  const spec_array<Rank> stats = without_reduced(in, mask);
  const bool sharded = partial.count != 0;
  out.push(step<Rank>{step_kind::local_reduce, step_operand::out, dim, dim, partial, stats,
                      partial});
  if (sharded)
    out.push(step<Rank>{step_kind::pmax, step_operand::out, dim, dim, partial, stats, dim_spec{}});
  out.push(step<Rank>{step_kind::local_reduce, step_operand::out, dim, dim, partial, stats,
                      partial});
  if (sharded)
    out.push(step<Rank>{step_kind::psum, step_operand::out, dim, dim, partial, stats, dim_spec{}});
  out.push(step<Rank>{step_kind::local_elementwise, step_operand::array, dim, dim, dim_spec{}, in,
                      dim_spec{}});
  return out;
}

}  // namespace detail

template <mesh_type Mesh, spec_type Spec, extents_type Extents, class T = float,
          unreduced_type Unreduced = unreduced<>, bool Log = false, int Dim = -1>
struct softmax_plan {
  static constexpr std::size_t rank = Extents::rank;
  static constexpr bool log = Log;
  using mesh_type = Mesh;
  using value_type = T;

  // Whether the inputs satisfy rules 1, 3 and 7 (else exactly one diagnostic fired).
  static constexpr bool valid = detail::check_softmax_inputs<Mesh, Spec, rank, T, Unreduced, Dim>();

  // The dimension, counted from the front.
  static constexpr std::size_t dim = [] {
    const long long d = Dim < 0 ? Dim + static_cast<long long>(rank) : Dim;
    return d >= 0 && d < static_cast<long long>(rank) ? static_cast<std::size_t>(d) : rank - 1;
  }();

  using out_spec = typename detail::padded_spec<Spec, rank>::type;
  using out_unreduced = unreduced<>;
  using stats_spec = typename detail::reduce_spec_types<out_spec, rank, struct auto_out, false,
                                                        true, static_cast<int>(dim)>::local_type;

 private:
  static constexpr detail::step_array<rank, 5> list_ =
      detail::softmax_steps(detail::spec_array_of<out_spec, rank>(), dim);

 public:
  // The mesh axes Dim is sharded over: the row statistics are all-reduced over them.
  static constexpr dim_spec partial_axes = list_.steps[0].axes;

  static constexpr std::array<step<rank>, list_.count> steps =
      detail::take_steps<list_.count>(list_);
  static constexpr std::size_t collectives = detail::count_collectives(steps);
  static constexpr bool communicates = collectives != 0;

  static std::string describe() {
    return detail::describe_calls(steps);
  }
};

// softmax_plan_for<X, Dim[, Log]>: the plan ts::softmax<Dim>(x) (Log: ts::log_softmax) runs.
template <class X, int Dim, bool Log = false>
using softmax_plan_for = softmax_plan<typename X::mesh_type, typename X::spec,
                                      typename X::extents_type, typename X::value_type,
                                      typename X::unreduced_type, Log, Dim>;

}  // namespace typeshard
