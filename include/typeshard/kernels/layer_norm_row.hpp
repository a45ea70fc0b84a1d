// typeshard/kernels/layer_norm_row.hpp: the row kernels of ts::layer_norm, forward and
// backward, over one contiguous row of n elements (float or double; bfloat16 rows go through
// a float copy).
//
//   A s   = kernels::row_sum(x, n);                     // sum of x[k]
//   A ssd = kernels::row_sum_sq_dev(x, mu, n);          // sum of (x[k] - mu)^2
//   kernels::normalize_row(x, mu, rstd, y, n);          // y[k] = (x[k] - mu) * rstd
//   kernels::row_sums_g_gy(g, y, n, sg, sgy);           // sum of g[k], sum of g[k] * y[k]
//   kernels::layer_norm_backward_row(g, y, mg, mgy, rstd, dx, n);
//                                                       // dx = (g - mg - y * mgy) * rstd
//   A rstd = kernels::layer_norm_row(x, y, n, eps);     // the three passes of a whole row
//
// The sums accumulate in 8 independent lanes (so the compiler vectorises them without
// reassociating a serial sum), so they may differ from a serial sum by rounding. The row is
// read two or three times by the caller: it stays in cache between the passes.
#pragma once

#include <cmath>
#include <cstddef>

namespace typeshard::kernels {

// row_sum(x, n): the sum of x[0..n), in 8 lanes.
template <class A>
[[nodiscard]] A row_sum(const A* x, std::size_t n) {
  A s[8] = {};
  std::size_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (std::size_t j = 0; j < 8; ++j) s[j] += x[k + j];
  for (; k < n; ++k) s[0] += x[k];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// row_sum_sq_dev(x, mu, n): the sum of (x[k] - mu)^2, in 8 lanes.
template <class A>
[[nodiscard]] A row_sum_sq_dev(const A* x, A mu, std::size_t n) {
  A s[8] = {};
  std::size_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (std::size_t j = 0; j < 8; ++j) {
      const A d = x[k + j] - mu;
      s[j] += d * d;
    }
  for (; k < n; ++k) s[0] += (x[k] - mu) * (x[k] - mu);
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// normalize_row(x, mu, rstd, y, n): y[k] = (x[k] - mu) * rstd (x == y allowed).
template <class A>
void normalize_row(const A* x, A mu, A rstd, A* y, std::size_t n) {
  for (std::size_t k = 0; k < n; ++k) y[k] = (x[k] - mu) * rstd;
}

// row_sums_g_gy(g, y, n, sg, sgy): sg = sum of g[k], sgy = sum of g[k] * y[k], one pass.
template <class A>
void row_sums_g_gy(const A* g, const A* y, std::size_t n, A& sg, A& sgy) {
  A s[8] = {}, t[8] = {};
  std::size_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (std::size_t j = 0; j < 8; ++j) {
      s[j] += g[k + j];
      t[j] += g[k + j] * y[k + j];
    }
  for (; k < n; ++k) {
    s[0] += g[k];
    t[0] += g[k] * y[k];
  }
  sg = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  sgy = ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
}

// layer_norm_backward_row(g, y, mg, mgy, rstd, dx, n): dx[k] = (g[k] - mg - y[k] * mgy) * rstd
// (mg, mgy: the row means of g and g * y; dx == g allowed).
template <class A>
void layer_norm_backward_row(const A* g, const A* y, A mg, A mgy, A rstd, A* dx,
                             std::size_t n) {
  for (std::size_t k = 0; k < n; ++k) dx[k] = (g[k] - mg - y[k] * mgy) * rstd;
}

// layer_norm_row(x, y, n, eps): one whole row (the dimension not sharded) normalised,
// mean and variance in two passes, then the normalise pass; returns 1 / sqrt(var + eps).
template <class A>
A layer_norm_row(const A* x, A* y, std::size_t n, A eps) {
  const A mu = row_sum(x, n) / static_cast<A>(n);
  const A rstd = A(1) / std::sqrt(row_sum_sq_dev(x, mu, n) / static_cast<A>(n) + eps);
  normalize_row(x, mu, rstd, y, n);
  return rstd;
}

}  // namespace typeshard::kernels
