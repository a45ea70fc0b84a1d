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
#include "simd.hpp"

#if defined(TYPESHARD_GEMM_X86)

namespace typeshard::kernels::detail {

#define TYPESHARD_GEMM_AVX2_TARGET __attribute__((target("avx2,fma")))

// The operations of the kernels below (simd.hpp: the builtins immintrin.h's 256-bit
// intrinsics wrap).
namespace avx2 {
using simd::f32x8;
using simd::f64x4;
TYPESHARD_GEMM_AVX2_TARGET inline f32x8 load(const float* p) {
  return *reinterpret_cast<const simd::f32x8_a*>(p);
}
TYPESHARD_GEMM_AVX2_TARGET inline f64x4 load(const double* p) {
  return *reinterpret_cast<const simd::f64x4_a*>(p);
}
TYPESHARD_GEMM_AVX2_TARGET inline f32x8 loadu(const float* p) {
  return *reinterpret_cast<const simd::f32x8_u*>(p);
}
TYPESHARD_GEMM_AVX2_TARGET inline f64x4 loadu(const double* p) {
  return *reinterpret_cast<const simd::f64x4_u*>(p);
}
TYPESHARD_GEMM_AVX2_TARGET inline void storeu(float* p, f32x8 v) {
  *reinterpret_cast<simd::f32x8_u*>(p) = v;
}
TYPESHARD_GEMM_AVX2_TARGET inline void storeu(double* p, f64x4 v) {
  *reinterpret_cast<simd::f64x4_u*>(p) = v;
}
TYPESHARD_GEMM_AVX2_TARGET inline f32x8 broadcast(const float* p) {
  const float x = *p;
  return f32x8{x, x, x, x, x, x, x, x};
}
TYPESHARD_GEMM_AVX2_TARGET inline f64x4 broadcast(const double* p) {
  const double x = *p;
  return f64x4{x, x, x, x};
}
TYPESHARD_GEMM_AVX2_TARGET inline f32x8 fma(f32x8 a, f32x8 b, f32x8 c) {
  return __builtin_ia32_vfmaddps256(a, b, c);
}
TYPESHARD_GEMM_AVX2_TARGET inline f64x4 fma(f64x4 a, f64x4 b, f64x4 c) {
  return __builtin_ia32_vfmaddpd256(a, b, c);
}
}  // namespace avx2

// The 6-row tile of C is touched only after the k loop: fetch it meanwhile. Its rows are ldt
// apart (often a page or more), which the hardware prefetcher does not follow.
template <class T>
inline void prefetch_tile(const T* tile, std::size_t ldt, std::size_t cols) {
  for (std::size_t i = 0; i < 6; ++i) {
    simd::prefetch(tile + i * ldt);
    simd::prefetch(tile + i * ldt + cols - 1);
  }
}

TYPESHARD_GEMM_AVX2_TARGET inline void micro_kernel_avx2(std::size_t kc, const float* a,
                                                         const float* b, float* tile,
                                                         std::size_t ldt, bool load) {
  avx2::f32x8 c00 = avx2::f32x8{}, c01 = avx2::f32x8{};
  avx2::f32x8 c10 = avx2::f32x8{}, c11 = avx2::f32x8{};
  avx2::f32x8 c20 = avx2::f32x8{}, c21 = avx2::f32x8{};
  avx2::f32x8 c30 = avx2::f32x8{}, c31 = avx2::f32x8{};
  avx2::f32x8 c40 = avx2::f32x8{}, c41 = avx2::f32x8{};
  avx2::f32x8 c50 = avx2::f32x8{}, c51 = avx2::f32x8{};
  prefetch_tile(tile, ldt, 16);
  for (std::size_t p = 0; p < kc; ++p) {
    const avx2::f32x8 b0 = avx2::load(b);
    const avx2::f32x8 b1 = avx2::load(b + 8);
    avx2::f32x8 ai = avx2::broadcast(a + 0);
    c00 = avx2::fma(ai, b0, c00);
    c01 = avx2::fma(ai, b1, c01);
    ai = avx2::broadcast(a + 1);
    c10 = avx2::fma(ai, b0, c10);
    c11 = avx2::fma(ai, b1, c11);
    ai = avx2::broadcast(a + 2);
    c20 = avx2::fma(ai, b0, c20);
    c21 = avx2::fma(ai, b1, c21);
    ai = avx2::broadcast(a + 3);
    c30 = avx2::fma(ai, b0, c30);
    c31 = avx2::fma(ai, b1, c31);
    ai = avx2::broadcast(a + 4);
    c40 = avx2::fma(ai, b0, c40);
    c41 = avx2::fma(ai, b1, c41);
    ai = avx2::broadcast(a + 5);
    c50 = avx2::fma(ai, b0, c50);
    c51 = avx2::fma(ai, b1, c51);
    a += 6;
    b += 16;
  }
  const avx2::f32x8 rows[6][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                             {c30, c31}, {c40, c41}, {c50, c51}};
  for (std::size_t i = 0; i < 6; ++i) {
    float* t = tile + i * ldt;
    avx2::f32x8 r0 = rows[i][0], r1 = rows[i][1];
    if (load) {
      r0 = r0 + avx2::loadu(t);
      r1 = r1 + avx2::loadu(t + 8);
    }
    avx2::storeu(t, r0);
    avx2::storeu(t + 8, r1);
  }
}

TYPESHARD_GEMM_AVX2_TARGET inline void micro_kernel_avx2(std::size_t kc, const double* a,
                                                         const double* b, double* tile,
                                                         std::size_t ldt, bool load) {
  avx2::f64x4 c00 = avx2::f64x4{}, c01 = avx2::f64x4{};
  avx2::f64x4 c10 = avx2::f64x4{}, c11 = avx2::f64x4{};
  avx2::f64x4 c20 = avx2::f64x4{}, c21 = avx2::f64x4{};
  avx2::f64x4 c30 = avx2::f64x4{}, c31 = avx2::f64x4{};
  avx2::f64x4 c40 = avx2::f64x4{}, c41 = avx2::f64x4{};
  avx2::f64x4 c50 = avx2::f64x4{}, c51 = avx2::f64x4{};
  prefetch_tile(tile, ldt, 8);
  for (std::size_t p = 0; p < kc; ++p) {
    const avx2::f64x4 b0 = avx2::load(b);
    const avx2::f64x4 b1 = avx2::load(b + 4);
    avx2::f64x4 ai = avx2::broadcast(a + 0);
    c00 = avx2::fma(ai, b0, c00);
    c01 = avx2::fma(ai, b1, c01);
    ai = avx2::broadcast(a + 1);
    c10 = avx2::fma(ai, b0, c10);
    c11 = avx2::fma(ai, b1, c11);
    ai = avx2::broadcast(a + 2);
    c20 = avx2::fma(ai, b0, c20);
    c21 = avx2::fma(ai, b1, c21);
    ai = avx2::broadcast(a + 3);
    c30 = avx2::fma(ai, b0, c30);
    c31 = avx2::fma(ai, b1, c31);
    ai = avx2::broadcast(a + 4);
    c40 = avx2::fma(ai, b0, c40);
    c41 = avx2::fma(ai, b1, c41);
    ai = avx2::broadcast(a + 5);
    c50 = avx2::fma(ai, b0, c50);
    c51 = avx2::fma(ai, b1, c51);
    a += 6;
    b += 8;
  }
  const avx2::f64x4 rows[6][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                              {c30, c31}, {c40, c41}, {c50, c51}};
  for (std::size_t i = 0; i < 6; ++i) {
    double* t = tile + i * ldt;
    avx2::f64x4 r0 = rows[i][0], r1 = rows[i][1];
    if (load) {
      r0 = r0 + avx2::loadu(t);
      r1 = r1 + avx2::loadu(t + 4);
    }
    avx2::storeu(t, r0);
    avx2::storeu(t + 4, r1);
  }
}

}  // namespace typeshard::kernels::detail

#endif  // TYPESHARD_GEMM_X86
