// typeshard/kernels/detail/gemm_micro_avx512_bf16.hpp: the AVX-512 BF16 micro-kernel of the
// bfloat16 GEMM (gemm_bf16.hpp): bfloat16 operands, float accumulation. Internal: use
// kernels::gemm_bf16.
//
// Contract: tile[14 x 32] (floats, row stride ldt) = (load ? tile : 0) + sum over p < kc of
// A(i, p) * B(p, j), kc even, both operands packed in pairs of k (gemm_pack_bf16.hpp):
//   A by rows, a[i * ka + p] (pack_a_rows_bf16): the pair (p, p + 1) of row i is one 32-bit
//     value, broadcast to all 16 lanes once and used for both vectors of B;
//   B in strips of 32 columns, b[(p / 2) * 64 + 2 * j + p % 2] (pack_b_bf16): per pair of k,
//     two vectors of 16 column pairs.
// vdpbf16ps adds a.even * b.even + a.odd * b.odd into each float lane (products exact in
// float, denormal inputs and outputs flushed to zero, round to nearest even: Intel's
// definition), so one instruction does two k steps of the float kernel's FMA: per pair of k,
// 28 vdpbf16ps for 2 vector loads and 14 broadcasts, 28 independent chains in 28 of the 32
// zmm registers (the float kernel's tile, gemm_micro_avx512.hpp). (Broadcasting from memory
// into each instruction, {1to16}, twice per pair, measured the same.)
//
// The instruction is written as inline assembly: the compilers' builtins for it differ in
// name and operand types between versions (g++ 12: short vectors, clang 14: int vectors,
// later both __bf16), while the instruction does not. Compiled for that target only;
// gemm_isa.hpp decides at run time whether the CPU runs it (gemm_bf16_native).
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../core/bfloat16.hpp"
#include "../gemm_isa.hpp"
#include "simd.hpp"

namespace typeshard::kernels::detail {
// The tile: 14 rows x 32 float columns, as the float AVX-512 kernel's.
inline constexpr std::size_t micro_avx512_bf16_mr = 14;
inline constexpr std::size_t micro_avx512_bf16_nr = 32;

#if defined(TYPESHARD_GEMM_X86)

#define TYPESHARD_GEMM_AVX512_BF16_TARGET __attribute__((target("avx512f,avx512bf16")))

namespace avx512_bf16 {
// A pair of bfloat16 as one 32-bit value (may alias the packed values).
typedef std::uint32_t pair_alias __attribute__((may_alias));
// 16 pairs of bfloat16, one per 32-bit lane.
typedef std::uint32_t u32x16 __attribute__((vector_size(64)));
// acc (16 floats) += the pairwise products of b's 16 pairs with a's.
#define TYPESHARD_DPBF16(acc, b, a) \
  __asm__("vdpbf16ps %[x], %[v], %[c]" : [c] "+v"(acc) : [v] "v"(b), [x] "v"(a))
}  // namespace avx512_bf16

template <std::size_t ka>
TYPESHARD_GEMM_AVX512_BF16_TARGET void micro_kernel_avx512_bf16(std::size_t kc,
                                                                const bfloat16* a,
                                                                const bfloat16* b, float* tile,
                                                                std::size_t ldt, bool load) {
  using V = simd::f32x16;
  constexpr std::size_t mr = micro_avx512_bf16_mr;
  static_assert(micro_avx512_bf16_mr == 14,
                "typeshard: internal: the unroll pragmas below assume 14 rows");
  V c0[mr], c1[mr];
#pragma GCC unroll 14
  for (std::size_t i = 0; i < mr; ++i) {
    c0[i] = c1[i] = V{};
    simd::prefetch(tile + i * ldt);
    simd::prefetch(tile + i * ldt + 31);
  }
  for (std::size_t p = 0; p < kc; p += 2) {
    const V b0 = *reinterpret_cast<const simd::f32x16_a*>(b);
    const V b1 = *reinterpret_cast<const simd::f32x16_a*>(b + 32);
#pragma GCC unroll 14
    for (std::size_t i = 0; i < mr; ++i) {
      const std::uint32_t pair = *reinterpret_cast<const avx512_bf16::pair_alias*>(a + i * ka);
      const avx512_bf16::u32x16 ai = avx512_bf16::u32x16{} + pair;  // broadcast once, used twice
      TYPESHARD_DPBF16(c0[i], b0, ai);
      TYPESHARD_DPBF16(c1[i], b1, ai);
    }
    a += 2;
    b += 64;
  }
#pragma GCC unroll 14
  for (std::size_t i = 0; i < mr; ++i) {
    float* t = tile + i * ldt;
    V r0 = c0[i], r1 = c1[i];
    if (load) {
      r0 += *reinterpret_cast<const simd::f32x16_u*>(t);
      r1 += *reinterpret_cast<const simd::f32x16_u*>(t + 16);
    }
    *reinterpret_cast<simd::f32x16_u*>(t) = r0;
    *reinterpret_cast<simd::f32x16_u*>(t + 16) = r1;
  }
}

#undef TYPESHARD_DPBF16

#endif  // TYPESHARD_GEMM_X86

}  // namespace typeshard::kernels::detail
