// typeshard/ops/detail/row_kernels.hpp: the row kernels of the row operations (ts::softmax,
// ts::log_softmax, ts::layer_norm and its backward), one per local_op (plan/step.hpp), as the
// executor (ops/detail/executor.hpp) dispatches them. Internal: do not rely on anything in
// detail/.
//
// A device's block is seen as rows along the step's dimension: [outer, n, inner] around it,
// outer * inner rows of n elements. A row operation keeps one device's row statistics in
// row_state::stats: slot 0 (the first `rows` values) and slot 1 (the next `rows`): softmax's
// row maximum and sum, layer_norm's mean and 1 / sqrt(var + eps), its backward's sums of g and
// g * y. The statistics and the arithmetic are in float for bfloat16 (its 8 fraction bits
// would lose a row sum), in T otherwise; each result element is rounded once. A block with no
// rows does nothing (its collective peers hold the same rows, so none waits for it); a block
// empty along the dimension (an uneven shard) contributes the identities (-inf, 0).
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>

#include "../../core/bfloat16.hpp"
#include "../../core/errors.hpp"
#include "../../core/layout.hpp"
#include "../../array/detail/buffer.hpp"
#include "../../kernels/functors.hpp"
#include "../../kernels/layer_norm_row.hpp"
#include "../../kernels/vector_math.hpp"
#include "../../plan/step.hpp"

namespace typeshard::detail {

// The type of the row statistics and the arithmetic: float for bfloat16, T otherwise.
template <class T>
using row_accumulator = std::conditional_t<std::is_same_v<T, bfloat16>, float, T>;

// One device's block as rows: [outer, n, inner] around the dimension.
struct row_geometry {
  std::size_t outer = 1, n = 0, inner = 1;
  std::size_t rows() const { return outer * inner; }
  std::size_t at(std::size_t r, std::size_t k) const {  // element k of row r
    return ((r / inner) * n + k) * inner + r % inner;
  }
};
template <std::size_t Rank>
row_geometry rows_of(const shape<Rank>& s, std::size_t dim) {
  row_geometry g;
  for (std::size_t d = 0; d < dim; ++d) g.outer *= s[d];
  for (std::size_t d = dim + 1; d < Rank; ++d) g.inner *= s[d];
  g.n = s[dim];
  return g;
}

// Row r of a block as A values: the block itself (contiguous rows of A), or a copy in `row`.
template <class A, class T>
const A* row_as(const T* x, const row_geometry& g, std::size_t r, A* row) {
  if constexpr (std::is_same_v<A, T>)
    if (g.inner == 1) return x + r * g.n;
  for (std::size_t k = 0; k < g.n; ++k) row[k] = static_cast<A>(x[g.at(r, k)]);
  return row;
}
// Stores an A row y into row r of a block (nothing when it is the block's own row).
template <class A, class T>
void store_row(const A* y, const row_geometry& g, std::size_t r, T* out) {
  if constexpr (std::is_same_v<A, T>)
    if (g.inner == 1) return;
  for (std::size_t k = 0; k < g.n; ++k) out[g.at(r, k)] = static_cast<T>(y[k]);
}
// The row r of `out` to write A results into: out's own row, or the scratch `row`.
template <class A, class T>
A* out_row(T* out, const row_geometry& g, std::size_t r, A* row) {
  if constexpr (std::is_same_v<A, T>)
    if (g.inner == 1) return out + r * g.n;
  return row;
}

// One device's state of a row operation: its statistics, the result block being written,
// and what layer_norm's backward reads besides the cotangent.
template <class T>
struct row_state {
  using A = row_accumulator<T>;
  buffer<A> stats;          // slot 0 then slot 1, `rows` values each
  buffer<T> out;            // the result block (softmax keeps exp(x - max) here for float rows)
  const T* y = nullptr;     // layer_norm's backward: the forward's result block
  const A* rstd = nullptr;  // layer_norm's backward: the forward's 1 / sqrt(var + eps) rows
  std::size_t rows() const { return stats.size() / 2; }
  A* slot(std::size_t k) { return stats.data() + k * rows(); }
};

// softmax's row kernels over contiguous float rows (inner == 1, A float): kernels::exp_sum
// (vectorised exp, the row sum in vector lanes); bfloat16 rows go through a float copy of one
// row. The float sum step leaves exp(x - max) in st.out for the normalisation.
template <class T>
void softmax_rows_contiguous(local_op op, const T* x, const row_geometry& g, row_state<T>& st) {
  const std::size_t rows = g.rows(), n = g.n;
  float* max = st.slot(0);
  float* sum = st.slot(1);
  T* out = st.out.data();
  buffer<float> row;
  if constexpr (!std::is_same_v<T, float>) row = buffer<float>(n);
  // The row as floats: x itself, or its float copy in `row`.
  const auto as_float = [&](std::size_t r) -> const float* {
    if constexpr (std::is_same_v<T, float>) {
      return x + r * n;
    } else {
      for (std::size_t k = 0; k < n; ++k) row.data()[k] = static_cast<float>(x[r * n + k]);
      return row.data();
    }
  };
  if (op == local_op::row_max) {
    for (std::size_t r = 0; r < rows; ++r) {
      float m = -std::numeric_limits<float>::infinity();
      for (std::size_t k = 0; k < n; ++k) m = fn::maximum(m, static_cast<float>(x[r * n + k]));
      max[r] = m;
    }
  } else if (op == local_op::row_exp_sum) {
    // float rows: the exponentials go to `out` (overwritten by the normalisation); bfloat16
    // rows: to the scratch row, recomputed by the normalisation (out holds bfloat16 only).
    for (std::size_t r = 0; r < rows; ++r) {
      float* y = row.data();
      if constexpr (std::is_same_v<T, float>) y = out + r * n;
      sum[r] = n == 0 ? 0.0f : kernels::exp_sum(as_float(r), max[r], y, n);
    }
  } else if (op == local_op::log_softmax_normalize) {  // (x - max) - log(sum)
    for (std::size_t r = 0; r < rows; ++r) {
      const float m = max[r], l = std::log(sum[r]);
      for (std::size_t k = 0; k < n; ++k)
        out[r * n + k] = static_cast<T>((static_cast<float>(x[r * n + k]) - m) - l);
    }
  } else {  // exp(x - max) / sum
    for (std::size_t r = 0; r < rows; ++r) {
      const float z = sum[r];
      if constexpr (std::is_same_v<T, float>) {
        float* y = out + r * n;  // exp(x - max), from the sum's step
        for (std::size_t k = 0; k < n; ++k) y[k] = y[k] / z;
      } else {
        (void)kernels::exp_sum(as_float(r), max[r], row.data(), n);
        for (std::size_t k = 0; k < n; ++k) out[r * n + k] = static_cast<T>(row.data()[k] / z);
      }
    }
  }
}

// softmax's row kernels: row_max, row_exp_sum, softmax_normalize, log_softmax_normalize.
template <class T>
void softmax_rows(local_op op, const T* x, const row_geometry& g, row_state<T>& st) {
  using A = row_accumulator<T>;
  if constexpr (std::is_same_v<A, float>) {
    if (g.inner == 1) return softmax_rows_contiguous(op, x, g, st);
  }
  const std::size_t outer = g.outer, n = g.n, inner = g.inner, rows = g.rows();
  A* max = st.slot(0);
  A* sum = st.slot(1);
  T* out = st.out.data();
  switch (op) {
    case local_op::row_max:
      for (std::size_t r = 0; r < rows; ++r) max[r] = -std::numeric_limits<A>::infinity();
      for (std::size_t o = 0; o < outer; ++o)
        for (std::size_t k = 0; k < n; ++k)
          for (std::size_t i = 0; i < inner; ++i)
            max[o * inner + i] =
                fn::maximum(max[o * inner + i], static_cast<A>(x[(o * n + k) * inner + i]));
      break;
    case local_op::row_exp_sum:
      for (std::size_t r = 0; r < rows; ++r) sum[r] = A{0};
      for (std::size_t o = 0; o < outer; ++o)
        for (std::size_t k = 0; k < n; ++k)
          for (std::size_t i = 0; i < inner; ++i)
            sum[o * inner + i] +=
                std::exp(static_cast<A>(x[(o * n + k) * inner + i]) - max[o * inner + i]);
      break;
    default: {
      const bool log = op == local_op::log_softmax_normalize;
      for (std::size_t o = 0; o < outer; ++o)
        for (std::size_t k = 0; k < n; ++k)
          for (std::size_t i = 0; i < inner; ++i) {
            const std::size_t e = (o * n + k) * inner + i;
            const A m = max[o * inner + i], z = sum[o * inner + i];
            const A v = static_cast<A>(x[e]);
            out[e] = static_cast<T>(log ? (v - m) - std::log(z) : std::exp(v - m) / z);
          }
      break;
    }
  }
}

// layer_norm's forward row kernels: row_sum, row_sq_dev_sum, layer_norm_normalize (count:
// the global extent along the dimension), or with `fused` the three passes of each whole
// row at once, the row in cache (a plan with no collective between them).
template <class T>
void layer_norm_rows(local_op op, bool fused, const T* x, const row_geometry& g,
                     std::size_t count, double eps_value, row_state<T>& st) {
  using A = row_accumulator<T>;
  const std::size_t rows = g.rows();
  const A eps = static_cast<A>(eps_value);
  const A inv_count = A(1) / static_cast<A>(count);
  buffer<A> row(g.n);
  A* mu = st.slot(0);
  A* rs = st.slot(1);
  T* out = st.out.data();
  if (fused) {
    for (std::size_t r = 0; r < rows; ++r) {
      const A* xr = row_as<A>(x, g, r, row.data());
      A* yr = out_row<A>(out, g, r, row.data());
      rs[r] = kernels::layer_norm_row(xr, yr, g.n, eps);
      store_row<A>(yr, g, r, out);
    }
  } else if (op == local_op::row_sum) {
    for (std::size_t r = 0; r < rows; ++r)
      mu[r] = kernels::row_sum(row_as<A>(x, g, r, row.data()), g.n);
  } else if (op == local_op::row_sq_dev_sum) {
    for (std::size_t r = 0; r < rows; ++r) {
      mu[r] *= inv_count;
      rs[r] = kernels::row_sum_sq_dev(row_as<A>(x, g, r, row.data()), mu[r], g.n);
    }
  } else {  // layer_norm_normalize
    for (std::size_t r = 0; r < rows; ++r) {
      rs[r] = A(1) / std::sqrt(rs[r] * inv_count + eps);
      const A* xr = row_as<A>(x, g, r, row.data());
      A* yr = out_row<A>(out, g, r, row.data());
      kernels::normalize_row(xr, mu[r], rs[r], yr, g.n);
      store_row<A>(yr, g, r, out);
    }
  }
}

// layer_norm's backward row kernels on the cotangent gr: layer_norm_grad_sums (slot 0: sum g,
// slot 1: sum g * y), layer_norm_grad (dx = (g - mean g - y mean(g y)) * rstd), or with
// `fused` both for each whole row at once (a plan with no collective between them).
template <class T>
void layer_norm_grad_rows(local_op op, bool fused, const T* gr, const row_geometry& geo,
                          std::size_t count, row_state<T>& st) {
  using A = row_accumulator<T>;
  const std::size_t rows = geo.rows();
  const A inv_count = A(1) / static_cast<A>(count);
  buffer<A> grow(geo.n), yrow(geo.n);
  const T* y = st.y;
  const A* rstd = st.rstd;
  T* dx = st.out.data();
  for (std::size_t r = 0; r < rows; ++r) {
    const A* g_r = row_as<A>(gr, geo, r, grow.data());
    const A* y_r = row_as<A>(y, geo, r, yrow.data());
    A sg, sgy;
    if (fused || op == local_op::layer_norm_grad_sums) {
      kernels::row_sums_g_gy(g_r, y_r, geo.n, sg, sgy);
      if (!fused) {
        st.slot(0)[r] = sg;
        st.slot(1)[r] = sgy;
        continue;
      }
    } else {
      sg = st.slot(0)[r];
      sgy = st.slot(1)[r];
    }
    A* d_r = out_row<A>(dx, geo, r, grow.data());  // g's scratch row
    kernels::layer_norm_backward_row(g_r, y_r, sg * inv_count, sgy * inv_count, rstd[r], d_r,
                                     geo.n);
    store_row<A>(d_r, geo, r, dx);
  }
}

// Runs row kernel `op` along dimension `dim` on block x (shape s); `fused`: the kernel and the
// ones of the same row operation that follow it with no collective between (layer_norm's).
// count: the global extent along dim; eps: layer_norm's. Allocates the statistics at a row
// operation's first step and the result block at the step that writes it. Softmax,
// LayerNorm: whether softmax's and layer_norm's kernels are built (a program that only takes
// softmaxes compiles no layer_norm kernel); a kernel not built is an internal error.
template <class T, std::size_t Rank, bool Softmax = true, bool LayerNorm = true>
void run_row_kernel(local_op op, bool fused, const T* x, const shape<Rank>& s, std::size_t dim,
                    std::size_t count, double eps, row_state<T>& st) {
  if constexpr (!is_floating_element_v<T>) {
    (void)op, (void)fused, (void)x, (void)s, (void)dim, (void)count, (void)eps, (void)st;
    throw_internal("typeshard: internal: a row kernel on a non floating-point block");
  } else {
    const row_geometry g = rows_of(s, dim);
    if (op == local_op::row_max || op == local_op::row_sum ||
        op == local_op::layer_norm_grad_sums)
      st.stats = buffer<row_accumulator<T>>(2 * g.rows());
    const bool writes = fused || op == local_op::row_exp_sum ||
                        op == local_op::softmax_normalize ||
                        op == local_op::log_softmax_normalize ||
                        op == local_op::layer_norm_normalize || op == local_op::layer_norm_grad;
    if (writes && st.out.size() != g.rows() * g.n) st.out = buffer<T>(g.rows() * g.n);
    if (g.rows() == 0) return;
    switch (op) {
      case local_op::row_max:
      case local_op::row_exp_sum:
      case local_op::softmax_normalize:
      case local_op::log_softmax_normalize:
        if constexpr (Softmax) return softmax_rows(op, x, g, st);
        break;
      case local_op::row_sum:
      case local_op::row_sq_dev_sum:
      case local_op::layer_norm_normalize:
        if constexpr (LayerNorm) return layer_norm_rows(op, fused, x, g, count, eps, st);
        break;
      case local_op::layer_norm_grad_sums:
      case local_op::layer_norm_grad:
        if constexpr (LayerNorm) return layer_norm_grad_rows(op, fused, x, g, count, st);
        break;
      default:
        throw_internal("typeshard: internal: not a row kernel");
    }
    throw_internal("typeshard: internal: a row kernel of a family the run was not built for");
  }
}

}  // namespace typeshard::detail
