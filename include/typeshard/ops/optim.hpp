// typeshard/ops/optim.hpp: ZeRO-1 optimizers: SGD and Adam whose update (and Adam's moments)
// live sharded over the data-parallel axis, for gradients typed by ts::value_and_grad.
//
//   auto g = ts::grad<0>(loss)(W, X, Y);                 // W replicated: unreduced<"data">
//   W = ts::zero_sgd_update<ts::spec<"data", ts::none>>(W, g, 0.1f);
//   auto state = ts::zero_adam_init<ts::spec<"data", ts::none>>(W);   // moments: 1/4 each
//   W = ts::zero_adam_update(W, g, state, {.lr = 1e-3});
//
// ShardSpec is how the update is sharded: a spec of the parameter's rank over the axes the
// gradient is unreduced over (ZeRO: each device updates 1/N of the parameter). One step is
//   1. the gradient reduce-scattered to ShardSpec (ts::reshard: psum_scatter, typed),
//   2. the parameter sliced to ShardSpec (no communication: it is replicated there),
//   3. the update on the shard only (Adam's moments live there, 1/N of the memory),
//   4. the parameter all-gathered back to its own spec (ts::reshard).
// against DDP's all-reduce and every device updating every element. Any ShardSpec works (a
// gradient unreduced over axes ShardSpec does not shard over is all-reduced over them: the
// reshard plan says so); the parameter must be fully reduced.
#pragma once

#include <cmath>
#include <cstddef>
#include <type_traits>

#include "../array/sharded_array.hpp"
#include "../core/spec.hpp"
#include "detail/grad_tape.hpp"
#include "elementwise.hpp"
#include "reshard.hpp"

namespace typeshard {

// The parameter's update shard: its element, mesh and extents, sharded by ShardSpec.
template <class Param, spec_type ShardSpec>
using update_shard_t =
    sharded_array<typename Param::value_type, typename Param::mesh_type,
                  typename detail::padded_spec<ShardSpec, Param::rank>::type,
                  typename Param::extents_type>;

// zero_sgd_update<ShardSpec>(w, g, lr): w - lr * g, computed on ShardSpec's shards.
template <spec_type ShardSpec, sharded_array_type P, sharded_array_type G>
P zero_sgd_update(const P& param, const G& grad, typename P::value_type lr) {
  using S = update_shard_t<P, ShardSpec>;
  const S g = detail::retype<S>(reshard<typename S::spec>(grad));  // reduce-scatter
  const S w = detail::retype<S>(reshard<typename S::spec>(param));  // a local slice
  return detail::retype<P>(reshard<typename P::spec>(detail::retype<S>(w - g * lr)));
}

struct adam_options {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

// Adam's moments on the update shards, and the step count.
template <class Param, spec_type ShardSpec>
struct zero_adam_state {
  using shard_type = update_shard_t<Param, ShardSpec>;
  using shard_spec = ShardSpec;
  shard_type m, v;
  std::size_t step = 0;
};

// zero_adam_init<ShardSpec>(w): zero moments, sharded by ShardSpec.
template <spec_type ShardSpec, sharded_array_type P>
zero_adam_state<P, ShardSpec> zero_adam_init(const P& param) {
  using S = update_shard_t<P, ShardSpec>;
  const S zeros = detail::filled<S>(param.device_mesh(), param.extents(), 0);
  return {zeros, zeros, 0};
}

// zero_adam_update(w, g, state, options): one Adam step (bias-corrected), on the shards.
template <sharded_array_type P, class ShardSpec, sharded_array_type G>
P zero_adam_update(const P& param, const G& grad, zero_adam_state<P, ShardSpec>& state,
                   const adam_options& o = {}) {
  using S = update_shard_t<P, ShardSpec>;
  using T = typename P::value_type;
  const S g = detail::retype<S>(reshard<typename S::spec>(grad));   // reduce-scatter
  const S w = detail::retype<S>(reshard<typename S::spec>(param));  // a local slice
  ++state.step;
  const T b1 = T(o.beta1), b2 = T(o.beta2);
  state.m = detail::retype<S>(state.m * b1 + g * (T(1) - b1));
  state.v = detail::retype<S>(state.v * b2 + (g * g) * (T(1) - b2));
  const T c1 = T(1) - T(std::pow(o.beta1, double(state.step)));
  const T c2 = T(1) - T(std::pow(o.beta2, double(state.step)));
  const T lr = T(o.lr), eps = T(o.eps);
  const S step = detail::retype<S>(
      zip(state.m, state.v, [=](T m, T v) { return lr * (m / c1) / (std::sqrt(v / c2) + eps); }));
  return detail::retype<P>(reshard<typename P::spec>(detail::retype<S>(w - step)));  // all-gather
}

}  // namespace typeshard
