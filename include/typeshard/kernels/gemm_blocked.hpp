// typeshard/kernels/gemm_blocked.hpp: typeshard's own packed per-shard GEMM (no BLAS needed).
//
//   gemm_blocked<T>(m, n, k, a, lda, b, ldb, c, ldc, accumulate = false, ops = {})
//
// Row-major C[m x n] = op(A)[m x k] . op(B)[k x n] (or C += when accumulate), for float and
// double, where op(X) is X or its transpose as `ops` says (gemm_ops, below; the same
// arguments as kernels::gemm). kernels::gemm runs it (see gemm.hpp for when); its tests and
// benchmark also call it directly, at each SIMD level, through detail::gemm_blocked_at.
//
// The structure is the one of BLIS / GotoBLAS, because that is what makes a GEMM run at the
// speed of the arithmetic units rather than of memory:
//   - the k dimension is cut into slabs of kc, the n dimension into panels of nc: a kc x nc
//     block of B is packed once (into nr-wide column strips, contiguous) and stays in L2/L3;
//   - the m dimension is cut into mc rows: an mc x kc block of A is packed (into mr-tall row
//     strips) and stays in L2 while it meets every strip of packed B; meanwhile the parts of
//     A and B packed next are prefetched, so that packing copies from cache;
//   - a micro-kernel keeps an mr x nr tile of C in registers across the whole kc slab, reading
//     the packed strips sequentially: 2 vector loads + mr broadcasts per 2 * mr FMAs.
// Edges are zero-padded in the packed copies, so the micro-kernel always does full tiles;
// partial tiles of C are written through a small temporary.
// Transposed operands cost nothing extra: packing reads op(A) and op(B) through a row and a
// column stride (element (i, p) of op(A) at a[i*rs + p*cs]), so a transpose only swaps the
// strides, and the packed copies, hence the micro-kernels, are the same.
//
// The micro-kernel, by SIMD level (kernels::gemm_isa, chosen at run time: gemm_isa.hpp):
//   avx512    14 x 32 floats / 14 x 16 doubles   detail/gemm_micro_avx512.hpp
//   avx2      6 x 16 floats / 6 x 8 doubles      detail/gemm_micro_avx2.hpp
//   portable  the AVX2 tile in 16-byte GNU vectors (SSE2, NEON...): detail/gemm_micro_portable.hpp
// and, for bfloat16 operands into float (gemm_bf16.hpp, gemm_level<bfloat16, float>), the
// AVX-512 BF16 tile of 14 x 32 floats: detail/gemm_micro_avx512_bf16.hpp.
// The SIMD kernels are compiled with __attribute__((target)), so no -march flag is needed and
// the same binary runs on any x86-64. The driver around them (gemm_packed, macro_kernel) is
// compiled once per element type, not per level: it reads the level's blocking as values and
// calls its kernels (micro-kernel and packing, the inner loops, compiled per level) through
// pointers (gemm_level). The driver is what a program that multiplies compiles most of.
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "detail/gemm_micro_avx2.hpp"
#include "detail/gemm_micro_avx512.hpp"
#include "detail/gemm_micro_portable.hpp"
#include "detail/gemm_pack.hpp"
#include "gemm_isa.hpp"

namespace typeshard::kernels {

// gemm_ops: which operands the GEMM reads transposed (BLAS's transa / transb), row-major:
//   trans_a: op(A) = A^T, A stored k x m with row stride lda >= m (else m x k, lda >= k);
//   trans_b: op(B) = B^T, B stored n x k with row stride ldb >= k (else k x n, ldb >= n).
// Written with designated initializers at the call site: `{.trans_b = true}`.
struct gemm_ops {
  bool trans_a = false;
  bool trans_b = false;
};

namespace detail {

// Register tile and cache blocks, per element type and tile. nr is a multiple of the vector
// width, mc of mr. kc x nr of packed B (one strip, reused by every strip of A) stays in L1;
// mc x kc of packed A in L2; kc x nc of packed B is meant for L3. gemm_blocking<T, level>
// (below) names the one a SIMD level uses.
template <class T>
struct gemm_blocking_avx2 {
  // The AVX2 tile, which the portable kernel computes too: 6 rows x 2 vectors of 256 bits =
  // 12 of the 16 registers.
  static constexpr std::size_t mr = 6;
  static constexpr std::size_t nr = 2 * (32 / sizeof(T));  // 16 floats, 8 doubles
  // A deep slab and a short block of A, measured on Zen 3 (32 KiB L1, 512 KiB L2), an
  // AVX2-only CPU, where this kernel runs whenever no BLAS is linked: in float 10-18% faster
  // there than the earlier kc = 256, mc = 96, which was at par with OpenBLAS's Haswell kernel
  // on Zen 5 with AVX2 forced. Re-tried around the unrolled micro-kernel (kc 256-1024, mc
  // 12-144 rows, nc 512-4096): nothing better beyond the noise. C's tile is loaded and
  // stored half as often, the strip of B (32 KiB) streams from L1 and L2, and the short
  // block of A (~50 KiB) stays in L2 (docs/reference/kernels/gemm.md).
  static constexpr std::size_t kc = 512;
  static constexpr std::size_t mc = 4 * mr;  // 24 rows
  static constexpr std::size_t nc = 2048 / sizeof(T) * 4;  // 2048 floats, 1024 doubles
  // A packed by rows, as for AVX-512 (see there; the interleaved pack_a took ~3% of a
  // 1024 x 1024 x 2048 float product).
  static constexpr std::size_t ka = kc + 64 / sizeof(T);
};

template <class T>
struct gemm_blocking_avx512 {
  // 14 rows x 2 vectors of 512 bits = 28 of the 32 registers. kc = 512 was measured best on
  // Zen 5 (1024 x 2048 x 2048 float: kc 256 / 384 / 512 gave ~86% / ~87% / ~89% of the
  // single-core peak on a quiet machine): the strip of B (64 KiB for float) no longer stays in
  // a 48 KiB L1 and is read from L2 with A's, which that L2 sustains, while C's tile is loaded
  // and stored half as often as at 256. The block of A (mc x kc, 336 KiB) sits in a 1 MiB L2;
  // the panel of B (kc x nc, 8 MiB) in L3.
  static constexpr std::size_t mr = micro_avx512_mr;
  static constexpr std::size_t nr = 2 * (64 / sizeof(T));             // 32 floats, 16 doubles
  static constexpr std::size_t kc = 512;
  static constexpr std::size_t mc = (sizeof(T) == 4 ? 12 : 6) * mr;   // 168 / 84 rows
  static constexpr std::size_t nc = 16384 / sizeof(T);                // 4096 floats, 2048 doubles
  // Packed A by rows, ka apart (pack_a_rows): packing a plain A is then a copy of contiguous
  // runs instead of a 14-row transpose, which took ~4% of a 1024 x 2048 x 1024 float product
  // on Zen 5, and the micro-kernel's broadcasts read 14 rows at constant offsets. The row
  // stride is kc plus one line, so the 14 rows do not share L1 sets. Float only: a strip of
  // doubles (58 KiB) does not fit L1, and 14 streams from L2 ran a 1024 x 2048 x 2048 double
  // product ~4% slower than the interleaved strip (pack_a), which double keeps.
  static constexpr std::size_t ka = sizeof(T) == 4 ? kc + 64 / sizeof(T) : 0;
};

// The blocking of a SIMD level (the portable kernel computes the AVX2 tile).
template <class T, gemm_isa Isa>
using gemm_blocking = std::conditional_t<Isa == gemm_isa::avx512, gemm_blocking_avx512<T>,
                                         gemm_blocking_avx2<T>>;

// A micro-kernel (the contract is in each kernel's header) on operands of T into a tile of C
// (float for bfloat16 operands), and a packing (pack_a, pack_a_rows, pack_b: gemm_pack.hpp;
// gemm_pack_bf16.hpp).
template <class T, class C = T>
using micro_kernel_fn = void (*)(std::size_t kc, const T* a, const T* b, C* tile,
                                 std::size_t ldt, bool load);
template <class T>
using pack_fn = void (*)(std::size_t rows, std::size_t cols, const T* src, std::size_t rs,
                         std::size_t cs, T* out);

// A level as the driver sees it: the blocking as values (gemm_blocking's), and the kernels
// compiled for it. The calls through pointers cost nothing: one micro-kernel call covers
// kc * mr * nr multiply-adds (and a SIMD kernel is never inlined across its target boundary
// anyway), one packing call a whole block. kstep: the packings pad k to a multiple of it
// (2 for the bfloat16 kernel, which reads k in pairs), and the micro-kernel runs over the
// padded count.
template <class T, class C = T>
struct gemm_level {
  std::size_t mr, nr, kc, mc, nc;
  std::size_t ka;               // packed A's row stride, or 0: A interleaved (pack_a)
  micro_kernel_fn<T, C> micro;  // one mr x nr tile over a kc slab
  pack_fn<T> pack_a;            // an mc x kc block of op(A), into strips of mr rows
  pack_fn<T> pack_b;            // a kc x nc block of op(B), into strips of nr columns
  std::size_t kstep = 1;
  // k as packed: rounded up to kstep.
  std::size_t padded(std::size_t k) const { return (k + kstep - 1) / kstep * kstep; }
  // The values one strip of packed A holds: mr rows of ka, or mr x kc interleaved.
  std::size_t a_strip(std::size_t kc_now) const { return mr * (ka != 0 ? ka : kc_now); }
};

// The largest tile of any level (AVX-512's), for the macro-kernel's edge tiles.
template <class T>
inline constexpr std::size_t gemm_max_tile =
    gemm_blocking_avx512<T>::mr * gemm_blocking_avx512<T>::nr;
static_assert(gemm_blocking_avx2<float>::mr * gemm_blocking_avx2<float>::nr <=
                  gemm_max_tile<float> &&
              gemm_blocking_avx2<double>::mr * gemm_blocking_avx2<double>::nr <=
                  gemm_max_tile<double>);

// The micro-kernel of a level, for A packed by rows ka apart (ka == 0: interleaved).
template <gemm_isa Isa, class T, std::size_t ka = gemm_blocking<T, Isa>::ka>
constexpr micro_kernel_fn<T> micro_kernel_of() {
#if defined(TYPESHARD_GEMM_X86)
  if constexpr (Isa == gemm_isa::avx512)
    return &micro_kernel_avx512<ka, T>;
  else if constexpr (Isa == gemm_isa::avx2)
    return &micro_kernel_avx2<ka, T>;
  else
    return &micro_kernel_portable<ka, T>;
#else
  static_assert(Isa == gemm_isa::portable,
                "typeshard: internal: only the portable GEMM micro-kernel exists off x86-64");
  return &micro_kernel_portable<ka, T>;
#endif
}

// Level Isa for the driver. At the avx512 level, a transposed A (a_transposed: op(A) = A^T,
// the mr values of each p contiguous in memory) is packed interleaved: its packing is then a
// copy of mr-value runs, where packing it by rows is a transpose (which took ~5% of a
// transformer training step, whose weight gradients are x^T . dy). The micro-kernel's
// multiply-adds are the same, in the same order: the results are bitwise those of ka. (Only
// there: another micro-kernel per level and element type cost every program that multiplies
// ~0.2 s of g++ -O3; the others pack a transposed A by rows, tile by tile.)
template <gemm_isa Isa, class T>
constexpr gemm_level<T> gemm_level_of(bool a_transposed = false) {
  using blk = gemm_blocking<T, Isa>;
  constexpr bool interleaved_too = blk::ka == 0 || Isa == gemm_isa::avx512;
  if constexpr (interleaved_too) {
    if (blk::ka == 0 || a_transposed)
      return {blk::mr, blk::nr, blk::kc, blk::mc, blk::nc, 0,
              micro_kernel_of<Isa, T, 0>(), &pack_a<blk::mr, T>, &pack_b<blk::nr, T>};
  }
  if constexpr (blk::ka != 0)
    return {blk::mr, blk::nr, blk::kc, blk::mc, blk::nc, blk::ka,
            micro_kernel_of<Isa, T>(), &pack_a_rows<blk::mr, blk::ka, T>, &pack_b<blk::nr, T>};
  else
    return {};  // (not reached: ka == 0 returned above)
}

// The macro-kernel: one packed mc x kc block of A against one packed kc x nc block of B,
// tile by tile. Full tiles go straight to C, edge tiles through a temporary (the
// micro-kernel always writes mr x nr).
//
// Meanwhile it prefetches what the next packing will read (`ahead`), a share before each
// strip of B, so that packing copies from cache rather than waiting on memory.
template <class T, class C>
void macro_kernel(const gemm_level<T, C>& level, std::size_t mc, std::size_t nc,
                  std::size_t kc_in, const T* pa, const T* pb, C* c, std::size_t ldc, bool load,
                  const prefetch_ahead& ahead) {
  const std::size_t mr = level.mr, nr = level.nr;
  const std::size_t kc = level.padded(kc_in);  // as packed
  const std::size_t a_strip = level.a_strip(kc);
  const std::size_t strips = (nc + nr - 1) / nr;
  // (Strip and tile indices are counted, not divided out: mr and nr are run-time values.)
  std::size_t strip = 0;
  for (std::size_t j0 = 0; j0 < nc; j0 += nr, ++strip) {
    ahead.fetch(strip, strips);
    const std::size_t cols = std::min(nr, nc - j0);
    const T* b_strip = pb + j0 * kc;  // strip j0/nr holds kc * nr values
    const T* a_rows = pa;             // strip i0/mr of A starts a_strip values further
    for (std::size_t i0 = 0; i0 < mc; i0 += mr, a_rows += a_strip) {
      const std::size_t rows = std::min(mr, mc - i0);
      C* ct = c + i0 * ldc + j0;
      if (rows == mr && cols == nr) {
        level.micro(kc, a_rows, b_strip, ct, ldc, load);
      } else {
        alignas(64) C tmp[gemm_max_tile<C>];
        for (std::size_t i = 0; i < rows; ++i)
          for (std::size_t j = 0; j < cols; ++j) tmp[i * nr + j] = load ? ct[i * ldc + j] : C(0);
        level.micro(kc, a_rows, b_strip, tmp, nr, true);
        for (std::size_t i = 0; i < rows; ++i)
          for (std::size_t j = 0; j < cols; ++j) ct[i * ldc + j] = tmp[i * nr + j];
      }
    }
  }
}

// The reference: a plain triple loop (i, p, j order so the inner loop is contiguous for a
// plain B), reading op(A)(i, p) at a[i*ars + p*acs] and op(B)(p, j) at b[p*brs + j*bcs]. Used
// for products too small to repay packing, and by the tests as the oracle's shape.
template <class T>
void gemm_naive(std::size_t m, std::size_t n, std::size_t k, const T* a, std::size_t ars,
                std::size_t acs, const T* b, std::size_t brs, std::size_t bcs, T* c,
                std::size_t ldc, bool accumulate) {
  for (std::size_t i = 0; i < m; ++i) {
    T* ci = c + i * ldc;
    if (!accumulate)
      for (std::size_t j = 0; j < n; ++j) ci[j] = T(0);
    for (std::size_t p = 0; p < k; ++p) {
      const T aip = a[i * ars + p * acs];
      const T* bp = b + p * brs;
      if (bcs == 1)
        for (std::size_t j = 0; j < n; ++j) ci[j] += aip * bp[j];
      else
        for (std::size_t j = 0; j < n; ++j) ci[j] += aip * bp[j * bcs];
    }
  }
}

// The packed product at a level the caller has checked the CPU runs; m, n and k above 0.
template <class T, class C>
void gemm_packed(const gemm_level<T, C>& level, std::size_t m, std::size_t n, std::size_t k,
                 const T* a, std::size_t ars, std::size_t acs, const T* b, std::size_t brs,
                 std::size_t bcs, C* c, std::size_t ldc, bool accumulate) {
  const std::size_t kc_max = level.padded(std::min(level.kc, k));
  const std::size_t mc_max = std::min(level.mc, (m + level.mr - 1) / level.mr * level.mr);
  const std::size_t nc_max = std::min(level.nc, (n + level.nr - 1) / level.nr * level.nr);
  constexpr std::size_t line = 64 / sizeof(T);
  const std::size_t a_size = (mc_max / level.mr * level.a_strip(kc_max) + line - 1) / line *
                             line;  // B's block starts on a cache line
  T* const pa = thread_pack_scratch<T>(a_size + kc_max * nc_max);
  T* const pb = pa + a_size;

  const std::size_t a_blocks = (m + level.mc - 1) / level.mc;
  for (std::size_t j0 = 0; j0 < n; j0 += level.nc) {
    const std::size_t nc = std::min(level.nc, n - j0);
    for (std::size_t p0 = 0; p0 < k; p0 += level.kc) {
      const std::size_t kc = std::min(level.kc, k - p0);
      // The first slab writes C (or adds to it when accumulating); later slabs add.
      const bool load = accumulate || p0 > 0;
      level.pack_b(kc, nc, b + p0 * brs + j0 * bcs, brs, bcs, pb);
      // The slab of B packed next (the next kc, else the first of the next panel), fetched
      // a share per block of A; and the next block of A, fetched during the current one.
      const bool last_slab = p0 + kc >= k;
      const std::size_t next_p0 = last_slab ? 0 : p0 + kc;
      const std::size_t next_j0 = last_slab ? j0 + nc : j0;
      const prefetch_region next_b =
          next_j0 < n ? prefetch_region::of(b + next_p0 * brs + next_j0 * bcs, brs, bcs,
                                            std::min(level.kc, k - next_p0),
                                            std::min(level.nc, n - next_j0))
                      : prefetch_region{};
      for (std::size_t i0 = 0; i0 < m; i0 += level.mc) {
        const std::size_t mc = std::min(level.mc, m - i0);
        const bool last_block = i0 + mc >= m;
        const std::size_t next_i0 = last_block ? 0 : i0 + mc;
        const std::size_t next_a_p0 = last_block ? next_p0 : p0;
        const prefetch_region next_a =
            !last_block || next_j0 < n
                ? prefetch_region::of(a + next_i0 * ars + next_a_p0 * acs, ars, acs,
                                      std::min(level.mc, m - next_i0),
                                      std::min(level.kc, k - next_a_p0))
                : prefetch_region{};
        const prefetch_ahead ahead{next_a, next_b, i0 / level.mc, a_blocks};
        level.pack_a(mc, kc, a + i0 * ars + p0 * acs, ars, acs, pa);
        macro_kernel(level, mc, nc, kc, pa, pb, c + i0 * ldc + j0, ldc, load, ahead);
      }
    }
  }
}

// gemm_blocked at SIMD level `isa`, or the widest this CPU runs if that is lower (so a test
// may ask for every level on any machine).
template <class T>
void gemm_blocked_at(gemm_isa isa, std::size_t m, std::size_t n, std::size_t k, const T* a,
                     std::size_t lda, const T* b, std::size_t ldb, T* c, std::size_t ldc,
                     bool accumulate, gemm_ops ops = {}) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "typeshard: kernels::gemm_blocked supports float and double");
  if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double>) {
    return;  // only the message above: nothing below is instantiated for T
  } else {
    if (m == 0 || n == 0) return;
    // Element (i, p) of op(A) is a[i*ars + p*acs], element (p, j) of op(B) is b[p*brs + j*bcs].
    const std::size_t ars = ops.trans_a ? 1 : lda, acs = ops.trans_a ? lda : 1;
    const std::size_t brs = ops.trans_b ? 1 : ldb, bcs = ops.trans_b ? ldb : 1;
    const bool a_transposed = ops.trans_a;
    // Below about one register tile's worth of work per output row, packing costs more than
    // it saves.
    constexpr std::size_t small = 4 * 6 * 16 * 6;
    if (k == 0 || m * n * k <= small) {
      gemm_naive(m, n, k, a, ars, acs, b, brs, bcs, c, ldc, accumulate);
      return;
    }
    using gemm_isa::avx2, gemm_isa::avx512, gemm_isa::portable;
#if defined(TYPESHARD_GEMM_X86)  // elsewhere only the portable level exists (gemm_isa.hpp)
    switch (gemm_isa_capped(isa)) {
      case avx512:
        return gemm_packed(gemm_level_of<avx512, T>(a_transposed), m, n, k, a, ars, acs, b,
                           brs, bcs, c, ldc, accumulate);
      case avx2:
        return gemm_packed(gemm_level_of<avx2, T>(a_transposed), m, n, k, a, ars, acs, b, brs,
                           bcs, c, ldc, accumulate);
      case portable:
        break;
    }
#else
    (void)isa;
#endif
    gemm_packed(gemm_level_of<portable, T>(a_transposed), m, n, k, a, ars, acs, b, brs, bcs, c,
                ldc, accumulate);
  }
}

}  // namespace detail

// At the active SIMD level (gemm_isa_active(): the widest the CPU runs, unless capped).
template <class T>
void gemm_blocked(std::size_t m, std::size_t n, std::size_t k, const T* a, std::size_t lda,
                  const T* b, std::size_t ldb, T* c, std::size_t ldc, bool accumulate = false,
                  gemm_ops ops = {}) {
  detail::gemm_blocked_at(gemm_isa_active(), m, n, k, a, lda, b, ldb, c, ldc, accumulate, ops);
}

}  // namespace typeshard::kernels
