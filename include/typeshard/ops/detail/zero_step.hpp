// typeshard/ops/detail/zero_step.hpp: the fused ZeRO-1 step behind ts::zero_sgd_update and
// ts::zero_adam_update (ops/optim.hpp). Internal: do not rely on anything in detail/.
//
// Runs plan/grad_plan.hpp's zero_update_plan on every device in one pass: the gradient's
// reduce-scatter steps write the device's reduced shard into a buffer of its own (a block,
// never a global-view array), the update overwrites that buffer with the new parameter
// shard (reading the parameter's shard in place when it is contiguous in the device's
// block), and the all-gather steps build the device's new parameter block from it. The
// collectives are the reshard plans' steps, run by the one executor (executor.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../array/sharded_array.hpp"
#include "../../core/bfloat16.hpp"
#include "../../core/layout.hpp"
#include "../../array/detail/buffer.hpp"
#include "../../plan/grad_plan.hpp"
#include "executor.hpp"

namespace typeshard::detail {

template <class Plan, std::size_t Rank>
constexpr spec_array<Rank> from_of() {
  return spec_array_of<typename Plan::from_spec, Rank>();
}
template <class Plan, std::size_t Rank>
constexpr spec_array<Rank> to_of() {
  return spec_array_of<typename Plan::to_spec, Rank>();
}

// The offset of position p's ShardSpec block inside its ParamSpec block when the former is
// a contiguous run of the latter (equal extents after the first dimension that differs, no
// offset there), else -1: the parameter's shard is then copied out by the slice steps.
template <class Mesh, std::size_t Rank>
std::ptrdiff_t contiguous_offset(const spec_array<Rank>& held, const spec_array<Rank>& want,
                                 const shape<Rank>& global, std::size_t p) {
  const index_slices<Rank> have = index_of<Mesh>(held, global, p);
  const index_slices<Rank> sub = index_of<Mesh>(want, global, p);
  std::size_t first = Rank;  // the first dimension where the boxes differ
  for (std::size_t d = 0; d < Rank && first == Rank; ++d)
    if (have[d].start != sub[d].start || have[d].size() != sub[d].size()) first = d;
  if (first == Rank) return 0;
  for (std::size_t d = first + 1; d < Rank; ++d)
    if (have[d].start != sub[d].start || have[d].size() != sub[d].size()) return -1;
  for (std::size_t d = 0; d < first; ++d)
    if (have[d].size() != 1) return -1;  // rows of an outer dimension: not one run
  std::size_t inner = 1;
  for (std::size_t d = first + 1; d < Rank; ++d) inner *= have[d].size();
  if (sub[first].start < have[first].start || sub[first].stop > have[first].stop) return -1;
  return static_cast<std::ptrdiff_t>((sub[first].start - have[first].start) * inner);
}

// One ZeRO-1 step of parameter `param` with gradient `grad` (Param's spec, unreduced), the
// update sharded by Plan's ShardSpec. update(p, g, w, n) overwrites g[0, n) (device p's
// reduced gradient shard) with the new parameter shard, w[0, n) being the old one. The
// gradient may be bfloat16 for a float parameter (mixed precision: a float master copy):
// it is reduce-scattered in bfloat16 (half the bytes), its shard widened to float exactly.
template <class Plan, class P, class G, class Update>
P zero_step(const P& param, const G& grad, Update&& update) {
  using T = typename P::value_type;
  using GT = typename G::value_type;
  // (optim.hpp's check_gradient_element has said so, with rule 9's message.)
  static_assert(std::is_same_v<GT, T> ||
                (std::is_same_v<GT, bfloat16> && std::is_same_v<T, float>));
  using Mesh = typename P::mesh_type;
  constexpr std::size_t Rank = P::rank;
  using rs = typename Plan::reduce_scatter;
  using slice = typename Plan::slice;
  using gather = typename Plan::all_gather;
  const shape<Rank> global = param.extents();
  const std::span<const step<Rank>> rs_steps = reshard_steps_for<rs, Mesh, Rank>(global);
  const std::span<const step<Rank>> slice_steps = reshard_steps_for<slice, Mesh, Rank>(global);
  const std::span<const step<Rank>> gather_steps = reshard_steps_for<gather, Mesh, Rank>(global);
  std::vector<buffer<T>> out(Mesh::size);
  backend& b = param.device_mesh().get_backend();
  constexpr mesh_value mv = mesh_value_of<Mesh>();
  for_each_position(param.device_mesh(), [&](std::size_t p) {
    const std::span<const GT> g_in = grad.local_data(p);
    const std::span<const T> w_in = param.local_data(p);
    const std::size_t n =
        host_tensor<T, Rank>::element_count(local_shape_of<Mesh>(to_of<rs, Rank>(), global, p));
    // 1. this device's shard of the gradient, reduced, in a buffer of its own (of T)
    buffer<GT> g_shard =
        run_steps_on<GT, Rank>(b, mv, p, g_in.data(), global, from_of<rs, Rank>(), rs_steps);
    const GT* g_reduced = g_shard.size() == n ? g_shard.data() : g_in.data();  // no steps ran
    buffer<T> shard;
    if constexpr (std::is_same_v<GT, T>) {
      if (g_shard.size() == n) shard = std::move(g_shard);
    }
    if (shard.size() != n) {  // a copy to update (widened, for a bfloat16 gradient)
      shard = buffer<T>(n);
      for (std::size_t k = 0; k < n; ++k) shard.data()[k] = static_cast<T>(g_reduced[k]);
    }
    // 2. the parameter's shard: in place when contiguous, else the slice steps' copy
    const std::ptrdiff_t at =
        contiguous_offset<Mesh, Rank>(from_of<slice, Rank>(), to_of<slice, Rank>(), global, p);
    buffer<T> w_copy;
    const T* w = w_in.data() + (at >= 0 ? at : 0);
    if (at < 0) {
      w_copy = run_steps_on<T, Rank>(b, mv, p, w_in.data(), global, from_of<slice, Rank>(),
                                           slice_steps);
      w = w_copy.data();
    }
    // 3. the update, over the reduced gradient
    update(p, shard.data(), w, n);
    // 4. the parameter's new block
    out[p] = run_steps_on<T, Rank>(b, mv, p, shard.data(), global, from_of<gather, Rank>(),
                                         gather_steps);
    if (out[p].size() == 0) out[p] = std::move(shard);  // no step ran: the shard is the block
  });
  return P(adopt_shards, param.device_mesh(), global, std::move(out));
}

}  // namespace typeshard::detail
