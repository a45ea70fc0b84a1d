// typeshard/plan/reduce_plan.hpp: the compile-time plan of a reduction (DESIGN rule 7).
//
//   using X = ts::sharded_array<float, mesh_2x2, ts::spec<"x", "y">, ts::dextents<2>>;
//   using plan = ts::reduce_plan_for<ts::reduction::sum, X, 1>;       // ts::sum<1>(x)
//   static_assert(std::is_same_v<plan::out_spec, ts::spec<"x">>);
//   static_assert(std::is_same_v<plan::out_unreduced, ts::unreduced<"y">>);
//   static_assert(ts::communication_free<plan>);                       // sums stay partial
//   using pmax = ts::reduce_plan_for<ts::reduction::max, X, 1>;        // ts::max<1>(x)
//   static_assert(pmax::steps[1].kind == ts::step_kind::pmax);         // all-reduce max over y
//   pmax::describe();   // "local reduce(array); pmax(array, over y)"
//
// A reduction over dimensions D of an array sharded by S: every device reduces its own block
// over D (a `local_reduce` step); the block of a dimension sharded over axes A holds part of
// it, so the local result is partial over A (the partial axes: those of every dimension in
// D). Then:
//   - sum, mean: the result is unreduced over the partial axes (plus the input's own
//     unreduced axes: a sum is linear), no communication; ts::reshard reduces it when the
//     caller wants. mean scales each partial sum by 1 / (the GLOBAL count of the reduced
//     elements), so uneven shards give the right mean and the scaling commutes with the sum.
//   - max, min: a pmax / pmin (all-reduce max / min) over the partial axes, so the result is
//     replicated over them; an empty block (uneven shards) contributes the identity (-inf for
//     max). max and min are not linear: an unreduced input is a rule 3 error.
//   - with an output spec named (ts::sum<OutSpec, Dims...>(x)), the result is then resharded
//     to it, fully reduced: the steps of the reshard plan (psum, psum_scatter, gathers,
//     slices) follow, as ts::matmul<OutSpec> reduces its partial sums.
// The plan works at the input's rank, the reduced dimensions kept with extent 1 and spec
// none; the result drops them unless ts::keep_dims is passed (no copy: a kept dimension of
// extent 1 does not change the layout). A reduction over every dimension without keep_dims
// gives a rank-0 array (out_spec ts::spec<>, out_extents ts::extents<>), as in JAX; with
// keep_dims, the input's rank with every extent 1.
//
//   reduce_plan<Op, Mesh, Spec, Extents, T = float, Unreduced = unreduced<>,
//               OutSpec = ts::auto_out, KeepDims = false, Dims...>   // Dims: none = all
//   reduce_plan_for<Op, X, Dims...>                  // what ts::sum<Dims...>(x) runs
//   reduce_plan_with<Op, X, OutSpec, KeepDims, Dims...>
//
// Members: valid, reduced (the mask of reduced dimensions), partial_axes, local_spec (after
// the local reduction, at the input's rank), out_spec, out_unreduced, out_extents, steps
// (std::array<ts::step<rank>, N>), even_steps / uneven_steps (as reshard plans: which runs
// is decided by the extents), communicates, collectives, bytes_per_device / flops_per_device
// (static extents), describe(). ts::communication_free holds when no collective runs.
//
// Compile-time vocabulary only: no runtime header is included.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "../core/bfloat16.hpp"
#include "../core/detail/diagnose.hpp"
#include "../core/detail/spec_layout.hpp"
#include "../core/detail/unreduced_from.hpp"
#include "../core/extents.hpp"
#include "../core/mesh.hpp"
#include "../core/rules/rule3_unreduced.hpp"
#include "../core/rules/rule7_reduce.hpp"
#include "../core/spec.hpp"
#include "../core/unreduced.hpp"
#include "detail/reduce_dims.hpp"
#include "reshard_plan.hpp"
#include "step.hpp"

namespace typeshard {

// reduction: what a reduction computes.
enum class reduction { sum, mean, max, min };

constexpr const char* to_string(reduction r) {
  switch (r) {
    case reduction::sum: return "sum";
    case reduction::mean: return "mean";
    case reduction::max: return "max";
    case reduction::min: return "min";
  }
  return "?";
}

// keep_dims: pass it to keep the reduced dimensions, with extent 1 (NumPy's keepdims=True).
struct keep_dims_t {
  explicit constexpr keep_dims_t() = default;
};
inline constexpr keep_dims_t keep_dims{};

// The tag "no output spec named" (defined in plan/einsum_plan.hpp; a tag needs no body).
struct auto_out;

namespace detail {

// Checks a reduction's inputs; fires exactly one diagnostic and returns false on the first
// problem (in the order a reader would fix them).
template <reduction Op, class Mesh, class Spec, std::size_t Rank, class T, class U, class OutSpec,
          std::size_t OutRank, int... Dims>
constexpr bool check_reduce_inputs() {
  constexpr reduce_dims_problem p = find_reduce_dims_problem<Rank, Dims...>();
  if constexpr (p.what == reduce_dims_problem::out_of_range) {
    return require<false, diagnostic::reduce_dim_out_of_range<p.dim, Rank>>::value && false;
  } else if constexpr (p.what == reduce_dims_problem::repeated) {
    return require<false, diagnostic::reduce_dim_repeated<p.dim>>::value && false;
  } else if constexpr (Op == reduction::mean && !is_floating_element_v<T>) {
    return require<false, diagnostic::mean_needs_floating_point<T>>::value && false;
  } else if constexpr ((Op == reduction::max || Op == reduction::min) && !U::empty) {
    return require<false, diagnostic::nonlinear_op_on_unreduced<U>>::value && false;
  } else if constexpr (!check_spec<Mesh, Spec, Rank>()) {
    return false;  // rule 1 fired
  } else if constexpr (U::size + partial_axis_count(spec_array_of<Spec, Rank>(),
                                                    reduced_mask<Rank, Dims...>()) >
                       dim_spec::max_axes) {
    constexpr std::size_t axes =
        U::size + partial_axis_count(spec_array_of<Spec, Rank>(), reduced_mask<Rank, Dims...>());
    return require<false, diagnostic::too_many_unreduced_axes<axes>>::value && false;
  } else if constexpr (!std::is_same_v<OutSpec, auto_out>) {
    return check_spec<Mesh, OutSpec, OutRank>();  // rule 1 on the named output spec
  } else {
    return true;
  }
}

// The plan's first steps: the local reduction and, for max and min, the collective.
template <std::size_t Rank>
constexpr step_array<Rank, 2> reduce_prefix(reduction op, const spec_array<Rank>& in,
                                            const std::array<bool, Rank>& mask,
                                            const dim_spec& unreduced) {
  step_array<Rank, 2> out;
  const dim_spec partial = partial_axes_of(in, mask);
  const spec_array<Rank> local = without_reduced(in, mask);
  std::size_t first = 0;
  while (first + 1 < Rank && !mask[first]) ++first;
  const bool linear = op == reduction::sum || op == reduction::mean;
  out.push(step<Rank>{step_kind::local_reduce, step_operand::array, first, first, partial, local,
                      linear ? join_axes(unreduced, partial) : partial, local_op::reduce, op,
                      mask});
  if (!linear && partial.count != 0)
    out.push(step<Rank>{op == reduction::max ? step_kind::pmax : step_kind::pmin,
                        step_operand::array, first, first, partial, local, dim_spec{}});
  return out;
}

template <std::size_t Rank, std::size_t N, std::size_t M>
constexpr std::array<step<Rank>, N + M> concat_steps(const std::array<step<Rank>, N>& a,
                                                     const std::array<step<Rank>, M>& b) {
  std::array<step<Rank>, N + M> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = a[i];
  for (std::size_t i = 0; i < M; ++i) out[N + i] = b[i];
  return out;
}

// Bytes received per device by a plan's collectives on an array of global extents `global`
// (the keep-dims shape: what the collectives move), as every plan counts them
// (elements_received, plan/step.hpp).
template <class Mesh, std::size_t Rank, std::size_t N>
constexpr double bytes_received(const std::array<step<Rank>, N>& steps, spec_array<Rank> cur,
                                const shape<Rank>& global, std::size_t element_size) {
  double bytes = 0;
  for (const step<Rank>& s : steps) {
    double block = 1;
    for (std::size_t e : block_shape_of<Mesh>(cur, global)) block *= static_cast<double>(e);
    const double n = static_cast<double>(shards_of<Mesh>(s.axes));
    const double moved = elements_received(s.kind, n, block);
    bytes += moved * static_cast<double>(element_size);
    cur = s.spec_after;
  }
  return bytes;
}

}  // namespace detail

template <reduction Op, mesh_like Mesh, spec_like Spec, extents_like Extents, class T = float,
          unreduced_like Unreduced = unreduced<>, class OutSpec = auto_out, bool KeepDims = false,
          int... Dims>
struct reduce_plan {
  static constexpr std::size_t rank = Extents::rank;
  static constexpr reduction op = Op;
  static constexpr bool keeps_dims = KeepDims;
  static constexpr bool out_named = !std::is_same_v<OutSpec, auto_out>;
  using mesh_type = Mesh;
  using value_type = T;
  using in_spec = typename detail::padded_spec<Spec, rank>::type;

  // Which dimensions are reduced, and which the result keeps.
  static constexpr std::array<bool, rank> reduced = detail::reduced_mask<rank, Dims...>();
  static constexpr detail::kept_dims<rank> kept = detail::kept_dims_of<rank>(reduced, KeepDims);
  static constexpr std::size_t out_rank = kept.count;

  // Whether the inputs satisfy rules 1, 3 and 7 (else exactly one diagnostic fired).
  static constexpr bool valid =
      detail::check_reduce_inputs<Op, Mesh, Spec, rank, T, Unreduced, OutSpec, out_rank,
                                  Dims...>();

 private:
  static constexpr detail::spec_array<rank> in_ = detail::spec_array_of<in_spec, rank>();
  static constexpr detail::step_array<rank, 2> prefix_ =
      detail::reduce_prefix(Op, in_, reduced, detail::unreduced_list<Unreduced>());
  static constexpr dim_spec after_prefix_ = prefix_.steps[prefix_.count - 1].unreduced_after;
  using spec_types = detail::reduce_spec_types<in_spec, rank, OutSpec, out_named && valid,
                                               KeepDims, Dims...>;

 public:
  // The mesh axes of the reduced dimensions: the local results are partial over them.
  static constexpr dim_spec partial_axes = detail::partial_axes_of(in_, reduced);

  // The sharding after the local reduction, at the input's rank (reduced dimensions none).
  using local_spec = typename spec_types::local_type;
  // The result at the input's rank (reduced dimensions extent 1), before dropping them.
  using keep_extents = typename detail::reduce_extents<Extents, KeepDims, Dims...>::keep_type;
  using keep_spec = typename spec_types::target_type;
  using keep_unreduced = std::conditional_t<
      out_named, unreduced<>,
      decltype(detail::unreduced_from<after_prefix_>(
          std::make_index_sequence<after_prefix_.count>{}))>;

  // The result's type: out_spec, out_unreduced, out_extents (rank out_rank).
  using out_spec = typename spec_types::out_type;
  using out_unreduced = keep_unreduced;
  using out_extents = typename detail::reduce_extents<Extents, KeepDims, Dims...>::out_type;

  // The reshard that follows the local steps when an output spec is named (else empty).
  using out_reshard = reshard_plan<
      Mesh, local_spec, keep_spec, keep_extents,
      decltype(detail::unreduced_from<after_prefix_>(
          std::make_index_sequence<after_prefix_.count>{}))>;

  // The local reduction (and the pmax / pmin of max and min), then the reshard's steps: when
  // the shards divide evenly, when they do not, and the ones the extents select (as
  // reshard_plan: with dynamic extents the run time picks even_steps or uneven_steps).
  static constexpr std::array<step<rank>, prefix_.count> local_steps =
      detail::take_steps<prefix_.count>(prefix_);
  static constexpr auto even_steps = [] {
    if constexpr (out_named && valid)
      return detail::concat_steps(local_steps, out_reshard::even_steps);
    else
      return local_steps;
  }();
  static constexpr auto uneven_steps = [] {
    if constexpr (out_named && valid)
      return detail::concat_steps(local_steps, out_reshard::uneven_steps);
    else
      return local_steps;
  }();
  static constexpr auto steps = [] {
    if constexpr (out_named && valid)
      return detail::concat_steps(local_steps, out_reshard::steps);
    else
      return local_steps;
  }();

  // The steps for given input extents: even_steps when the kept extents divide evenly by the
  // local and the output sharding, else uneven_steps (what the run picks).
  static constexpr std::span<const step<rank>> steps_for(const shape<rank>& global) {
    shape<rank> kept = global;
    for (std::size_t d = 0; d < rank; ++d)
      if (reduced[d]) kept[d] = 1;
    if (detail::is_even<Mesh>(detail::spec_array_of<local_spec, rank>(), kept) &&
        detail::is_even<Mesh>(detail::spec_array_of<keep_spec, rank>(), kept))
      return std::span<const step<rank>>(even_steps);
    return std::span<const step<rank>>(uneven_steps);
  }

  // How many collectives run, and whether any may (for dynamic extents: in either variant).
  static constexpr std::size_t collectives = detail::count_collectives(steps);
  static constexpr bool communicates = detail::count_collectives(even_steps) != 0 ||
                                       detail::count_collectives(uneven_steps) != 0;

  // With static extents: bytes received per device by the collectives, and the local
  // reduction's operations per device (one per element of the largest block); 0 when an
  // extent is dynamic.
  static constexpr bool extents_static = Extents::all_static;
  static constexpr std::size_t bytes_per_device = [] {
    if constexpr (extents_static && valid) {
      shape<rank> g{};
      for (std::size_t d = 0; d < rank; ++d) g[d] = keep_extents::static_extents[d];
      return static_cast<std::size_t>(
          detail::bytes_received<Mesh>(steps, detail::spec_array_of<local_spec, rank>(), g,
                                       sizeof(T)) +
          0.5);
    } else {
      return std::size_t{0};
    }
  }();
  static constexpr double flops_per_device = [] {
    if constexpr (extents_static && valid) {
      shape<rank> g{};
      for (std::size_t d = 0; d < rank; ++d) g[d] = Extents::static_extents[d];
      double n = 1;
      for (std::size_t e : detail::block_shape_of<Mesh>(detail::spec_array_of<in_spec, rank>(), g))
        n *= static_cast<double>(e);
      return n;
    } else {
      return 0.0;
    }
  }();

  // "local reduce(array); pmax(array, over y)".
  static std::string describe() {
    return detail::describe_calls(steps);
  }
};

// reduce_plan_for<Op, X, Dims...>: the plan ts::sum<Dims...>(x) (mean, max, min) runs on an
// array of type X; reduce_plan_with names the output spec (or ts::auto_out) and keep_dims.
template <reduction Op, class X, int... Dims>
using reduce_plan_for =
    reduce_plan<Op, typename X::mesh_type, typename X::spec, typename X::extents_type,
                typename X::value_type, typename X::unreduced_type, auto_out, false, Dims...>;
template <reduction Op, class X, class OutSpec, bool KeepDims, int... Dims>
using reduce_plan_with =
    reduce_plan<Op, typename X::mesh_type, typename X::spec, typename X::extents_type,
                typename X::value_type, typename X::unreduced_type, OutSpec, KeepDims, Dims...>;

}  // namespace typeshard
