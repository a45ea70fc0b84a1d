// typeshard/kernels/detail/gemm_micro_avx2.hpp: the AVX2 + FMA micro-kernels of the packed
// GEMM (gemm_blocked.hpp), float and double. Internal: use kernels::gemm.
//
// Contract (every micro-kernel): tile[mr x nr] (row stride ldt) = (load ? tile : 0) +
// sum over p < kc of a_strip[p][i] * b_strip[p][j], with both strips packed and 64-byte
// aligned. Here mr x nr = 6 x (2 vectors of 256 bits): 12 of the 16 registers accumulate,
// 2 hold B, 1 a broadcast of A. Compiled for that target only (no -march flag needed);
// gemm_isa.hpp decides at run time whether the CPU runs it.
#pragma once

#include <cstddef>

#include "../gemm_isa.hpp"

#if defined(TYPESHARD_GEMM_X86)
#include <immintrin.h>

namespace typeshard::kernels::detail {

#define TYPESHARD_GEMM_AVX2_TARGET __attribute__((target("avx2,fma")))

// The 6-row tile of C is touched only after the k loop: fetch it meanwhile. Its rows are ldt
// apart (often a page or more), which the hardware prefetcher does not follow.
template <class T>
inline void prefetch_tile(const T* tile, std::size_t ldt, std::size_t cols) {
  for (std::size_t i = 0; i < 6; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(tile + i * ldt), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(tile + i * ldt + cols - 1), _MM_HINT_T0);
  }
}

TYPESHARD_GEMM_AVX2_TARGET inline void micro_kernel_avx2(std::size_t kc, const float* a,
                                                         const float* b, float* tile,
                                                         std::size_t ldt, bool load) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  prefetch_tile(tile, ldt, 16);
  for (std::size_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_load_ps(b);
    const __m256 b1 = _mm256_load_ps(b + 8);
    __m256 ai = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(ai, b0, c00);
    c01 = _mm256_fmadd_ps(ai, b1, c01);
    ai = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(ai, b0, c10);
    c11 = _mm256_fmadd_ps(ai, b1, c11);
    ai = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(ai, b0, c20);
    c21 = _mm256_fmadd_ps(ai, b1, c21);
    ai = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(ai, b0, c30);
    c31 = _mm256_fmadd_ps(ai, b1, c31);
    ai = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(ai, b0, c40);
    c41 = _mm256_fmadd_ps(ai, b1, c41);
    ai = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(ai, b0, c50);
    c51 = _mm256_fmadd_ps(ai, b1, c51);
    a += 6;
    b += 16;
  }
  const __m256 rows[6][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                             {c30, c31}, {c40, c41}, {c50, c51}};
  for (std::size_t i = 0; i < 6; ++i) {
    float* t = tile + i * ldt;
    __m256 r0 = rows[i][0], r1 = rows[i][1];
    if (load) {
      r0 = _mm256_add_ps(r0, _mm256_loadu_ps(t));
      r1 = _mm256_add_ps(r1, _mm256_loadu_ps(t + 8));
    }
    _mm256_storeu_ps(t, r0);
    _mm256_storeu_ps(t + 8, r1);
  }
}

TYPESHARD_GEMM_AVX2_TARGET inline void micro_kernel_avx2(std::size_t kc, const double* a,
                                                         const double* b, double* tile,
                                                         std::size_t ldt, bool load) {
  __m256d c00 = _mm256_setzero_pd(), c01 = _mm256_setzero_pd();
  __m256d c10 = _mm256_setzero_pd(), c11 = _mm256_setzero_pd();
  __m256d c20 = _mm256_setzero_pd(), c21 = _mm256_setzero_pd();
  __m256d c30 = _mm256_setzero_pd(), c31 = _mm256_setzero_pd();
  __m256d c40 = _mm256_setzero_pd(), c41 = _mm256_setzero_pd();
  __m256d c50 = _mm256_setzero_pd(), c51 = _mm256_setzero_pd();
  prefetch_tile(tile, ldt, 8);
  for (std::size_t p = 0; p < kc; ++p) {
    const __m256d b0 = _mm256_load_pd(b);
    const __m256d b1 = _mm256_load_pd(b + 4);
    __m256d ai = _mm256_broadcast_sd(a + 0);
    c00 = _mm256_fmadd_pd(ai, b0, c00);
    c01 = _mm256_fmadd_pd(ai, b1, c01);
    ai = _mm256_broadcast_sd(a + 1);
    c10 = _mm256_fmadd_pd(ai, b0, c10);
    c11 = _mm256_fmadd_pd(ai, b1, c11);
    ai = _mm256_broadcast_sd(a + 2);
    c20 = _mm256_fmadd_pd(ai, b0, c20);
    c21 = _mm256_fmadd_pd(ai, b1, c21);
    ai = _mm256_broadcast_sd(a + 3);
    c30 = _mm256_fmadd_pd(ai, b0, c30);
    c31 = _mm256_fmadd_pd(ai, b1, c31);
    ai = _mm256_broadcast_sd(a + 4);
    c40 = _mm256_fmadd_pd(ai, b0, c40);
    c41 = _mm256_fmadd_pd(ai, b1, c41);
    ai = _mm256_broadcast_sd(a + 5);
    c50 = _mm256_fmadd_pd(ai, b0, c50);
    c51 = _mm256_fmadd_pd(ai, b1, c51);
    a += 6;
    b += 8;
  }
  const __m256d rows[6][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                              {c30, c31}, {c40, c41}, {c50, c51}};
  for (std::size_t i = 0; i < 6; ++i) {
    double* t = tile + i * ldt;
    __m256d r0 = rows[i][0], r1 = rows[i][1];
    if (load) {
      r0 = _mm256_add_pd(r0, _mm256_loadu_pd(t));
      r1 = _mm256_add_pd(r1, _mm256_loadu_pd(t + 4));
    }
    _mm256_storeu_pd(t, r0);
    _mm256_storeu_pd(t + 4, r1);
  }
}

}  // namespace typeshard::kernels::detail

#endif  // TYPESHARD_GEMM_X86
