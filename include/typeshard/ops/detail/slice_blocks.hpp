// typeshard/ops/detail/slice_blocks.hpp: ts::slice, ts::split, ts::concat and a slice's
// transpose (a pad into zeros) on the devices: a slice_plan's steps (plan/slice_plan.hpp) run
// by the one executor (ops/detail/executor.hpp) on each device's blocks, the window copy among
// them (one copy of the part kept). Internal: do not rely on anything in detail/.
//
// Templates of the element type and rank only (the mesh, the spec and the plan are values),
// so a program instantiates them once per element type and rank, whatever its specs.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "../../backend/backend.hpp"
#include "../../core/detail/mesh_value.hpp"
#include "../../core/layout.hpp"
#include "../../array/detail/buffer.hpp"
#include "../../plan/slice_plan.hpp"
#include "executor.hpp"

namespace typeshard::detail {

// A slice or pad (plan_window) of the blocks `in` (spec s, extents in_global).
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE std::vector<buffer<T>> window_blocks_on(
    backend& b, std::span<const device_id> devices, const mesh_value& m,
    const spec_array<Rank>& s, const shape<Rank>& in_global, const std::vector<buffer<T>>& in,
    const slice_plan<Rank>& plan) {
  const window_payload w = plan.window();
  const step_payloads pl{{}, {}, std::span<const window_payload>(&w, 1)};
  std::vector<buffer<T>> out(m.size);
  b.run(devices, [&](std::size_t p) {
    device_state<T, Rank> st;
    st.in[array_operand] = operand_block<T, Rank>(in[p].data(), s, in_global);
    run_steps<T, Rank, T, window_kernels>(b, m, p, plan.step_list(), st, pl);
    take_slices<T, Rank>(m, p, st.out);
    out[p] = std::move(st.out.owned);
  });
  return out;
}

// A concatenation (plan_concat) of the operands' blocks (each spec s, extents globals[k]):
// each operand runs the plan's operand steps, its window placing it after the ones before
// it along the dimension; the result then runs the result steps.
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE std::vector<buffer<T>> concat_blocks_on(
    backend& b, std::span<const device_id> devices, const mesh_value& m,
    const spec_array<Rank>& s, const std::vector<shape<Rank>>& globals,
    const std::vector<const std::vector<buffer<T>>*>& in, const slice_plan<Rank>& plan) {
  std::vector<window_payload> windows(in.size());
  std::ptrdiff_t at = 0;  // where operand k starts along the dimension
  for (std::size_t k = 0; k < in.size(); ++k) {
    windows[k] = {-at, globals[k][plan.dim], plan.out_extent, false};
    at += static_cast<std::ptrdiff_t>(globals[k][plan.dim]);
  }
  std::vector<buffer<T>> out(m.size);
  b.run(devices, [&](std::size_t p) {
    device_state<T, Rank> st;
    for (std::size_t k = 0; k < in.size(); ++k) {
      st.in[array_operand] = operand_block<T, Rank>((*in[k])[p].data(), s, globals[k]);
      const step_payloads pl{{}, {}, std::span<const window_payload>(&windows[k], 1)};
      run_steps<T, Rank, T, window_kernels>(b, m, p, plan.operand_steps(), st, pl);
    }
    run_steps<T, Rank, T, window_kernels>(b, m, p, plan.result_steps(), st);
    take_slices<T, Rank>(m, p, st.out);
    out[p] = std::move(st.out.owned);
  });
  return out;
}

}  // namespace typeshard::detail
