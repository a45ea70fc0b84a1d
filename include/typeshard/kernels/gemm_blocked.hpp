// typeshard/kernels/gemm_blocked.hpp: the portable per-shard GEMM (no BLAS needed).
//
//   gemm_blocked<T>(m, n, k, a, lda, b, ldb, c, ldc, accumulate)
//
// Row-major C[m x n] = A[m x k] . B[k x n] (or C += when accumulate), for float and double.
// Used by kernels::gemm when no CBLAS is linked, and directly by its tests and benchmark.
#pragma once

#include <cstddef>

namespace typeshard::kernels {

template <class T>
void gemm_blocked(std::size_t m, std::size_t n, std::size_t k, const T* a, std::size_t lda,
                  const T* b, std::size_t ldb, T* c, std::size_t ldc, bool accumulate = false) {
  for (std::size_t i = 0; i < m; ++i) {
    T* ci = c + i * ldc;
    if (!accumulate)
      for (std::size_t j = 0; j < n; ++j) ci[j] = T(0);
    for (std::size_t p = 0; p < k; ++p) {
      const T aip = a[i * lda + p];
      const T* bp = b + p * ldb;
      for (std::size_t j = 0; j < n; ++j) ci[j] += aip * bp[j];
    }
  }
}

}  // namespace typeshard::kernels
