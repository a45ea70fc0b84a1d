// typeshard/ops/detail/executor.hpp: the one executor of plans. Internal: do not rely on
// anything in detail/.
//
// A plan is a list of ts::step values (plan/step.hpp); every operation runs its plan here,
// the very values its plan type lists: ts::reshard its reshard_plan's steps, ts::einsum and
// ts::matmul the steps of detail::einsum_steps_of (what their plans' steps hold), ts::sum,
// mean, max and min their reduce_plan's, ts::softmax, ts::log_softmax and ts::layer_norm
// (forward and backward) theirs, ts::slice, split, concat and pad their slice_plan's. Each
// device walks the steps on its own blocks and runs each by its kind and payload, whatever
// the operation: a collective or a slice on the operand it
// names (ops/detail/operand_steps.hpp), a `local_gemm` by the einsum kernel on the contraction
// the step names (array/detail/einsum_kernel.hpp; it reads a pending slice of an operand in
// place), a `local_reduce` by the reduction kernel (ops/detail/reduce_kernel.hpp) or a row
// kernel (ops/detail/row_kernels.hpp), a `local_elementwise` by a row kernel, a slice step
// with local_op::window by the window copy (ops/detail/window_kernel.hpp). No operation
// interprets its own plan. Not a template of the plan (its steps arrive as values) nor of the
// mesh (a value, core/detail/mesh_value.hpp), so a program with many plans and meshes
// instantiates it once per element type and rank (and result element type: an einsum of
// bfloat16 operands may write float), and per set of kernel families its caller's plans may
// name (kernel_families: a reshard's none, so a program that only reshards compiles no GEMM).
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../array/detail/einsum_kernel.hpp"
#include "../../array/device_mesh.hpp"
#include "../../array/host_tensor.hpp"
#include "../../array/sharded_array.hpp"
#include "../../backend/backend.hpp"
#include "../../core/bfloat16.hpp"
#include "../../core/detail/mesh_group.hpp"
#include "../../core/detail/message.hpp"
#include "../../core/detail/mesh_value.hpp"
#include "../../core/errors.hpp"
#include "../../core/layout.hpp"
#include "../../array/detail/buffer.hpp"
#include "../../plan/detail/einsum_cost.hpp"
#include "../../plan/detail/einsum_subscripts.hpp"
#include "../../plan/reshard_plan.hpp"
#include "../../plan/step.hpp"
#include "collective_calls.hpp"
#include "operand_steps.hpp"
#include "reduce_kernel.hpp"
#include "row_kernels.hpp"
#include "step_runners.hpp"
#include "window_kernel.hpp"

namespace typeshard::detail {

// Runs `steps` at position p on device state st, each by its kind and payload; pl holds what
// local steps name; Kernels: the kernel families the steps may name. A row operation's steps
// with no collective between them run fused, each row whole at once (layer_norm's forward and
// backward).
template <class T, std::size_t Rank, class C = T, unsigned Kernels = no_kernels>
void run_steps(backend& b, const mesh_value& m, std::size_t p, std::span<const step<Rank>> steps,
               device_state<T, Rank, C>& st, const step_payloads& pl = {}) {
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const step<Rank>& s = steps[i];
    switch (s.op) {
      case local_op::none:
        if (!s.communicates() && s.kind != step_kind::slice)
          throw_internal("typeshard: internal: a local step names no kernel (its `op`)");
        if (s.operand == step_operand::stats)
          run_stats_collective<T>(b, m, p, s.axes, s.kind, s.payload, st.rows);
        else if (s.operand == step_operand::out)
          run_step<C, Rank>(b, m, p, s, st.out);
        else
          run_step<T, Rank>(b, m, p, s, st.in[static_cast<std::size_t>(s.operand)]);
        break;
      case local_op::contract:
        if constexpr ((Kernels & contraction_kernels) != 0)
          run_contraction<T, Rank, C>(b, m, p, s, st, pl);
        else
          throw_kernel_not_built(s.op);
        break;
      case local_op::reduce:
        if constexpr ((Kernels & reduction_kernels) != 0)
          run_reduction<T, Rank, Kernels>(m, p, s,
                                          st.in[static_cast<std::size_t>(step_operand::array)]);
        else
          throw_kernel_not_built(s.op);
        break;
      case local_op::window:
        if constexpr ((Kernels & window_kernels) != 0 && std::is_same_v<T, C>) {
          if (s.payload >= pl.windows.size())
            throw_internal("typeshard: internal: a window step names no window of the run");
          run_window<T, Rank>(m, p, s, st.in[array_operand], st.out, pl.windows[s.payload]);
        } else {
          throw_kernel_not_built(s.op);
        }
        break;
      default:  // a row kernel on the array's block
        if constexpr ((Kernels & row_op_kernels) != 0)
          i = run_row_step<T, Rank, Kernels>(m, p, steps, i, st.in[array_operand], st.rows, pl);
        else
          throw_kernel_not_built(s.op);
        break;
    }
  }
}

// Runs the steps of one array (a reshard; with Kernels = reduction_kernels a reduction) on
// the block of mesh position p (shape from `from`), returning p's new block.
template <class T, std::size_t Rank, unsigned Kernels = no_kernels>
buffer<T> run_steps_on(backend& b, const mesh_value& m, std::size_t p, const T* in,
                       const shape<Rank>& global, const spec_array<Rank>& from,
                       std::span<const step<Rank>> steps) {
  device_state<T, Rank> st;
  operand_block<T, Rank>& x = st.in[static_cast<std::size_t>(step_operand::array)];
  x = operand_block<T, Rank>(in, from, global);
  run_steps<T, Rank, T, Kernels>(b, m, p, steps, st);
  take_slices<T, Rank>(m, p, x);
  return std::move(x.owned);
}

// The same on mesh type Mesh.
template <class T, class Mesh, std::size_t Rank>
buffer<T> run_steps_on(backend& b, std::size_t p, const T* in, const shape<Rank>& global,
                       const spec_array<Rank>& from, std::span<const step<Rank>> steps) {
  return run_steps_on<T, Rank>(b, mesh_value_of<Mesh>(), p, in, global, from, steps);
}

#if defined(TYPESHARD_SEPARATE_COMPILATION)
// With the separately compiled runtime (core/config.hpp), compiled once in typeshard::runtime.
#define TYPESHARD_EXECUTOR_INSTANCE(prefix, T, R)                                              \
  TYPESHARD_OPERAND_STEPS_INSTANCE(prefix, T, R)                                               \
  prefix void run_steps<T, R, T, no_kernels>(backend&, const mesh_value&, std::size_t,        \
                                             std::span<const step<R>>,                         \
                                             device_state<T, R, T>&, const step_payloads&);    \
  prefix buffer<T> run_steps_on<T, R>(backend&, const mesh_value&, std::size_t, const T*,     \
                                      const shape<R>&, const spec_array<R>&,                   \
                                      std::span<const step<R>>);
TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(TYPESHARD_EXECUTOR_INSTANCE, extern template)
#endif

template <std::size_t Rank, std::size_t Capacity>
std::span<const step<Rank>> steps_span(const step_array<Rank, Capacity>& l) {
  return {l.steps.data(), l.count};
}

// The steps that run for these extents: the even ones when both shardings divide them
// evenly, else the uneven ones (with static extents the plan already chose; this agrees).
template <class Mesh, std::size_t Rank>
std::span<const step<Rank>> steps_for_extents(const shape<Rank>& global,
                                              const spec_array<Rank>& from,
                                              const spec_array<Rank>& to,
                                              std::span<const step<Rank>> even_steps,
                                              std::span<const step<Rank>> uneven_steps) {
  return is_even<Mesh>(from, global) && is_even<Mesh>(to, global) ? even_steps : uneven_steps;
}

// The same for reshard plan Plan: its steps_for.
template <class Plan, class Mesh, std::size_t Rank>
std::span<const step<Rank>> reshard_steps_for(const shape<Rank>& global) {
  return Plan::steps_for(global);
}

// Runs `steps` on the devices of a mesh (`devices`, by mesh position, on backend `b`);
// returns the new blocks, by position. Not a template of the plan nor of the mesh, so it is
// instantiated once per element type and rank (and compiled once in typeshard::runtime for
// the common ones).
template <class T, std::size_t Rank>
std::vector<buffer<T>> run_plan_on(backend& b, std::span<const device_id> devices,
                                   const mesh_value& mv, const shape<Rank>& global,
                                   const std::vector<std::span<const T>>& blocks,
                                   const spec_array<Rank>& from,
                                   std::span<const step<Rank>> steps) {
  std::vector<buffer<T>> out(mv.size);
  b.run(devices, [&](std::size_t p) {
    out[p] = run_steps_on<T, Rank>(b, mv, p, blocks[p].data(), global, from, steps);
  });
  return out;
}

// The same on an array's blocks (reshard): one instantiation per element type and rank.
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE std::vector<buffer<T>> run_plan_on_blocks(
    backend& b, std::span<const device_id> devices, const mesh_value& mv,
    const shape<Rank>& global, const std::vector<buffer<T>>& in, const spec_array<Rank>& from,
    std::span<const step<Rank>> steps) {
  std::vector<std::span<const T>> blocks(in.size());
  for (std::size_t p = 0; p < in.size(); ++p) blocks[p] = in[p].span();
  return run_plan_on<T, Rank>(b, devices, mv, global, blocks, from, steps);
}

#if defined(TYPESHARD_SEPARATE_COMPILATION)
#define TYPESHARD_RUN_PLAN_INSTANCE(prefix, T, R)                                              \
  prefix std::vector<buffer<T>> run_plan_on<T, R>(                                             \
      backend&, std::span<const device_id>, const mesh_value&, const shape<R>&,                \
      const std::vector<std::span<const T>>&, const spec_array<R>&, std::span<const step<R>>); \
  prefix std::vector<buffer<T>> run_plan_on_blocks<T, R>(                                      \
      backend&, std::span<const device_id>, const mesh_value&, const shape<R>&,                \
      const std::vector<buffer<T>>&, const spec_array<R>&, std::span<const step<R>>);
TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(TYPESHARD_RUN_PLAN_INSTANCE, extern template)
#endif

// The same on device mesh m.
template <class T, class Mesh, std::size_t Rank>
std::vector<buffer<T>> run_plan(const device_mesh<Mesh>& m, const shape<Rank>& global,
                                const std::vector<std::span<const T>>& blocks,
                                const spec_array<Rank>& from,
                                std::span<const step<Rank>> steps) {
  return run_plan_on<T, Rank>(m.get_backend(), std::span<const device_id>(m.devices()),
                              mesh_value_of<Mesh>(), global, blocks, from, steps);
}

// Runs reshard plan Plan on the array's blocks.
template <class Plan, class T, class Mesh, class Spec, class Extents, class U>
std::vector<buffer<T>> run_plan(const sharded_array<T, Mesh, Spec, Extents, U>& a) {
  constexpr std::size_t Rank = Extents::rank;
  const device_mesh<Mesh>& m = a.device_mesh();
  return run_plan_on_blocks<T, Rank>(m.get_backend(), std::span<const device_id>(m.devices()),
                                     mesh_value_of<Mesh>(), a.extents(), *a.shared_shards(),
                                     spec_array_of<typename Plan::from_spec, Rank>(),
                                     reshard_steps_for<Plan, Mesh, Rank>(a.extents()));
}

// Runs `steps` on blocks taken over from an array that no one else holds (`blocks`, by
// position, left empty): each device's block is the steps' own first buffer, so an all-reduce
// writes back into it (operand_steps.hpp, all_reduce_in_place) and a plan of reductions only
// returns the very buffers it was given. One instantiation per element type and rank.
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE std::vector<buffer<T>> run_plan_on_owned_blocks(
    backend& b, std::span<const device_id> devices, const mesh_value& mv,
    const shape<Rank>& global, std::vector<buffer<T>>& blocks, const spec_array<Rank>& from,
    std::span<const step<Rank>> steps) {
  std::vector<buffer<T>> out(mv.size);
  b.run(devices, [&](std::size_t p) {
    device_state<T, Rank> st;
    operand_block<T, Rank>& x = st.in[static_cast<std::size_t>(step_operand::array)];
    x = operand_block<T, Rank>(nullptr, from, global);
    x.adopt(std::move(blocks[p]), from);
    run_steps<T, Rank, T, no_kernels>(b, mv, p, steps, st);
    take_slices<T, Rank>(mv, p, x);
    out[p] = std::move(x.owned);
  });
  return out;
}

// Runs reshard plan Plan on the blocks of `a`, an array about to die: taken over when no other
// array shares them (the vector is never const: detail::share_blocks), else copied from as
// run_plan(a) does.
template <class Plan, class T, class Mesh, class Spec, class Extents, class U>
std::vector<buffer<T>> run_plan(sharded_array<T, Mesh, Spec, Extents, U>&& a) {
  if (a.shared_shards().use_count() != 1) return run_plan<Plan>(std::as_const(a));
  constexpr std::size_t Rank = Extents::rank;
  const device_mesh<Mesh>& m = a.device_mesh();
  auto& blocks = const_cast<std::vector<buffer<T>>&>(*a.shared_shards());
  return run_plan_on_owned_blocks<T, Rank>(m.get_backend(),
                                           std::span<const device_id>(m.devices()),
                                           mesh_value_of<Mesh>(), a.extents(), blocks,
                                           spec_array_of<typename Plan::from_spec, Rank>(),
                                           reshard_steps_for<Plan, Mesh, Rank>(a.extents()));
}

}  // namespace typeshard::detail
