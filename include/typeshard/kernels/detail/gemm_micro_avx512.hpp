// typeshard/kernels/detail/gemm_micro_avx512.hpp: the AVX-512 micro-kernels of the packed GEMM
// (gemm_blocked.hpp), float and double. Internal: use kernels::gemm.
//
// Contract (every micro-kernel): tile[mr x nr] (row stride ldt) = (load ? tile : 0) +
// sum over p < kc of a_strip[p][i] * b_strip[p][j], with both strips packed and 64-byte
// aligned; this one reads A's strip packed by rows instead, a_strip[i * ka + p]
// (pack_a_rows). Here mr x nr = 14 x (2 vectors of 512 bits): 28 of the 32 zmm registers
// accumulate, 2 hold B, and A's values are broadcast straight from memory into the FMA
// ({1toN} operands). Per k step: 28 FMAs for 2 vector loads and 14 scalar broadcasts, so the
// two FMA pipes, not the load ports, set the pace; 28 independent chains cover the FMA
// latency (4 cycles x 2 pipes = 8 needed) with room to spare.
//
// Compiled for that target only (no -march flag needed); gemm_isa.hpp decides at run time
// whether the CPU runs it.
#pragma once

#include <cstddef>
#include <type_traits>

#include "../gemm_isa.hpp"
#include "simd.hpp"

namespace typeshard::kernels::detail {
// The tile's rows; its columns are 2 vectors. gemm_blocking<T, avx512> packs A to match.
inline constexpr std::size_t micro_avx512_mr = 14;
}  // namespace typeshard::kernels::detail

#if defined(TYPESHARD_GEMM_X86)

namespace typeshard::kernels::detail {

#define TYPESHARD_GEMM_AVX512_TARGET __attribute__((target("avx512f,avx512dq,avx512vl,fma")))

// One name per operation for both element types, so the kernel below is written once
// (simd.hpp: the builtins immintrin.h's 512-bit intrinsics wrap).
namespace avx512 {
using simd::f32x16;
using simd::f64x8;
TYPESHARD_GEMM_AVX512_TARGET inline f32x16 zero(float) { return f32x16{}; }
TYPESHARD_GEMM_AVX512_TARGET inline f64x8 zero(double) { return f64x8{}; }
TYPESHARD_GEMM_AVX512_TARGET inline f32x16 load(const float* p) {
  return *reinterpret_cast<const simd::f32x16_a*>(p);
}
TYPESHARD_GEMM_AVX512_TARGET inline f64x8 load(const double* p) {
  return *reinterpret_cast<const simd::f64x8_a*>(p);
}
TYPESHARD_GEMM_AVX512_TARGET inline f32x16 loadu(const float* p) {
  return *reinterpret_cast<const simd::f32x16_u*>(p);
}
TYPESHARD_GEMM_AVX512_TARGET inline f64x8 loadu(const double* p) {
  return *reinterpret_cast<const simd::f64x8_u*>(p);
}
TYPESHARD_GEMM_AVX512_TARGET inline void storeu(float* p, f32x16 v) {
  *reinterpret_cast<simd::f32x16_u*>(p) = v;
}
TYPESHARD_GEMM_AVX512_TARGET inline void storeu(double* p, f64x8 v) {
  *reinterpret_cast<simd::f64x8_u*>(p) = v;
}
TYPESHARD_GEMM_AVX512_TARGET inline f32x16 set1(float x) {
  return f32x16{x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x};
}
TYPESHARD_GEMM_AVX512_TARGET inline f64x8 set1(double x) { return f64x8{x, x, x, x, x, x, x, x}; }
TYPESHARD_GEMM_AVX512_TARGET inline f32x16 fma(f32x16 a, f32x16 b, f32x16 c) {
  return __builtin_ia32_vfmaddps512_mask(a, b, c, static_cast<unsigned short>(-1),
                                         simd::round_current);
}
TYPESHARD_GEMM_AVX512_TARGET inline f64x8 fma(f64x8 a, f64x8 b, f64x8 c) {
  return __builtin_ia32_vfmaddpd512_mask(a, b, c, static_cast<unsigned char>(-1),
                                         simd::round_current);
}
TYPESHARD_GEMM_AVX512_TARGET inline f32x16 add(f32x16 a, f32x16 b) { return a + b; }
TYPESHARD_GEMM_AVX512_TARGET inline f64x8 add(f64x8 a, f64x8 b) { return a + b; }
}  // namespace avx512

// With ka > 0, A is packed by rows (pack_a_rows): a[i*ka + p], so the broadcasts read at
// constant offsets from one pointer, which advances by one value per step; with ka == 0,
// interleaved (pack_a): a[p*mr + i].
template <std::size_t ka, class T>
TYPESHARD_GEMM_AVX512_TARGET void micro_kernel_avx512(std::size_t kc, const T* a, const T* b,
                                                      T* tile, std::size_t ldt, bool load) {
  using V = typename simd::vec<T, 64>::type;
  constexpr std::size_t mr = micro_avx512_mr;
  constexpr std::size_t lanes = 64 / sizeof(T);
  static_assert(mr == 14, "typeshard: internal: the unroll pragmas below assume 14 rows");
  // Fully unrolled over the rows, so the accumulator arrays become 28 registers.
  V c0[mr], c1[mr];
#pragma GCC unroll 14
  for (std::size_t i = 0; i < mr; ++i) {
    c0[i] = c1[i] = avx512::zero(T{});
    // The tile of C is touched only after the k loop: fetch it meanwhile. Its rows are ldt
    // apart (often a page or more), which the hardware prefetcher does not follow.
    simd::prefetch(tile + i * ldt);
    simd::prefetch(tile + i * ldt + 2 * lanes - 1);
  }
  for (std::size_t p = 0; p < kc; ++p) {
    const V b0 = avx512::load(b);
    const V b1 = avx512::load(b + lanes);
#pragma GCC unroll 14
    for (std::size_t i = 0; i < mr; ++i) {
      const V ai = avx512::set1(a[i * (ka != 0 ? ka : 1)]);
      c0[i] = avx512::fma(ai, b0, c0[i]);
      c1[i] = avx512::fma(ai, b1, c1[i]);
    }
    a += ka != 0 ? 1 : mr;
    b += 2 * lanes;
  }
#pragma GCC unroll 14
  for (std::size_t i = 0; i < mr; ++i) {
    T* t = tile + i * ldt;
    V r0 = c0[i], r1 = c1[i];
    if (load) {
      r0 = avx512::add(r0, avx512::loadu(t));
      r1 = avx512::add(r1, avx512::loadu(t + lanes));
    }
    avx512::storeu(t, r0);
    avx512::storeu(t + lanes, r1);
  }
}

}  // namespace typeshard::kernels::detail

#endif  // TYPESHARD_GEMM_X86
