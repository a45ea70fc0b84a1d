// typeshard/kernels/gemm_bf16.hpp: the per-shard GEMM on bfloat16 operands, float accumulation.
//
//   kernels::gemm_bf16(m, n, k, a, lda, b, ldb, c, ldc, accumulate = false, ops = {})
//
// C[m x n] (float, or bfloat16: rounded once, from the float sum) = op(A) . op(B), or
// C += op(A) . op(B) with accumulate, A and B bfloat16; the arguments mean what they mean for
// kernels::gemm (gemm.hpp, gemm_ops). Every product and sum is in float (JAX's
// preferred_element_type=float32 on bfloat16 operands).
//
// Which kernel runs (kernels::gemm_bf16_native() says):
//   - on a CPU with AVX-512 BF16 (Zen 4 and later, Cooper Lake, Sapphire Rapids), at the
//     avx512 level: the packed kernel of gemm_blocked.hpp with a vdpbf16ps micro-kernel
//     (detail/gemm_micro_avx512_bf16.hpp): two k steps per instruction, so about twice the
//     float kernel's multiply-adds per cycle, on half the bytes. vdpbf16ps flushes denormal
//     inputs and results to zero and rounds to nearest even, whatever MXCSR says;
//   - elsewhere, or with a lower level forced (gemm_isa.hpp): the operands converted to
//     float (exactly) and multiplied by the float kernel at that level (never a BLAS, so the
//     result does not depend on which one is linked).
// Both sum in float, in different orders: results agree to float rounding, not bit for bit.
#pragma once

#include <cstddef>
#include <vector>

#include "../core/bfloat16.hpp"
#include "detail/gemm_micro_avx512_bf16.hpp"
#include "detail/gemm_pack_bf16.hpp"
#include "gemm_blocked.hpp"
#include "gemm_isa.hpp"
#include "vector_math.hpp"

namespace typeshard::kernels {

// Whether this CPU has AVX-512 BF16 (CPUID, asked once).
inline bool gemm_bf16_detected() {
#if defined(TYPESHARD_GEMM_X86)
  static const bool detected = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && gemm_isa_detected() == gemm_isa::avx512;
  }();
  return detected;
#else
  return false;
#endif
}

// Whether gemm_bf16 runs the vdpbf16ps kernel now: the CPU has it and the level active is
// avx512 (forcing avx2 or portable runs the float path at that level).
inline bool gemm_bf16_native() {
  return gemm_bf16_detected() && gemm_isa_active() == gemm_isa::avx512;
}

namespace detail {

// The blocking of the vdpbf16ps kernel: the float AVX-512 tile (14 x 32). Measured on a
// Zen 4 (1 MiB L2) at 1024 x 1024 x 2048 to 2048^3: kc 512 / 768 / 1024 with mc 8, 12, 16
// strips gave 74-84% of the measured bfloat16 peak, 768 x 8 strips among the best and never
// the worst: the strip of B is 768 x 32 bfloat16 = 48 KiB, the block of A 112 x 768 (168 KiB)
// sits in L2, the panel of B (768 x 4096, 6 MiB) in L3.
struct gemm_blocking_avx512_bf16 {
  static constexpr std::size_t mr = micro_avx512_bf16_mr;
  static constexpr std::size_t nr = micro_avx512_bf16_nr;
  static constexpr std::size_t kc = 768;
  static constexpr std::size_t mc = 8 * mr;  // 112 rows
  static constexpr std::size_t nc = 4096;
  static constexpr std::size_t ka = kc + 32;  // rows one cache line apart beyond kc
  static_assert(kc % 2 == 0 && ka % 2 == 0);   // whole pairs of k, pairs 4-byte aligned
};

#if defined(TYPESHARD_GEMM_X86)
inline gemm_level<bfloat16, float> gemm_level_avx512_bf16() {
  using blk = gemm_blocking_avx512_bf16;
  return {blk::mr,
          blk::nr,
          blk::kc,
          blk::mc,
          blk::nc,
          blk::ka,
          &micro_kernel_avx512_bf16<blk::ka>,
          &pack_a_rows_bf16<blk::mr, blk::ka>,
          &pack_b_bf16<blk::nr>,
          2};
}
#endif

// The stored rows x cols matrix x (row stride ld) as floats, dense (row stride cols).
inline std::vector<float> widen_bf16(std::size_t rows, std::size_t cols, const bfloat16* x,
                                     std::size_t ld) {
  std::vector<float> out(rows * cols);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) out[i * cols + j] = float(x[i * ld + j]);
  return out;
}

// gemm_bf16 into float C at level isa (capped by the CPU, as gemm_blocked_at).
inline void gemm_bf16_at(gemm_isa isa, std::size_t m, std::size_t n, std::size_t k,
                         const bfloat16* a, std::size_t lda, const bfloat16* b, std::size_t ldb,
                         float* c, std::size_t ldc, bool accumulate, gemm_ops ops) {
  if (m == 0 || n == 0) return;
  const std::size_t ars = ops.trans_a ? 1 : lda, acs = ops.trans_a ? lda : 1;
  const std::size_t brs = ops.trans_b ? 1 : ldb, bcs = ops.trans_b ? ldb : 1;
#if defined(TYPESHARD_GEMM_X86)
  constexpr std::size_t small = 4 * 6 * 16 * 6;  // as gemm_blocked_at: packing does not repay
  if (k > 0 && m * n * k > small && gemm_bf16_detected() &&
      gemm_isa_capped(isa) == gemm_isa::avx512)
    return gemm_packed(gemm_level_avx512_bf16(), m, n, k, a, ars, acs, b, brs, bcs, c, ldc,
                       accumulate);
#endif
  // Exactly the same operands in float, stored as given (so ops still applies).
  const std::size_t a_rows = ops.trans_a ? k : m, a_cols = ops.trans_a ? m : k;
  const std::size_t b_rows = ops.trans_b ? n : k, b_cols = ops.trans_b ? k : n;
  const std::vector<float> fa = widen_bf16(a_rows, a_cols, a, lda);
  const std::vector<float> fb = widen_bf16(b_rows, b_cols, b, ldb);
  gemm_blocked_at<float>(isa, m, n, k, fa.data(), a_cols, fb.data(), b_cols, c, ldc,
                         accumulate, ops);
}

}  // namespace detail

// Float C.
inline void gemm_bf16(std::size_t m, std::size_t n, std::size_t k, const bfloat16* a,
                      std::size_t lda, const bfloat16* b, std::size_t ldb, float* c,
                      std::size_t ldc, bool accumulate = false, gemm_ops ops = {}) {
  detail::gemm_bf16_at(gemm_isa_active(), m, n, k, a, lda, b, ldb, c, ldc, accumulate, ops);
}

namespace detail {
// The float result of a bfloat16-C product: this thread's scratch, kept between calls (no
// allocation, zero fill or page fault once it is large enough), as the packing buffers are.
inline float* wide_result_scratch(std::size_t n) {
  thread_local pack_buffer<float> kept;
  return kept.reserve(n);
}
}  // namespace detail

// bfloat16 C: the float result (plus C, when accumulating) rounded once.
inline void gemm_bf16(std::size_t m, std::size_t n, std::size_t k, const bfloat16* a,
                      std::size_t lda, const bfloat16* b, std::size_t ldb, bfloat16* c,
                      std::size_t ldc, bool accumulate = false, gemm_ops ops = {}) {
  if (m == 0 || n == 0) return;
  float* const wide = detail::wide_result_scratch(m * n);
  if (accumulate)
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) wide[i * n + j] = float(c[i * ldc + j]);
  gemm_bf16(m, n, k, a, lda, b, ldb, wide, n, accumulate, ops);
  for (std::size_t i = 0; i < m; ++i) to_bfloat16(wide + i * n, c + i * ldc, n);
}

}  // namespace typeshard::kernels
