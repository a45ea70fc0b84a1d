// typeshard/kernels/gemm_blocked.hpp: the portable per-shard GEMM (no BLAS needed).
//
//   gemm_blocked<T>(m, n, k, a, lda, b, ldb, c, ldc, accumulate = false, ops = {})
//
// Row-major C[m x n] = op(A)[m x k] . op(B)[k x n] (or C += when accumulate), for float and
// double, where op(X) is X or its transpose as `ops` says (gemm_ops, below; the same
// arguments as kernels::gemm). kernels::gemm uses it when no CBLAS is linked; its tests and
// benchmark call it directly.
//
// The structure is the one of BLIS / GotoBLAS, because that is what makes a GEMM run at the
// speed of the arithmetic units rather than of memory:
//   - the k dimension is cut into slabs of kc, the n dimension into panels of nc: a kc x nc
//     block of B is packed once (into nr-wide column strips, contiguous) and stays in L2/L3;
//   - the m dimension is cut into mc rows: an mc x kc block of A is packed (into mr-tall row
//     strips) and stays in L2 while it meets every strip of packed B;
//   - a micro-kernel keeps an mr x nr tile of C in registers across the whole kc slab, reading
//     the packed strips sequentially: 2 loads + mr broadcasts per mr*nr multiply-adds.
// Edges are zero-padded in the packed copies, so the micro-kernel always does full tiles;
// partial tiles of C are written through a small temporary.
// Transposed operands cost nothing extra: packing reads op(A) and op(B) through a row and a
// column stride (element (i, p) of op(A) at a[i*rs + p*cs]), so a transpose only swaps the
// strides, and the packed copies, hence the micro-kernels, are the same.
//
// The micro-kernel: on x86-64 an AVX2+FMA version (intrinsics in functions compiled for
// that target, chosen at run time with __builtin_cpu_supports, so the binary still runs on
// any x86-64: builds do not use -march=native by default); elsewhere, or on older CPUs,
// a portable version whose fixed-size loops the compiler vectorises with what the target
// has (SSE2 on baseline x86-64).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define TYPESHARD_GEMM_X86_AVX2 1
#include <immintrin.h>
#endif

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

// Register tile and cache blocks, per element type. mr x nr fills 12 of the 16 AVX2
// registers with accumulators (6 rows x 2 vectors); kc x nr of packed B (16 KiB for float)
// and mr x kc of packed A fit L1; mc x kc of A (~96 KiB) fits L2; kc x nc of B (~2 MiB for
// float) is meant for L3. nr is a multiple of the vector width; mc of mr.
template <class T>
struct gemm_blocking {
  static constexpr std::size_t vector_width = 32 / sizeof(T);  // lanes of a 256-bit register
  static constexpr std::size_t mr = 6;
  static constexpr std::size_t nr = 2 * vector_width;          // 16 floats, 8 doubles
  static constexpr std::size_t kc = 256;
  static constexpr std::size_t mc = 16 * mr;                   // 96 rows
  static constexpr std::size_t nc = 2048 / sizeof(T) * 4;      // 2048 floats, 1024 doubles
};

// 64-byte aligned scratch for the packed blocks (a vector's allocator gives only 16).
template <class T>
struct pack_buffer {
  struct aligned_delete {
    void operator()(T* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<T, aligned_delete> data;
  explicit pack_buffer(std::size_t n)
      : data(static_cast<T*>(::operator new[](n * sizeof(T), std::align_val_t{64}))) {}
  T* get() const { return data.get(); }
};

// Packs the mc x kc block of op(A) whose element (i, p) is a[i*rs + p*cs] into strips of mr
// rows: strip s holds, for each p in [0, kc), the mr values op(A)[s*mr + i][p], rows past mc
// zero. A plain A has (rs, cs) = (lda, 1), a transposed one (1, lda): each gets a loop that
// reads its memory in order.
template <class T>
void pack_a(std::size_t mc, std::size_t kc, const T* a, std::size_t rs, std::size_t cs, T* out) {
  constexpr std::size_t mr = gemm_blocking<T>::mr;
  for (std::size_t i0 = 0; i0 < mc; i0 += mr) {
    const std::size_t rows = std::min(mr, mc - i0);
    const T* src = a + i0 * rs;
    if (rows == mr && cs == 1) {
      for (std::size_t p = 0; p < kc; ++p)
        for (std::size_t i = 0; i < mr; ++i) out[p * mr + i] = src[i * rs + p];
    } else if (rows == mr && rs == 1) {  // transposed: the mr values of each p are contiguous
      for (std::size_t p = 0; p < kc; ++p)
        for (std::size_t i = 0; i < mr; ++i) out[p * mr + i] = src[p * cs + i];
    } else {
      for (std::size_t p = 0; p < kc; ++p)
        for (std::size_t i = 0; i < mr; ++i)
          out[p * mr + i] = i < rows ? src[i * rs + p * cs] : T(0);
    }
    out += kc * mr;
  }
}

// Packs the kc x nc block of op(B) whose element (p, j) is b[p*rs + j*cs] into strips of nr
// columns: strip s holds, for each p, the nr values op(B)[p][s*nr + j], columns past nc zero.
// A plain B has (rs, cs) = (ldb, 1) and copies rows; a transposed one (1, ldb) reads each of
// the strip's nr stored rows in order (kc contiguous values) and scatters them into the strip.
template <class T>
void pack_b(std::size_t kc, std::size_t nc, const T* b, std::size_t rs, std::size_t cs, T* out) {
  constexpr std::size_t nr = gemm_blocking<T>::nr;
  for (std::size_t j0 = 0; j0 < nc; j0 += nr) {
    const std::size_t cols = std::min(nr, nc - j0);
    if (cs == 1) {
      for (std::size_t p = 0; p < kc; ++p) {
        const T* row = b + p * rs + j0;
        T* dst = out + p * nr;
        if (cols == nr) {
          std::memcpy(dst, row, nr * sizeof(T));
        } else {
          for (std::size_t j = 0; j < cols; ++j) dst[j] = row[j];
          for (std::size_t j = cols; j < nr; ++j) dst[j] = T(0);
        }
      }
    } else {  // transposed: rs == 1
      for (std::size_t j = 0; j < cols; ++j) {
        const T* col = b + (j0 + j) * cs;  // column j0 + j of op(B): contiguous in memory
        for (std::size_t p = 0; p < kc; ++p) out[p * nr + j] = col[p];
      }
      for (std::size_t j = cols; j < nr; ++j)
        for (std::size_t p = 0; p < kc; ++p) out[p * nr + j] = T(0);
    }
    out += kc * nr;
  }
}

// The micro-kernel's contract: tile[mr x nr] (row stride ldt) = (load ? tile : 0) +
// sum over p < kc of a_strip[p][i] * b_strip[p][j]. Both strips are packed and aligned.

// Portable: GNU vector extensions (g++ and clang++, every target) of 16 bytes, the width
// every SIMD ISA has (SSE2, NEON). The 6 x 16 float tile would need 24 such registers, more
// than SSE2's 16, so it is computed as two 6 x 8 halves: 12 accumulators, 2 for B, 1 for A.
// (A plain scalar loop here is what g++ -O2 and -O3 fail to vectorise well: 3-13 GFLOP/s.)
template <class T>
struct vec16;
template <>
struct vec16<float> {
  typedef float type __attribute__((vector_size(16)));
};
template <>
struct vec16<double> {
  typedef double type __attribute__((vector_size(16)));
};

template <class T>
void micro_kernel_portable(std::size_t kc, const T* a, const T* b, T* tile, std::size_t ldt,
                           bool load) {
  using V = typename vec16<T>::type;
  constexpr std::size_t lanes = 16 / sizeof(T);
  constexpr std::size_t mr = gemm_blocking<T>::mr;
  constexpr std::size_t nr = gemm_blocking<T>::nr;
  constexpr std::size_t half = nr / 2;
  constexpr std::size_t nv = half / lanes;  // vectors per row of a half: 2
  static_assert(nv == 2 && mr == 6,
                "typeshard: internal: the register budget below assumes a 6 x (2 vectors) half");
  for (std::size_t h = 0; h < nr; h += half) {
    V acc[mr][nv] = {};
    const T* ap = a;
    const T* bp = b + h;
    for (std::size_t p = 0; p < kc; ++p, ap += mr, bp += nr) {
      V b0, b1;
      std::memcpy(&b0, bp, sizeof(V));
      std::memcpy(&b1, bp + lanes, sizeof(V));
      for (std::size_t i = 0; i < mr; ++i) {
        const V ai = V{} + ap[i];  // broadcast
        acc[i][0] += ai * b0;
        acc[i][1] += ai * b1;
      }
    }
    for (std::size_t i = 0; i < mr; ++i) {
      T* t = tile + i * ldt + h;
      for (std::size_t v = 0; v < nv; ++v) {
        V r = acc[i][v];
        if (load) {
          V old;
          std::memcpy(&old, t + v * lanes, sizeof(V));
          r += old;
        }
        std::memcpy(t + v * lanes, &r, sizeof(V));
      }
    }
  }
}

#if defined(TYPESHARD_GEMM_X86_AVX2)
// AVX2 + FMA: 6 rows x 2 vectors of accumulators, the k loop unrolled by 2.
#define TYPESHARD_GEMM_AVX2_TARGET __attribute__((target("avx2,fma")))

TYPESHARD_GEMM_AVX2_TARGET inline void micro_kernel_avx2(std::size_t kc, const float* a,
                                                         const float* b, float* tile,
                                                         std::size_t ldt, bool load) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
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

#endif

// The macro-kernel: one packed mc x kc block of A against one packed kc x nc block of B,
// tile by tile. Full tiles go straight to C, edge tiles through a temporary (the
// micro-kernel always writes mr x nr). One micro-kernel call covers kc * mr * nr
// multiply-adds, so the call itself (not inlined across the target boundary) costs nothing.
template <class T, bool Avx2>
void macro_kernel_with(std::size_t mc, std::size_t nc, std::size_t kc, const T* pa, const T* pb,
                       T* c, std::size_t ldc, bool load) {
  const auto micro = [](std::size_t k, const T* a, const T* b, T* t, std::size_t ldt, bool ld) {
#if defined(TYPESHARD_GEMM_X86_AVX2)
    if constexpr (Avx2) {
      micro_kernel_avx2(k, a, b, t, ldt, ld);
      return;
    }
#endif
    micro_kernel_portable(k, a, b, t, ldt, ld);
  };
  constexpr std::size_t mr = gemm_blocking<T>::mr;
  constexpr std::size_t nr = gemm_blocking<T>::nr;
  for (std::size_t j0 = 0; j0 < nc; j0 += nr) {
    const std::size_t cols = std::min(nr, nc - j0);
    const T* b_strip = pb + j0 * kc;  // strip j0/nr holds kc * nr values
    for (std::size_t i0 = 0; i0 < mc; i0 += mr) {
      const std::size_t rows = std::min(mr, mc - i0);
      const T* a_strip = pa + i0 * kc;
      T* ct = c + i0 * ldc + j0;
      if (rows == mr && cols == nr) {
        micro(kc, a_strip, b_strip, ct, ldc, load);
      } else {
        alignas(64) T tmp[mr * nr];
        for (std::size_t i = 0; i < rows; ++i)
          for (std::size_t j = 0; j < cols; ++j) tmp[i * nr + j] = load ? ct[i * ldc + j] : T(0);
        micro(kc, a_strip, b_strip, tmp, nr, true);
        for (std::size_t i = 0; i < rows; ++i)
          for (std::size_t j = 0; j < cols; ++j) ct[i * ldc + j] = tmp[i * nr + j];
      }
    }
  }
}

#if defined(TYPESHARD_GEMM_X86_AVX2)
// Whether this CPU runs the AVX2+FMA kernel; asked once.
inline bool cpu_has_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
#endif

// Which micro-kernel to use: the best this CPU runs, or the portable one (tests use it to
// check both paths on one machine).
enum class micro_kernel_choice { best, portable };

inline bool use_avx2(micro_kernel_choice choice) {
#if defined(TYPESHARD_GEMM_X86_AVX2)
  return choice == micro_kernel_choice::best && cpu_has_avx2_fma();
#else
  (void)choice;
  return false;
#endif
}

template <class T>
void macro_kernel(std::size_t mc, std::size_t nc, std::size_t kc, const T* pa, const T* pb, T* c,
                  std::size_t ldc, bool load, bool avx2) {
#if defined(TYPESHARD_GEMM_X86_AVX2)
  if (avx2) return macro_kernel_with<T, true>(mc, nc, kc, pa, pb, c, ldc, load);
#else
  (void)avx2;
#endif
  macro_kernel_with<T, false>(mc, nc, kc, pa, pb, c, ldc, load);
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

template <class T>
void gemm_blocked_with(micro_kernel_choice choice, std::size_t m, std::size_t n, std::size_t k,
                       const T* a, std::size_t lda, const T* b, std::size_t ldb, T* c,
                       std::size_t ldc, bool accumulate, gemm_ops ops = {}) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "typeshard: kernels::gemm_blocked supports float and double");
  using blk = gemm_blocking<T>;
  if (m == 0 || n == 0) return;
  // Element (i, p) of op(A) is a[i*ars + p*acs], element (p, j) of op(B) is b[p*brs + j*bcs].
  const std::size_t ars = ops.trans_a ? 1 : lda, acs = ops.trans_a ? lda : 1;
  const std::size_t brs = ops.trans_b ? 1 : ldb, bcs = ops.trans_b ? ldb : 1;
  // Below about one register tile's worth of work per output row, packing costs more than
  // it saves.
  if (k == 0 || m * n * k <= 4 * blk::mr * blk::nr * blk::mr) {
    gemm_naive(m, n, k, a, ars, acs, b, brs, bcs, c, ldc, accumulate);
    return;
  }
  const bool avx2 = use_avx2(choice);
  const std::size_t kc_max = std::min(blk::kc, k);
  const std::size_t mc_max = std::min(blk::mc, (m + blk::mr - 1) / blk::mr * blk::mr);
  const std::size_t nc_max = std::min(blk::nc, (n + blk::nr - 1) / blk::nr * blk::nr);
  pack_buffer<T> pa(mc_max * kc_max);
  pack_buffer<T> pb(kc_max * nc_max);

  for (std::size_t j0 = 0; j0 < n; j0 += blk::nc) {
    const std::size_t nc = std::min(blk::nc, n - j0);
    for (std::size_t p0 = 0; p0 < k; p0 += blk::kc) {
      const std::size_t kc = std::min(blk::kc, k - p0);
      // The first slab writes C (or adds to it when accumulating); later slabs add.
      const bool load = accumulate || p0 > 0;
      pack_b(kc, nc, b + p0 * brs + j0 * bcs, brs, bcs, pb.get());
      for (std::size_t i0 = 0; i0 < m; i0 += blk::mc) {
        const std::size_t mc = std::min(blk::mc, m - i0);
        pack_a(mc, kc, a + i0 * ars + p0 * acs, ars, acs, pa.get());
        macro_kernel(mc, nc, kc, pa.get(), pb.get(), c + i0 * ldc + j0, ldc, load, avx2);
      }
    }
  }
}

}  // namespace detail

template <class T>
void gemm_blocked(std::size_t m, std::size_t n, std::size_t k, const T* a, std::size_t lda,
                  const T* b, std::size_t ldb, T* c, std::size_t ldc, bool accumulate = false,
                  gemm_ops ops = {}) {
  detail::gemm_blocked_with(detail::micro_kernel_choice::best, m, n, k, a, lda, b, ldb, c, ldc,
                            accumulate, ops);
}

}  // namespace typeshard::kernels
