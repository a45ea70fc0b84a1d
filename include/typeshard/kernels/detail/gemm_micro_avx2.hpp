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

// One name per operation for both element types, so the kernel below is written once
// (simd.hpp: the builtins immintrin.h's 256-bit intrinsics wrap).
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

// A is packed by rows (pack_a_rows): a[i*ka + p], read at constant offsets.
template <std::size_t ka, class T>
TYPESHARD_GEMM_AVX2_TARGET inline void micro_kernel_avx2(std::size_t kc, const T* a, const T* b,
                                                         T* tile, std::size_t ldt, bool load) {
  using V = typename simd::vec<T, 32>::type;
  constexpr std::size_t lanes = 32 / sizeof(T);
  // The 12 accumulators written out (not an array, as in the AVX-512 kernel): 12 of the 16
  // registers, so nothing may spill.
  V c00 = V{}, c01 = V{};
  V c10 = V{}, c11 = V{};
  V c20 = V{}, c21 = V{};
  V c30 = V{}, c31 = V{};
  V c40 = V{}, c41 = V{};
  V c50 = V{}, c51 = V{};
  prefetch_tile(tile, ldt, 2 * lanes);
  // Unrolled by 4: the loop's own pointer steps and branch took issue slots the 12 FMAs
  // need (measured on Zen 3: docs/reference/kernels/gemm.md). Same FMAs, same order.
#pragma GCC unroll 4
  for (std::size_t p = 0; p < kc; ++p) {
    const V b0 = avx2::load(b);
    const V b1 = avx2::load(b + lanes);
    V ai = avx2::broadcast(a);
    c00 = avx2::fma(ai, b0, c00);
    c01 = avx2::fma(ai, b1, c01);
    ai = avx2::broadcast(a + 1 * ka);
    c10 = avx2::fma(ai, b0, c10);
    c11 = avx2::fma(ai, b1, c11);
    ai = avx2::broadcast(a + 2 * ka);
    c20 = avx2::fma(ai, b0, c20);
    c21 = avx2::fma(ai, b1, c21);
    ai = avx2::broadcast(a + 3 * ka);
    c30 = avx2::fma(ai, b0, c30);
    c31 = avx2::fma(ai, b1, c31);
    ai = avx2::broadcast(a + 4 * ka);
    c40 = avx2::fma(ai, b0, c40);
    c41 = avx2::fma(ai, b1, c41);
    ai = avx2::broadcast(a + 5 * ka);
    c50 = avx2::fma(ai, b0, c50);
    c51 = avx2::fma(ai, b1, c51);
    a += 1;
    b += 2 * lanes;
  }
  const V rows[6][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                        {c30, c31}, {c40, c41}, {c50, c51}};
  for (std::size_t i = 0; i < 6; ++i) {
    T* t = tile + i * ldt;
    V r0 = rows[i][0], r1 = rows[i][1];
    if (load) {
      r0 = r0 + avx2::loadu(t);
      r1 = r1 + avx2::loadu(t + lanes);
    }
    avx2::storeu(t, r0);
    avx2::storeu(t + lanes, r1);
  }
}

}  // namespace typeshard::kernels::detail

#endif  // TYPESHARD_GEMM_X86
