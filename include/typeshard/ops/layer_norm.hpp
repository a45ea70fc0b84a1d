// typeshard/ops/layer_norm.hpp: layer normalisation along one dimension of a sharded array,
// without gains (flax.linen.LayerNorm(use_scale=False, use_bias=False), reduction_axes=Dim).
//
//   auto y = ts::layer_norm<-1>(h, 1e-5f);   // h: spec<"data", none, none> [B, S, D]
//   auto z = ts::layer_norm<1>(x);           // x: spec<none, "model">: psums over "model"
//   using plan = ts::layer_norm_plan_for<decltype(x), 1>;   // inspect it
//   plan::describe();  // "local reduce(stats); psum(stats, over model); local reduce(stats);
//                      //  psum(stats, over model); local elementwise"
//
// y = (x - mean) / sqrt(var + eps), mean and (biased) variance along Dim (a NumPy axis number, -1
// the last). The plan's steps run in the one executor (ops/detail/executor.hpp), whose row kernels
// (ops/detail/row_kernels.hpp, kernels/layer_norm_row.hpp) compute the mean, then the sum of
// squared deviations from it (two passes, no cancellation), then the normalise pass; with no psum
// between them, each row whole at once, staying in cache. Along a dimension sharded over axes A the
// row sums are partial over A: each is completed by a psum over A (an all-reduce of one value per
// row), so the plan has two psums; along an unsharded dimension it is communication-free. The
// result has the input's spec. Floating-point elements only (float, double, bfloat16); bfloat16
// rows are computed in a float copy of the row and each result rounded once. An unreduced input
// does not compile (rule 3: not linear); nor does a Dim out of range (rule 7).
//
// On traced values (ops/detail/traced_layer_norm.hpp) the backward is one fused row pass too:
//   dx = (g - mean(g) - y * mean(g * y)) / sqrt(var + eps)
// with both row sums in one pass and one psum (of the two sums together) where Dim is sharded
// (plan::backward_steps, plan::describe_backward()).
//
//   layer_norm_plan<Mesh, Spec, Extents, T = float, Unreduced = unreduced<>, Dim = -1>
//   layer_norm_plan_for<X, Dim>
//   layer_norm<Dim = -1>(x, eps = 1e-6)   (Flax's default epsilon; ts::layer_norm<>(x) for -1)
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../array/sharded_array.hpp"
#include "../backend/backend.hpp"
#include "../core/bfloat16.hpp"
#include "../core/detail/mesh_value.hpp"
#include "../core/rules/rule7_reduce.hpp"
#include "../array/detail/buffer.hpp"
#include "../plan/reduce_plan.hpp"
#include "../plan/softmax_plan.hpp"
#include "../plan/step.hpp"
#include "detail/forward_value.hpp"
#include "detail/row_kernels.hpp"
#include "detail/row_steps.hpp"

namespace typeshard {

namespace detail {

// The forward: a row sum, its psum, a row sum of squared deviations, its psum, the normalise
// pass (eps: the run's scalar 0). The backward: the row sums of g and g * y (one pass), their
// psum (both slots at once), the dx pass. The psums only along a sharded dimension.
template <bool Backward>
struct layer_norm_steps {
  template <std::size_t Rank>
  static constexpr step_array<Rank, 5> of(const spec_array<Rank>& in, std::size_t dim) {
    if (Backward)
      return row_op_steps(in, dim, {local_op::layer_norm_grad_sums, step_kind::psum, stats_both},
                          {}, local_op::layer_norm_grad);
    return row_op_steps(in, dim, {local_op::row_sum, step_kind::psum, stats_slot0},
                        {local_op::row_sq_dev_sum, step_kind::psum, stats_slot1},
                        local_op::layer_norm_normalize);
  }
};

}  // namespace detail

template <mesh_like Mesh, spec_like Spec, extents_like Extents, class T = float,
          unreduced_like Unreduced = unreduced<>, int Dim = -1>
struct layer_norm_plan
    : detail::row_plan_base<Mesh, Spec, Extents, T, Unreduced, Dim,
                            diagnostic::layer_norm_needs_floating_point,
                            detail::layer_norm_steps<false>> {
 private:
  using base = detail::row_plan_base<Mesh, Spec, Extents, T, Unreduced, Dim,
                                     diagnostic::layer_norm_needs_floating_point,
                                     detail::layer_norm_steps<false>>;
  static constexpr detail::step_array<base::rank, 5> back_ =
      detail::layer_norm_steps<true>::of<base::rank>(
          detail::spec_array_of<typename base::out_spec, base::rank>(), base::dim);

 public:
  // partial_axes, steps, collectives, communicates, bytes_per_device, steps_for, describe():
  // from detail::row_plan_base, shared with softmax_plan.
  static constexpr std::array<step<base::rank>, back_.count> backward_steps =
      detail::take_steps<back_.count>(back_);
  static std::string describe_backward() { return detail::describe_calls(backward_steps); }
};

// layer_norm_plan_for<X, Dim>: the plan ts::layer_norm<Dim>(x) runs.
template <class X, int Dim>
using layer_norm_plan_for =
    layer_norm_plan<typename X::mesh_type, typename X::spec, typename X::extents_type,
                    typename X::value_type, typename X::unreduced_type, Dim>;

namespace detail {

// The row statistics' type and arithmetic: float for bfloat16, T otherwise.
template <class T>
using layer_norm_accumulator = row_accumulator<T>;

// Per device rows of 1 / sqrt(var + eps), kept by the traced form for its backward.
template <class T>
using layer_norm_stats = std::shared_ptr<const std::vector<buffer<layer_norm_accumulator<T>>>>;

// The forward over every device: the one executor runs the plan's steps (eps its scalar 0);
// `stats` (or null) receives each device's rstd rows (slot 1 after the normalisation).
template <int Dim, class X>
auto layer_norm(const X& a, layer_norm_accumulator<typename X::value_type> eps,
                layer_norm_stats<typename X::value_type>* stats) {
  using arr = std::remove_cvref_t<X>;
  using plan = layer_norm_plan_for<arr, Dim>;
  using T = typename arr::value_type;
  using A = layer_norm_accumulator<T>;
  using Mesh = typename arr::mesh_type;
  constexpr std::size_t R = arr::rank;
  using result = sharded_array<T, Mesh, typename plan::out_spec, typename arr::extents_type>;
  if constexpr (!plan::valid) {
    (void)eps, (void)stats;
    return result(adopt_shards, a.device_mesh(), a.extents(),
                  std::shared_ptr<const std::vector<buffer<T>>>{});
  } else {
    auto rs = std::make_shared<std::vector<buffer<A>>>(Mesh::size);
    const double scalars[1] = {static_cast<double>(eps)};
    std::vector<buffer<T>> out = run_row_steps<typename plan::out_spec, layer_norm_kernels>(
        a, std::span<const step<R>>(plan::steps),
        step_payloads{{}, std::span<const double>(scalars)}, no_row_hook{},
        [&](std::size_t p, device_state<T, R>& st) {
          if (!stats) return;
          buffer<A> r(st.rows.rows());
          for (std::size_t i = 0; i < r.size(); ++i) r.data()[i] = st.rows.slot(1)[i];
          (*rs)[p] = std::move(r);
        });
    if (stats) *stats = std::move(rs);
    return result(adopt_shards, a.device_mesh(), a.extents(), std::move(out));
  }
}

// The backward over every device: g the cotangent of y = layer_norm<Dim>(x), y's rstd rows;
// the one executor runs the plan's backward_steps.
template <int Dim, class G>
G layer_norm_backward(const G& g, const G& y,
                      const layer_norm_stats<typename G::value_type>& rstd) {
  using plan = layer_norm_plan_for<G, Dim>;
  using T = typename G::value_type;
  constexpr std::size_t R = G::rank;
  return G(adopt_shards, g.device_mesh(), g.extents(),
           run_row_steps<typename plan::out_spec, layer_norm_kernels>(
               g, std::span<const step<R>>(plan::backward_steps), step_payloads{},
               [&](std::size_t p, device_state<T, R>& st) {
                 st.rows.y = y.local_data(p).data();
                 st.rows.rstd = (*rstd)[p].data();
               }));
}

}  // namespace detail

namespace detail {
// layer_norm<Dim>(x, eps) of a traced x, the forward and its recorded backward: declared here,
// defined in ops/detail/traced_layer_norm.hpp, which ops/traced.hpp (where traced values come
// from) includes.
template <int Dim, class X>
auto traced_layer_norm(const X& x, double eps);
}  // namespace detail

// layer_norm<Dim>(x, eps): (x - mean) / sqrt(var + eps) along dimension Dim (-1: the last),
// on a global array or a traced value (global_operand). A function object (as std::ranges'
// algorithms are): argument-dependent lookup never finds it, so a user's own unqualified
// layer_norm(x) helper called with typeshard arrays stays theirs, neither ambiguous nor
// replaced.
template <int Dim = -1>
struct layer_norm_fn {
  template <global_operand X>
  [[nodiscard]] auto operator()(const X& x, double eps = 1e-6,
                                detail::source_site loc = detail::source_site::current()) const {
    if constexpr (detail::is_traced_v<X>) {
      (void)loc;
      return detail::traced_layer_norm<Dim>(x, eps);
    } else {
      const detail::call_site_scope site(loc);
      using acc = detail::layer_norm_accumulator<typename X::value_type>;
      return detail::layer_norm<Dim>(x, static_cast<acc>(eps), nullptr);
    }
  }
};
template <int Dim = -1>
inline constexpr layer_norm_fn<Dim> layer_norm{};

}  // namespace typeshard
