// typeshard/ops/optim.hpp: ZeRO-1 optimizers: SGD and Adam whose update (and Adam's moments)
// live sharded over the data-parallel axis, for gradients typed by ts::value_and_grad.
//
//   auto g = ts::grad<0>(loss)(W, X, Y);                 // W replicated: unreduced<"data">
//   W = ts::zero_sgd_update<ts::spec<"data", ts::none>>(W, g, 0.1f);
//   auto state = ts::zero_adam_init<ts::spec<"data", ts::none>>(W);   // moments: 1/4 each
//   W = ts::zero_adam_update(W, g, state, {.lr = 1e-3});
//   std::cout << ts::zero_update_plan_for<decltype(W), ts::spec<"data", ts::none>,
//                                         decltype(g)>::describe();
//
// ShardSpec is how the update is sharded: a spec of the parameter's rank over the axes the
// gradient is unreduced over (ZeRO: each device updates 1/N of the parameter). One step is
// one pass per device (plan/grad_plan.hpp's zero_update_plan, run by ops/detail/zero_step.hpp):
//   1. the device's shard of the gradient reduced (the reshard plan's psum_scatter) into a
//      block of its own (no reduced-gradient array in the global view),
//   2. the parameter's shard read where it is (no communication: it is replicated there),
//   3. the update computed on the shard only, over the reduced gradient's block (Adam's
//      moments live there, 1/N of the memory),
//   4. the parameter all-gathered back to its own spec (the reshard plan's all_gather),
// against DDP's all-reduce and every device updating every element. Any ShardSpec works (a
// gradient unreduced over axes ShardSpec does not shard over is all-reduced over them: the
// plan says so); the parameter must be fully reduced.
//
// AdamW: zero_adamw_update (decoupled weight decay). Over parameter trees (ops/tree.hpp), leaf
// by leaf with a state tree of the same shape: sgd_update, zero_sgd_update<"data">, adam_init,
// zero_adam_init<"data"> (zero_over<"data"> shards each leaf's dimension 0),
// zero_adam_init(params, shard_specs) (a tree of specs, one per leaf), adam_update and
// adamw_update.
//
// Mixed precision: a float parameter (the master copy) takes a bfloat16 gradient (from
// bfloat16 compute): the gradient is reduce-scattered in bfloat16, half the bytes, and its
// shard widened to float for the update, which runs in float (Adam's moments too).
#pragma once

#include <cmath>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "../array/sharded_array.hpp"
#include "../core/bfloat16.hpp"
#include "../core/spec.hpp"
#include "../plan/grad_plan.hpp"
#include "detail/grad_tape.hpp"
#include "detail/zero_step.hpp"
#include "elementwise.hpp"
#include "reshard.hpp"
#include "tree.hpp"

namespace typeshard {

namespace detail {
// Whether an optimizer step takes gradient G for parameter P: the same element type, or a
// bfloat16 gradient for a float parameter; else rule 9's message, and false.
template <class P, class G>
constexpr bool check_gradient_element() {
  using T = typename P::value_type;
  using GT = typename G::value_type;
  if constexpr (std::is_same_v<T, GT> ||
                (std::is_same_v<T, float> && std::is_same_v<GT, bfloat16>))
    return true;
  else
    return require<false, diagnostic::zero_update_gradient_element<T, GT>>::value && false;
}
}  // namespace detail

// The parameter's update shard: its element, mesh and extents, sharded by ShardSpec.
template <class Param, spec_like ShardSpec>
using update_shard_t =
    sharded_array<typename Param::value_type, typename Param::mesh_type,
                  typename detail::padded_spec<ShardSpec, Param::rank>::type,
                  typename Param::extents_type>;

// zero_update_plan_for<Param, ShardSpec, Grad>: the plan one ZeRO-1 step of Param runs
// (plan/grad_plan.hpp): its reduce_scatter, slice and all_gather parts, and describe().
template <class Param, spec_like ShardSpec, class Grad>
using zero_update_plan_for =
    zero_update_plan<typename Param::mesh_type, typename Param::spec,
                     typename update_shard_t<Param, ShardSpec>::spec,
                     typename Param::extents_type, typename Grad::unreduced_type,
                     typename Grad::spec>;

// zero_sgd_update<ShardSpec>(w, g, lr): w - lr * g, computed on ShardSpec's shards in one
// pass per device (the reduce-scatter of g fused with the update), then all-gathered.
template <spec_like ShardSpec, sharded_array_like P, sharded_array_like G>
[[nodiscard]] P zero_sgd_update(const P& param, const G& grad, typename P::value_type lr) {
  using plan = zero_update_plan_for<P, ShardSpec, G>;
  using T = typename P::value_type;
  if constexpr (!detail::check_gradient_element<P, G>() || !plan::valid) {
    return param;  // a diagnostic fired; stop here so nothing cascades
  } else {
    return detail::zero_step<plan>(param, grad, [lr](std::size_t, T* g, const T* w, std::size_t n) {
      for (std::size_t k = 0; k < n; ++k) g[k] = w[k] - lr * g[k];
    });
  }
}

struct adam_options {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

// Adam's moments on the update shards, and the step count.
template <class Param, spec_like ShardSpec>
struct zero_adam_state {
  using shard_type = update_shard_t<Param, ShardSpec>;
  using shard_spec = ShardSpec;
  shard_type m, v;
  std::size_t step = 0;
};

// zero_adam_init<ShardSpec>(w): zero moments, sharded by ShardSpec.
template <spec_like ShardSpec, sharded_array_like P>
[[nodiscard]] zero_adam_state<P, ShardSpec> zero_adam_init(const P& param) {
  using S = update_shard_t<P, ShardSpec>;
  const S zeros = detail::filled<S>(param.device_mesh(), param.extents(), 0);
  return {zeros, zeros, 0};
}

// zero_adam_update(w, g, state, options): one Adam step (bias-corrected) on the shards, in
// one pass per device: the reduced gradient shard, the moments and the parameter shard are
// read once, the new moments and the new parameter shard written once, then all-gathered.
namespace detail {
// One Adam step; weight_decay != 0: AdamW's decoupled decay.
template <sharded_array_like P, class ShardSpec, sharded_array_like G>
P adam_step(const P& param, const G& grad, zero_adam_state<P, ShardSpec>& state,
            const adam_options& o, double weight_decay) {
  using S = update_shard_t<P, ShardSpec>;
  using T = typename P::value_type;
  using M = typename P::mesh_type;
  using plan = zero_update_plan_for<P, ShardSpec, G>;
  if constexpr (!detail::check_gradient_element<P, G>() || !plan::valid) {
    return param;  // a diagnostic fired; stop here so nothing cascades
  } else {
    ++state.step;
    const T b1 = T(o.beta1), b2 = T(o.beta2);
    const T c1 = T(1) - T(std::pow(o.beta1, double(state.step)));
    const T c2 = T(1) - T(std::pow(o.beta2, double(state.step)));
    const T lr = T(o.lr), eps = T(o.eps), wd = T(weight_decay);
    // New moment blocks (the old ones may be shared: zero_adam_init gives m and v one zero
    // block), written in the same pass.
    std::vector<detail::buffer<T>> m_out(M::size), v_out(M::size);
    const auto update = [&](std::size_t p, T* g, const T* w, std::size_t n) {
      const T* m = state.m.local_data(p).data();
      const T* v = state.v.local_data(p).data();
      detail::buffer<T> mn(n), vn(n);
      for (std::size_t k = 0; k < n; ++k) {
        const T gk = g[k];
        const T mk = m[k] * b1 + gk * (T(1) - b1);
        const T vk = v[k] * b2 + (gk * gk) * (T(1) - b2);
        mn.data()[k] = mk;
        vn.data()[k] = vk;
        if (weight_decay == 0)
          g[k] = w[k] - lr * (mk / c1) / (std::sqrt(vk / c2) + eps);
        else  // AdamW: the decay decoupled from the moments
          g[k] = w[k] - lr * ((mk / c1) / (std::sqrt(vk / c2) + eps) + wd * w[k]);
      }
      m_out[p] = std::move(mn);
      v_out[p] = std::move(vn);
    };
    P next = detail::zero_step<plan>(param, grad, update);
    state.m = S(adopt_shards, param.device_mesh(), param.extents(), std::move(m_out));
    state.v = S(adopt_shards, param.device_mesh(), param.extents(), std::move(v_out));
    return next;
  }
}

}  // namespace detail

template <sharded_array_like P, class ShardSpec, sharded_array_like G>
[[nodiscard]]
P zero_adam_update(const P& param, const G& grad, zero_adam_state<P, ShardSpec>& state,
                   const adam_options& o = {}) {
  return detail::adam_step(param, grad, state, o, 0.0);
}

// AdamW (Loshchilov and Hutter; PyTorch's and optax's semantics): the Adam step plus
// lr * weight_decay * w, the decay applied to the parameter, not through the moments.
struct adamw_options {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

// zero_adamw_update(w, g, state, options): w - lr * (m_hat / (sqrt(v_hat) + eps) + wd * w),
// on the shards as zero_adam_update.
template <sharded_array_like P, class ShardSpec, sharded_array_like G>
[[nodiscard]]
P zero_adamw_update(const P& param, const G& grad, zero_adam_state<P, ShardSpec>& state,
                    const adamw_options& o = {}) {
  return detail::adam_step(param, grad, state, {o.lr, o.beta1, o.beta2, o.eps},
                           o.weight_decay);
}

// ---- Over parameter trees (ops/tree.hpp): leaf by leaf, the state a tree of the same kind.
// A single array is a tree of one leaf, so each of these takes an array too.

// zero_over<Axis>: the ZeRO sharding of a tree's leaves: a leaf whose dimension 0 is
// unsharded and that does not use Axis (one axis, or ts::axes(...) for several) has its update (and
// moments) sharded over Axis along dimension 0; any other leaf is updated in its own spec (plain).
template <dim_spec Axis>
struct zero_over {
  template <class P, class Spec = typename P::spec, class = std::make_index_sequence<P::rank>>
  struct shard_spec;
  template <class P, class Spec, std::size_t... I>
  struct shard_spec<P, Spec, std::index_sequence<I...>> {
    static constexpr bool uses_axis = [] {
      for (std::size_t a = 0; a < Axis.count; ++a)
        if (Spec::uses(Axis.axes[a])) return true;
      return false;
    }();
    static constexpr bool shard = P::rank > 0 && Spec::dim(0).is_none() && !uses_axis;
    using type = std::conditional_t<shard, spec<(I == 0 ? Axis : Spec::dim(I))...>, Spec>;
  };
};

// sgd_update(params, grads, lr): w - lr * g per leaf, the gradient reduced to w's spec.
template <class Tree, class GradTree>
[[nodiscard]] Tree sgd_update(const Tree& params, const GradTree& grads, double lr) {
  return tree_map(
      [lr](const auto& w, const auto& g) {
        using P = std::remove_cvref_t<decltype(w)>;
        return zero_sgd_update<typename P::spec>(w, g, typename P::value_type(lr));
      },
      params, grads);
}

// zero_sgd_update<Axis>(params, grads, lr): the same, each update sharded by zero_over<Axis>.
template <dim_spec Axis, class Tree, class GradTree>
[[nodiscard]] Tree zero_sgd_update(const Tree& params, const GradTree& grads, double lr) {
  return tree_map(
      [lr](const auto& w, const auto& g) {
        using P = std::remove_cvref_t<decltype(w)>;
        using S = typename zero_over<Axis>::template shard_spec<P>::type;
        return zero_sgd_update<S>(w, g, typename P::value_type(lr));
      },
      params, grads);
}

// adam_init(params): the tree of zero_adam_state, each leaf's moments in its own spec.
template <class Tree>
[[nodiscard]] auto adam_init(const Tree& params) {
  return tree_map(
      [](const auto& w) {
        return zero_adam_init<typename std::remove_cvref_t<decltype(w)>::spec>(w);
      },
      params);
}

// zero_adam_init<Axis>(params): the same, each leaf's moments sharded by zero_over<Axis>.
template <dim_spec Axis, class Tree>
[[nodiscard]] auto zero_adam_init(const Tree& params) {
  return tree_map(
      [](const auto& w) {
        using P = std::remove_cvref_t<decltype(w)>;
        return zero_adam_init<typename zero_over<Axis>::template shard_spec<P>::type>(w);
      },
      params);
}

// zero_adam_init(params, shard_specs): the same, each leaf's moments sharded by the spec at
// its place in shard_specs, a tree of the params' shape whose leaves are ts::spec values (JAX's
// tree of PartitionSpecs): for shardings zero_over cannot say, e.g. Megatron's row-parallel
// weights (dimension 0 over "model") updated over "data" along dimension 1.
template <class Tree, class SpecTree>
[[nodiscard]] auto zero_adam_init(const Tree& params, const SpecTree& shard_specs) {
  return tree_map(
      [](const auto& w, const auto& s) {
        return zero_adam_init<std::remove_cvref_t<decltype(s)>>(w);
      },
      params, shard_specs);
}

// adam_update(params, grads, state, options) and adamw_update: one step per leaf, with the
// leaf's state (from adam_init or zero_adam_init<Axis>: plain or ZeRO as the state says).
template <class Tree, class GradTree, class StateTree>
[[nodiscard]] Tree adam_update(const Tree& params, const GradTree& grads, StateTree& state,
                               const adam_options& o = {}) {
  return tree_map([&o](const auto& w, const auto& g,
                       auto& s) { return zero_adam_update(w, g, s, o); },
                  params, grads, state);
}

template <class Tree, class GradTree, class StateTree>
[[nodiscard]] Tree adamw_update(const Tree& params, const GradTree& grads, StateTree& state,
                                const adamw_options& o = {}) {
  return tree_map([&o](const auto& w, const auto& g,
                       auto& s) { return zero_adamw_update(w, g, s, o); },
                  params, grads, state);
}

}  // namespace typeshard
