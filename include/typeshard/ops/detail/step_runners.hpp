// typeshard/ops/detail/step_runners.hpp: how the executor (executor.hpp) runs one step of
// each local kind on a device's state: a contraction (`local_gemm`, the einsum kernel), a
// reduction (`local_reduce`), a row operation's steps (row kernels, their statistics'
// collectives). Internal: do not rely on anything in detail/.
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
#include "window_kernel.hpp"

namespace typeshard::detail {

// What a plan's local steps name besides their own fields, held by the run: the contractions
// a `local_gemm` step numbers (`payload`: the einsum's equation), the scalars a row kernel
// numbers (layer_norm_normalize's `payload`: its eps) and the windows a window step numbers.
struct step_payloads {
  std::span<const einsum_equation> contractions{};
  std::span<const double> scalars{};
  std::span<const window_payload> windows{};
};

// The kernel families a run may meet, by its plan's local steps: a run instantiates only
// those (a reshard's none), so a program that only reshards never compiles a GEMM. A step of a
// family the run was not built for is an internal error.
enum kernel_families : unsigned {
  no_kernels = 0,
  contraction_kernels = 1,  // local_gemm (einsum, matmul)
  sum_kernels = 2,          // local_reduce with local_op::reduce of sum and mean
  softmax_kernels = 4,      // softmax's row kernels (softmax, log_softmax)
  window_kernels = 8,       // the window copy (slice, split, concat, pad)
  layer_norm_kernels = 16,  // layer_norm's row kernels (forward and backward)
  extremum_kernels = 32,    // local_reduce with local_op::reduce of max and min
  row_op_kernels = softmax_kernels | layer_norm_kernels,  // every row kernel
  reduction_kernels = sum_kernels | extremum_kernels     // every reduction
};

// One device's blocks while a plan runs: the operands (by step_operand: array, lhs, rhs) in T,
// the product and the result's steps (`out`) in C, a row operation's state (`stats`).
inline constexpr std::size_t array_operand = static_cast<std::size_t>(step_operand::array);

template <class T, std::size_t Rank, class C = T>
struct device_state {
  std::array<operand_block<T, Rank>, 3> in;
  operand_block<C, Rank> out;
  row_state<T> rows;
};

// Whether the einsum kernel multiplies T operands into C (kernels::gemm's element types; float
// from bfloat16, JAX's preferred_element_type).
template <class T, class C>
inline constexpr bool contractible_v =
    (std::is_same_v<T, C> && (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                              std::is_same_v<T, bfloat16>)) ||
    (std::is_same_v<T, bfloat16> && std::is_same_v<C, float>);

// A `local_gemm` step: the product of the lhs and rhs blocks by the contraction the step
// names, into `out` (laid out by the step's spec_after); the operands are freed before the
// result's collectives. The kernel reads a pending slice of an operand in place; it holds one
// of the backend's kernel slots (backend.hpp) around the product.
template <class T, std::size_t R, class C>
void run_contraction(backend& bk, const mesh_value& mv, std::size_t p, const step<R>& s,
                     device_state<T, R, C>& st, const step_payloads& pl) {
  if constexpr (!contractible_v<T, C>) {
    (void)bk, (void)mv, (void)p, (void)s, (void)st, (void)pl;
    throw_internal("typeshard: internal: a contraction of element types it has no kernel for");
  } else {
    using block = operand_block<T, R>;
    if (s.payload >= pl.contractions.size())
      throw_internal("typeshard: internal: a local_gemm step names no contraction of the run");
    const einsum_equation& eq = pl.contractions[s.payload];
    block& a = st.in[static_cast<std::size_t>(step_operand::lhs)];
    block& b = st.in[static_cast<std::size_t>(step_operand::rhs)];
    const shape<R> c_global = einsum_out_shape(eq, einsum_shapes<R>{a.global, b.global, sizeof(T)});
    const shape<R> c_loc = local_shape_of(mv, s.spec_after, c_global, p);
    buffer<C> c0(host_tensor<C, R>::element_count(c_loc));
    {
      // Where an operand's wanted block starts in the block it holds (a pending slice).
      auto origin = [&](const block& o) {
        const index_slices<R> want = index_of(mv, o.spec, o.global, p);
        const index_slices<R> have = index_of(mv, o.held, o.global, p);
        shape<R> sh{};
        for (std::size_t d = 0; d < R; ++d) sh[d] = want[d].start - have[d].start;
        return sh;
      };
      const shape<R> a_want = local_shape_of(mv, a.spec, a.global, p);
      const shape<R> b_want = local_shape_of(mv, b.spec, b.global, p);
      // The product's multiply-adds: every letter's local extent once (lhs's letters, then
      // the letters only rhs has).
      std::size_t multiply_adds = host_tensor<T, R>::element_count(a_want);
      for (std::size_t r = 0; r < eq.rhs_rank; ++r)
        if (!eq.in_lhs(eq.rhs[r])) multiply_adds *= b_want[r];
      const backend::kernel_slot slot = bk.acquire_kernel_slot(multiply_adds);
      local_einsum<T, R, C>(eq, a.data, local_shape_of(mv, a.held, a.global, p), origin(a),
                            a_want, b.data, local_shape_of(mv, b.held, b.global, p), origin(b),
                            b_want, c0.data(), c_loc);
    }
    a = block{};  // free the gathered operands before the result's collectives
    b = block{};
    st.out = operand_block<C, R>(nullptr, s.spec_after, c_global);
    st.out.adopt(std::move(c0), s.spec_after);
  }
}

// A `local_reduce` step with local_op::reduce on the array's block: the reduction the step
// names over its dimensions `over` (mean by the global count of reduced elements); the block
// is then one of the array with those dimensions at extent 1. Kernels: the reductions built
// (sum_kernels, extremum_kernels).
template <class T, std::size_t R, unsigned Kernels = reduction_kernels>
void run_reduction(const mesh_value& mv, std::size_t p, const step<R>& s,
                   operand_block<T, R>& x) {
  if constexpr (!reducible_element_v<T>) {
    (void)mv, (void)p, (void)s, (void)x;
    throw_internal("typeshard: internal: a reduction of an element type it has no kernel for");
  } else {
    take_slices<T, R>(mv, p, x);
    const shape<R> have = local_shape_of(mv, x.held, x.global, p);
    shape<R> kept = x.global;
    double count = 1;
    for (std::size_t d = 0; d < R; ++d)
      if (s.over[d]) {
        kept[d] = 1;
        count *= static_cast<double>(x.global[d]);
      }
    constexpr bool sums = (Kernels & sum_kernels) != 0;
    constexpr bool extrema = (Kernels & extremum_kernels) != 0;
    buffer<T> r = local_reduce<T, R, sums, extrema>(
        s.reduce, std::span<const T>(x.data, host_tensor<T, R>::element_count(have)), have,
        s.over, count);
    x.global = kept;
    x.adopt(std::move(r), s.spec_after);
  }
}

// A collective on a row operation's statistics: the slots its `payload` names, all-reduced
// over its axes in place (a device with no rows skips it, and so do its peers: they hold the
// same rows).
template <class T>
void run_stats_collective(backend& b, const mesh_value& mv, std::size_t p, const dim_spec& axes,
                          step_kind kind, std::size_t slots, row_state<T>& st) {
  using A = row_accumulator<T>;
  const std::size_t rows = st.rows();
  if (rows == 0) return;
  A* first = st.slot(slots == stats_slot1 ? 1 : 0);
  const std::size_t count = slots == stats_both ? 2 * rows : rows;
  const reduce_op op = kind == step_kind::pmax   ? reduce_op::max
                       : kind == step_kind::pmin ? reduce_op::min
                                                 : reduce_op::sum;
  const group_members g = group_of(mv, axes, p);
  b.all_reduce(backend_group(g), element_type_of<A>, op, first, first, count);
}

// A row kernel step (steps[i]) on the array's block x: with the steps of the same row
// operation that follow it with no collective between (layer_norm's), fused, each row whole
// at once. Returns the index of the last step it ran. Kernels: the row kernel families built
// (softmax_kernels, layer_norm_kernels; a softmax compiles no layer_norm kernel).
template <class T, std::size_t Rank, unsigned Kernels = row_op_kernels>
std::size_t run_row_step(const mesh_value& m, std::size_t p, std::span<const step<Rank>> steps,
                         std::size_t i, operand_block<T, Rank>& x, row_state<T>& rows,
                         const step_payloads& pl) {
  const step<Rank>& s = steps[i];
  take_slices<T, Rank>(m, p, x);
  const auto is = [&](std::size_t k, local_op op) {
    return i + k < steps.size() && steps[i + k].op == op;
  };
  const std::size_t fused = s.op == local_op::row_sum && is(1, local_op::row_sq_dev_sum) &&
                                    is(2, local_op::layer_norm_normalize)
                                ? 2
                            : s.op == local_op::layer_norm_grad_sums &&
                                    is(1, local_op::layer_norm_grad)
                                ? 1
                                : 0;
  const step<Rank>& last = steps[i + fused];
  const double eps = last.op == local_op::layer_norm_normalize && last.payload < pl.scalars.size()
                         ? pl.scalars[last.payload]
                         : 0.0;
  constexpr bool softmax = (Kernels & softmax_kernels) != 0;
  constexpr bool layer_norm = (Kernels & layer_norm_kernels) != 0;
  run_row_kernel<T, Rank, softmax, layer_norm>(s.op, fused != 0, x.data,
                                               local_shape_of(m, x.held, x.global, p), s.dim,
                                               x.global[s.dim], eps, rows);
  if (last.kind == step_kind::local_elementwise) x.adopt(std::move(rows.out), last.spec_after);
  return i + fused;
}

[[noreturn]] TYPESHARD_COLD TYPESHARD_NOINLINE inline void throw_kernel_not_built(local_op op) {
  throw usage_error(message({"typeshard: internal: a run met a local step (op ",
                             static_cast<unsigned>(op), ") of a kernel family it was not built "
                             "for (kernel_families)"}));
}

}  // namespace typeshard::detail
