// typeshard/ops/detail/row_steps.hpp: a row operation's plan run on every device (ts::softmax,
// ts::log_softmax, ts::layer_norm and its backward). Internal: do not rely on anything in
// detail/.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "../../array/detail/buffer.hpp"
#include "../../core/detail/mesh_value.hpp"
#include "../../plan/step.hpp"
#include "executor.hpp"

namespace typeshard::detail {

// A hook of run_row_steps that does nothing.
struct no_row_hook {
  template <class... Args>
  void operator()(const Args&...) const {}
};

// Runs `steps`, a row operation's plan, in the one executor on every device, each on its
// block of `a` laid out by Spec (the plan's out_spec, the operand's and the result's), and
// returns each device's result block. before(p, st) sets device p's further inputs (the
// backward's y and rstd rows), after(p, st) reads what the run leaves in st (layer_norm's
// rstd rows). An empty array runs nothing: every block is empty (some global extent is 0, so
// every block's is), so there is nothing to compute and no statistic to exchange. Kernels:
// the row kernel families the steps name (executor.hpp's kernel_families).
template <class Spec, unsigned Kernels = row_op_kernels, class A, class Before = no_row_hook,
          class After = no_row_hook>
std::vector<buffer<typename A::value_type>> run_row_steps(
    const A& a, std::span<const step<A::rank>> steps, const step_payloads& payloads = {},
    Before before = {}, After after = {}) {
  using T = typename A::value_type;
  using Mesh = typename A::mesh_type;
  constexpr std::size_t R = A::rank;
  std::vector<buffer<T>> out(Mesh::size);
  if (a.size() == 0) return out;
  backend& b = a.device_mesh().get_backend();
  for_each_position(a.device_mesh(), [&](std::size_t p) {
    device_state<T, R> st;
    operand_block<T, R>& x = st.in[array_operand];
    x = operand_block<T, R>(a.local_data(p).data(), spec_array_of<Spec, R>(), a.extents());
    before(p, st);
    run_steps<T, R, T, Kernels>(b, mesh_value_of<Mesh>(), p, steps, st, payloads);
    out[p] = std::move(x.owned);
    after(p, st);
  });
  return out;
}

}  // namespace typeshard::detail
