// typeshard/kernels/detail/gemm_micro_avx512.hpp: the AVX-512 micro-kernels of the packed GEMM
// (gemm_blocked.hpp), float and double. Internal: use kernels::gemm.
//
// Contract (every micro-kernel): tile[mr x nr] (row stride ldt) = (load ? tile : 0) +
// sum over p < kc of a_strip[p][i] * b_strip[p][j], with both strips packed and 64-byte
// aligned. Here mr x nr = 14 x (2 vectors of 512 bits): 28 of the 32 zmm registers
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

namespace typeshard::kernels::detail {
// The tile's rows; its columns are 2 vectors. gemm_blocking<T, avx512> packs A to match.
inline constexpr std::size_t micro_avx512_mr = 14;
}  // namespace typeshard::kernels::detail

#if defined(TYPESHARD_GEMM_X86)
#include <immintrin.h>

namespace typeshard::kernels::detail {

#define TYPESHARD_GEMM_AVX512_TARGET __attribute__((target("avx512f,avx512dq,avx512vl,fma")))

// One name per operation for both element types, so the kernel below is written once.
namespace avx512 {
template <class T>
struct vec;  // (a trait, not std::conditional_t: that drops the vector types' attributes)
template <>
struct vec<float> {
  using type = __m512;
};
template <>
struct vec<double> {
  using type = __m512d;
};
TYPESHARD_GEMM_AVX512_TARGET inline __m512 zero(float) { return _mm512_setzero_ps(); }
TYPESHARD_GEMM_AVX512_TARGET inline __m512d zero(double) { return _mm512_setzero_pd(); }
TYPESHARD_GEMM_AVX512_TARGET inline __m512 load(const float* p) { return _mm512_load_ps(p); }
TYPESHARD_GEMM_AVX512_TARGET inline __m512d load(const double* p) { return _mm512_load_pd(p); }
TYPESHARD_GEMM_AVX512_TARGET inline __m512 loadu(const float* p) { return _mm512_loadu_ps(p); }
TYPESHARD_GEMM_AVX512_TARGET inline __m512d loadu(const double* p) {
  return _mm512_loadu_pd(p);
}
TYPESHARD_GEMM_AVX512_TARGET inline void storeu(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
TYPESHARD_GEMM_AVX512_TARGET inline void storeu(double* p, __m512d v) {
  _mm512_storeu_pd(p, v);
}
TYPESHARD_GEMM_AVX512_TARGET inline __m512 set1(float x) { return _mm512_set1_ps(x); }
TYPESHARD_GEMM_AVX512_TARGET inline __m512d set1(double x) { return _mm512_set1_pd(x); }
TYPESHARD_GEMM_AVX512_TARGET inline __m512 fma(__m512 a, __m512 b, __m512 c) {
  return _mm512_fmadd_ps(a, b, c);
}
TYPESHARD_GEMM_AVX512_TARGET inline __m512d fma(__m512d a, __m512d b, __m512d c) {
  return _mm512_fmadd_pd(a, b, c);
}
TYPESHARD_GEMM_AVX512_TARGET inline __m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
TYPESHARD_GEMM_AVX512_TARGET inline __m512d add(__m512d a, __m512d b) {
  return _mm512_add_pd(a, b);
}
}  // namespace avx512

template <class T>
TYPESHARD_GEMM_AVX512_TARGET void micro_kernel_avx512(std::size_t kc, const T* a, const T* b,
                                                      T* tile, std::size_t ldt, bool load) {
  using V = typename avx512::vec<T>::type;
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
    _mm_prefetch(reinterpret_cast<const char*>(tile + i * ldt), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(tile + i * ldt + 2 * lanes - 1), _MM_HINT_T0);
  }
  for (std::size_t p = 0; p < kc; ++p) {
    const V b0 = avx512::load(b);
    const V b1 = avx512::load(b + lanes);
#pragma GCC unroll 14
    for (std::size_t i = 0; i < mr; ++i) {
      const V ai = avx512::set1(a[i]);
      c0[i] = avx512::fma(ai, b0, c0[i]);
      c1[i] = avx512::fma(ai, b1, c1[i]);
    }
    a += mr;
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
