// typeshard/ops/detail/slice_blocks.hpp: the per-device work of ts::slice, ts::split,
// ts::concat and a slice's transpose (a pad into zeros): a slice_plan's steps (plan/
// slice_plan.hpp) run on each device's blocks. Internal: do not rely on anything in detail/.
//
// Templates of the element type and rank only (the mesh, the spec and the plan are values),
// so a program instantiates them once per element type and rank, whatever its specs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "../../array/host_tensor.hpp"
#include "../../backend/backend.hpp"
#include "../../core/detail/mesh_value.hpp"
#include "../../core/layout.hpp"
#include "../../array/detail/buffer.hpp"
#include "../../plan/slice_plan.hpp"
#include "executor.hpp"

namespace typeshard::detail {

// The product of s[from..to).
template <std::size_t Rank>
constexpr std::size_t extent_product(const shape<Rank>& s, std::size_t from, std::size_t to) {
  std::size_t n = 1;
  for (std::size_t d = from; d < to; ++d) n *= s[d];
  return n;
}

// The block of the result at position p laid out by `w` (a window's result `out_global`),
// read from x (laid out by x.held, the same along every dimension but plan.dim).
template <class T, std::size_t Rank>
buffer<T> copy_window(const mesh_value& m, std::size_t p, const operand_block<T, Rank>& x,
                      const spec_array<Rank>& w, const shape<Rank>& out_global,
                      const slice_plan<Rank>& plan) {
  const std::size_t d = plan.dim;
  const shape<Rank> in_local = local_shape_of(m, x.held, x.global, p);
  const shape<Rank> out_local = local_shape_of(m, w, out_global, p);
  const std::size_t in0 = index_of(m, x.held, x.global, p)[d].start;
  const std::size_t out0 = index_of(m, w, out_global, p)[d].start;
  const std::size_t outer = extent_product(out_local, 0, d);
  const std::size_t inner = extent_product(out_local, d + 1, Rank);
  buffer<T> out(host_tensor<T, Rank>::element_count(out_local));
  std::fill_n(out.data(), out.size(), T{});
  const auto n_in = static_cast<std::ptrdiff_t>(plan.in_extent);
  for (std::size_t j = 0; j < out_local[d]; ++j) {
    const std::ptrdiff_t g = static_cast<std::ptrdiff_t>(out0 + j) + plan.shift;
    if (g < 0 || g >= n_in) continue;  // a pad's zero
    const std::size_t src = static_cast<std::size_t>(g) - in0;  // held: the plan says so
    for (std::size_t o = 0; o < outer; ++o)
      std::copy_n(x.data + (o * in_local[d] + src) * inner, inner,
                  out.data() + (o * out_local[d] + j) * inner);
  }
  return out;
}

// Runs the steps after the window copy (the slice back to the operand's spec) on block y.
template <class T, std::size_t Rank>
buffer<T> finish_window(const mesh_value& m, std::size_t p, buffer<T> block,
                        const shape<Rank>& out_global, const slice_plan<Rank>& plan) {
  operand_block<T, Rank> y(nullptr, plan.steps[plan.window_at].spec_after, out_global);
  y.adopt(std::move(block), plan.steps[plan.window_at].spec_after);
  for (std::size_t i = plan.window_at + 1; i < plan.count; ++i) y.spec = plan.steps[i].spec_after;
  take_slices<T, Rank>(m, p, y);
  return std::move(y.owned);
}

// A slice or pad (plan_window) of the blocks `in` (spec s, extents in_global).
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE std::vector<buffer<T>> window_blocks_on(
    backend& b, std::span<const device_id> devices, const mesh_value& m,
    const spec_array<Rank>& s, const shape<Rank>& in_global, const std::vector<buffer<T>>& in,
    const slice_plan<Rank>& plan) {
  shape<Rank> out_global = in_global;
  out_global[plan.dim] = plan.out_extent;
  std::vector<buffer<T>> out(m.size);
  b.run(devices, [&](std::size_t p) {
    operand_block<T, Rank> x(in[p].data(), s, in_global);
    for (std::size_t i = 0; i < plan.window_at; ++i) run_step<T, Rank>(b, m, p, plan.steps[i], x);
    buffer<T> w = copy_window<T, Rank>(m, p, x, plan.steps[plan.window_at].spec_after,
                                       out_global, plan);
    out[p] = finish_window<T, Rank>(m, p, std::move(w), out_global, plan);
  });
  return out;
}

// A concatenation (plan_concat) of the operands' blocks (each spec s, extents globals[k]).
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE std::vector<buffer<T>> concat_blocks_on(
    backend& b, std::span<const device_id> devices, const mesh_value& m,
    const spec_array<Rank>& s, const std::vector<shape<Rank>>& globals,
    const std::vector<const std::vector<buffer<T>>*>& in, const slice_plan<Rank>& plan) {
  const std::size_t d = plan.dim;
  shape<Rank> out_global = globals[0];
  out_global[d] = plan.out_extent;
  const spec_array<Rank>& w = plan.steps[plan.window_at].spec_after;
  std::vector<buffer<T>> out(m.size);
  b.run(devices, [&](std::size_t p) {
    const shape<Rank> out_local = local_shape_of(m, w, out_global, p);
    const std::size_t outer = extent_product(out_local, 0, d);
    const std::size_t inner = extent_product(out_local, d + 1, Rank);
    buffer<T> block(host_tensor<T, Rank>::element_count(out_local));
    std::size_t at = 0;  // where operand k starts along d in the block
    for (std::size_t k = 0; k < in.size(); ++k) {
      operand_block<T, Rank> x((*in[k])[p].data(), s, globals[k]);
      for (std::size_t i = 0; i < plan.window_at; ++i)
        run_step<T, Rank>(b, m, p, plan.steps[i], x);
      const std::size_t n = local_shape_of(m, x.held, x.global, p)[d];
      for (std::size_t o = 0; o < outer; ++o)
        std::copy_n(x.data + o * n * inner, n * inner,
                    block.data() + (o * out_local[d] + at) * inner);
      at += n;
    }
    out[p] = finish_window<T, Rank>(m, p, std::move(block), out_global, plan);
  });
  return out;
}

}  // namespace typeshard::detail
