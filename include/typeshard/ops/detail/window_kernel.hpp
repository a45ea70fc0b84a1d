// typeshard/ops/detail/window_kernel.hpp: one device's window copy, the kernel of a step with
// local_op::window (ts::slice, ts::split, ts::concat and a slice's transpose, a pad; run by
// the executor, ops/detail/executor.hpp). Internal: do not rely on anything in detail/.
#pragma once

#include <algorithm>
#include <cstddef>

#include "../../array/host_tensor.hpp"
#include "../../core/detail/mesh_value.hpp"
#include "../../core/layout.hpp"
#include "../../array/detail/buffer.hpp"
#include "../../plan/step.hpp"
#include "operand_steps.hpp"

namespace typeshard::detail {

// The product of s[from..to).
template <std::size_t Rank>
constexpr std::size_t extent_product(const shape<Rank>& s, std::size_t from, std::size_t to) {
  std::size_t n = 1;
  for (std::size_t d = from; d < to; ++d) n *= s[d];
  return n;
}

// The window step s at position p: the part of x's block (read as it is held: the plan has
// gathered `s.dim` where a window crosses shards) that window w keeps, copied once into the
// result block `out` (laid out by s.spec_after; allocated by the first window step of a run,
// zero-filled when w.zeros). Along s.dim, result index j reads x's index j + w.shift.
template <class T, std::size_t Rank>
void run_window(const mesh_value& m, std::size_t p, const step<Rank>& s,
                const operand_block<T, Rank>& x, operand_block<T, Rank>& out,
                const window_payload& w) {
  const std::size_t d = s.dim;
  if (out.data == nullptr) {
    shape<Rank> out_global = x.global;
    out_global[d] = w.out_extent;
    buffer<T> block(host_tensor<T, Rank>::element_count(local_shape_of(m, s.spec_after,
                                                                        out_global, p)));
    if (w.zeros) std::fill_n(block.data(), block.size(), T{});
    out = operand_block<T, Rank>(nullptr, s.spec_after, out_global);
    out.adopt(std::move(block), s.spec_after);
  }
  const shape<Rank> in_local = local_shape_of(m, x.held, x.global, p);
  const shape<Rank> out_local = local_shape_of(m, out.held, out.global, p);
  const std::size_t in0 = index_of(m, x.held, x.global, p)[d].start;
  const std::size_t out0 = index_of(m, out.held, out.global, p)[d].start;
  const std::size_t outer = extent_product(out_local, 0, d);
  const std::size_t inner = extent_product(out_local, d + 1, Rank);
  const auto n_in = static_cast<std::ptrdiff_t>(w.in_extent);
  // The run of result indices [lo, hi) along d whose source is in range: one copy per outer
  // index of that run's contiguous elements.
  std::size_t lo = out_local[d], hi = 0;
  for (std::size_t j = 0; j < out_local[d]; ++j) {
    const std::ptrdiff_t g = static_cast<std::ptrdiff_t>(out0 + j) + w.shift;
    if (g < 0 || g >= n_in) continue;  // a pad's zero, or another operand's part
    lo = std::min(lo, j);
    hi = j + 1;
  }
  if (lo >= hi) return;
  const std::size_t src = static_cast<std::size_t>(
      static_cast<std::ptrdiff_t>(out0 + lo) + w.shift - static_cast<std::ptrdiff_t>(in0));
  T* dst = out.owned.data();
  for (std::size_t o = 0; o < outer; ++o)
    std::copy_n(x.data + (o * in_local[d] + src) * inner, (hi - lo) * inner,
                dst + (o * out_local[d] + lo) * inner);
}

}  // namespace typeshard::detail
