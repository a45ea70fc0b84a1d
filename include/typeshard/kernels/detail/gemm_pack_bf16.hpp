// typeshard/kernels/detail/gemm_pack_bf16.hpp: packing for the bfloat16 GEMM's AVX-512 BF16
// micro-kernel (gemm_micro_avx512_bf16.hpp), which reads k in pairs. Internal: use
// kernels::gemm_bf16.
//
// Both packings pad k to an even count with zeros (never leftovers of an earlier block: a
// NaN there would turn 0 * NaN into a NaN in the product).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../../core/bfloat16.hpp"

namespace typeshard::kernels::detail {

// k rounded up to the pairs the kernel reads.
constexpr std::size_t bf16_pairs_up(std::size_t k) { return (k + 1) / 2 * 2; }

// The mc x kc block of op(A) whose element (i, p) is a[i*rs + p*cs], by rows: strip s holds
// mr rows, row i the values op(A)[s*mr + i][p] at out[i*ka + p] for p < kc, then a zero up
// to the even count; rows past mc zero (ka >= kc + 1, even).
template <std::size_t mr, std::size_t ka>
void pack_a_rows_bf16(std::size_t mc, std::size_t kc, const bfloat16* a, std::size_t rs,
                      std::size_t cs, bfloat16* out) {
  const std::size_t kp = bf16_pairs_up(kc);
  for (std::size_t i0 = 0; i0 < mc; i0 += mr) {
    const std::size_t rows = std::min(mr, mc - i0);
    const bfloat16* src = a + i0 * rs;
    if (cs == 1) {
      for (std::size_t i = 0; i < rows; ++i)
        std::memcpy(out + i * ka, src + i * rs, kc * sizeof(bfloat16));
    } else {  // transposed: rs == 1
      for (std::size_t p = 0; p < kc; ++p)
        for (std::size_t i = 0; i < rows; ++i) out[i * ka + p] = src[p * cs + i];
    }
    if (kp != kc)
      for (std::size_t i = 0; i < rows; ++i) out[i * ka + kc] = bfloat16{};
    for (std::size_t i = rows; i < mr; ++i) std::fill_n(out + i * ka, kp, bfloat16{});
    out += mr * ka;
  }
}

// The kc x nc block of op(B) whose element (p, j) is b[p*rs + j*cs], in strips of nr columns
// of pairs: strip s holds, for each pair q of k, the 2 * nr values
// out[q*2*nr + 2*j + h] = op(B)[2q + h][s*nr + j] (h = 0, 1), zero past kc and past nc.
template <std::size_t nr>
void pack_b_bf16(std::size_t kc, std::size_t nc, const bfloat16* b, std::size_t rs,
                 std::size_t cs, bfloat16* out) {
  const std::size_t kp = bf16_pairs_up(kc);
  for (std::size_t j0 = 0; j0 < nc; j0 += nr) {
    const std::size_t cols = std::min(nr, nc - j0);
    if (cs == 1) {  // rows 2q and 2q + 1 are contiguous runs: interleave them
      for (std::size_t q = 0; q < kp; q += 2) {
        const bfloat16* r0 = b + q * rs + j0;
        const bfloat16* r1 = r0 + rs;
        bfloat16* dst = out + q * nr;
        const bool odd_end = q + 1 >= kc;
        if (cols == nr && !odd_end) {
          // As 32-bit pairs, (r1 << 16) | r0: a loop the compiler vectorises (the copy by
          // elements did not, and took 7% of a 2048^3 product).
          std::uint32_t pairs[nr];
          for (std::size_t j = 0; j < nr; ++j)
            pairs[j] = std::uint32_t(r0[j].bits) | std::uint32_t(r1[j].bits) << 16;
          std::memcpy(dst, pairs, sizeof pairs);
        } else {
          for (std::size_t j = 0; j < nr; ++j) {
            dst[2 * j] = j < cols ? r0[j] : bfloat16{};
            dst[2 * j + 1] = j < cols && !odd_end ? r1[j] : bfloat16{};
          }
        }
      }
    } else {  // transposed (rs == 1): each column's pairs are contiguous
      for (std::size_t j = 0; j < nr; ++j) {
        if (j >= cols) {
          for (std::size_t q = 0; q < kp; ++q) out[q / 2 * 2 * nr + 2 * j + q % 2] = bfloat16{};
          continue;
        }
        const bfloat16* col = b + (j0 + j) * cs;
        for (std::size_t q = 0; q < kp; q += 2) {
          bfloat16* dst = out + q * nr + 2 * j;
          dst[0] = col[q];
          dst[1] = q + 1 < kc ? col[q + 1] : bfloat16{};
        }
      }
    }
    out += kp * nr;
  }
}

}  // namespace typeshard::kernels::detail
