// typeshard/ops/detail/reduce_kernel.hpp: one device's reduction of its block, the kernel of
// a `local_reduce` step with local_op::reduce (ts::sum, mean, max and min; run by the
// executor, ops/detail/executor.hpp, and by the block forms in ops/reduce.hpp). Internal: do
// not rely on anything in detail/.
#pragma once

#include <array>
#include <cstddef>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include "../../core/bfloat16.hpp"
#include "../../core/errors.hpp"
#include "../../core/layout.hpp"
#include "../../array/detail/buffer.hpp"
#include "../../kernels/functors.hpp"
#include "../../plan/reduce_plan.hpp"

namespace typeshard::detail {

// Whether T has a reduction kernel: the arithmetic types but bool, and bfloat16.
template <class T>
inline constexpr bool reducible_element_v =
    (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) || std::is_same_v<T, bfloat16>;

// The identity of a reduction: what an empty block (uneven shards) contributes.
template <class T>
constexpr T reduce_identity(reduction op) {
  if (op == reduction::max)
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::lowest();
  if (op == reduction::min)
    return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::max();
  return T{};
}

// out[j] = f(out[j], in[i]) for every element i of a row-major block of shape `s`, j its
// index with the masked dimensions dropped. The innermost dimension runs as a plain loop
// (a running value when it is reduced, a vector update when it is not).
template <class T, std::size_t Rank, class F>
void reduce_block_rows(const T* in, const shape<Rank>& s, const std::array<bool, Rank>& mask,
                       T* out, F f) {
  std::array<std::size_t, Rank> stride{};
  std::size_t st = 1;
  std::size_t n = 1;
  for (std::size_t d = Rank; d-- > 0;) {
    stride[d] = mask[d] ? 0 : st;
    if (!mask[d]) st *= s[d];
    n *= s[d];
  }
  if (n == 0) return;
  const std::size_t len = s[Rank - 1];
  const std::size_t inner = stride[Rank - 1];
  std::array<std::size_t, Rank> idx{};
  std::size_t o = 0;
  for (std::size_t i = 0; i < n; i += len) {
    if (inner == 0) {
      T acc = out[o];
      for (std::size_t k = 0; k < len; ++k) acc = f(acc, in[i + k]);
      out[o] = acc;
    } else {
      for (std::size_t k = 0; k < len; ++k) out[o + k] = f(out[o + k], in[i + k]);
    }
    for (std::size_t d = Rank - 1; d-- > 0;) {
      o += stride[d];
      if (++idx[d] < s[d]) break;
      o -= stride[d] * s[d];
      idx[d] = 0;
    }
  }
}

// reduce_block at any rank (a rank-0 block is its one element).
template <class T, std::size_t Rank, class F>
void reduce_block(const T* in, const shape<Rank>& s, const std::array<bool, Rank>& mask, T* out,
                  F f) {
  if constexpr (Rank == 0) {  // a rank-0 block: its one element
    (void)s, (void)mask;
    *out = f(*out, *in);
  } else {
    reduce_block_rows(in, s, mask, out, f);
  }
}

// The local_reduce step on one device's block: the block of the result (reduced dimensions
// extent 1) as a new buffer; mean's partial sums scaled by 1 / count.
template <class T, std::size_t Rank, bool Sums = true, bool Extrema = true>
buffer<T> local_reduce(reduction op, std::span<const T> in, const shape<Rank>& s,
                       const std::array<bool, Rank>& mask, double count) {
  if constexpr (std::is_same_v<T, bfloat16>) {  // accumulated in float, rounded once
    const std::vector<float> wide(in.begin(), in.end());
    const buffer<float> r = local_reduce<float, Rank, Sums, Extrema>(op, wide, s, mask, count);
    buffer<T> out(r.size());
    for (std::size_t i = 0; i < r.size(); ++i) out.data()[i] = bfloat16(r.data()[i]);
    return out;
  }
  std::size_t n = 1;
  for (std::size_t d = 0; d < Rank; ++d) n *= mask[d] ? 1 : s[d];
  buffer<T> out(n);
  T* o = out.data();
  for (std::size_t i = 0; i < n; ++i) o[i] = reduce_identity<T>(op);
  switch (op) {
    case reduction::sum:
    case reduction::mean:
      if constexpr (!Sums) throw_internal("typeshard: internal: a sum kernel not built");
      else reduce_block(in.data(), s, mask, o, fn::plus);
      break;
    case reduction::max:
      if constexpr (!Extrema) throw_internal("typeshard: internal: a max kernel not built");
      else reduce_block(in.data(), s, mask, o, fn::maximum);
      break;
    case reduction::min:
      if constexpr (!Extrema) throw_internal("typeshard: internal: a min kernel not built");
      else reduce_block(in.data(), s, mask, o, fn::minimum);
      break;
  }
  if constexpr (std::is_floating_point_v<T>)
    if (op == reduction::mean) {
      const T scale = static_cast<T>(1.0 / count);
      for (std::size_t i = 0; i < n; ++i) o[i] *= scale;
    }
  return out;
}

}  // namespace typeshard::detail
