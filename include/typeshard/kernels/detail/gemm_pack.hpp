// typeshard/kernels/detail/gemm_pack.hpp: packing for the blocked GEMM (gemm_blocked.hpp):
// aligned scratch, and the copies of blocks of op(A) and op(B) into the strips the
// micro-kernels read. Internal: use kernels::gemm.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>

namespace typeshard::kernels::detail {

// 64-byte aligned scratch for the packed blocks (a vector's allocator gives only 16).
template <class T>
struct pack_buffer {
  struct aligned_delete {
    void operator()(T* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<T, aligned_delete> data;
  std::size_t size = 0;
  // At least n values (the contents are not kept when it grows).
  T* reserve(std::size_t n) {
    if (n > size) {
      data.reset();
      data.reset(static_cast<T*>(::operator new[](n * sizeof(T), std::align_val_t{64})));
      size = n;
    }
    return data.get();
  }
};

// The calling thread's scratch of at least n values, kept for its next GEMM: a fresh
// allocation of a few MiB per call was mapped afresh by malloc and faulted in page by page
// (~4000 page faults per batched matmul of 8 x 2048^3 on 8 devices). At most the largest
// blocks one call packs (kc x nc of B plus mc x kc of A: ~8.4 MiB) per thread that multiplies.
template <class T>
T* thread_pack_scratch(std::size_t n) {
  thread_local pack_buffer<T> kept;
  return kept.reserve(n);
}

// A block of an operand that a later packing will read, to prefetch while the micro-kernels
// run: `rows` runs of `bytes` contiguous bytes, `stride` bytes apart.
struct prefetch_region {
  const char* base = nullptr;
  std::size_t rows = 0, bytes = 0, stride = 0;

  // The r x c block whose element (i, j) is p[i*rs + j*cs] (one of rs, cs is 1, as packing
  // reads them).
  template <class T>
  static prefetch_region of(const T* p, std::size_t rs, std::size_t cs, std::size_t r,
                            std::size_t c) {
    const char* base = reinterpret_cast<const char*>(p);
    if (r == 0 || c == 0) return {};
    if (cs == 1) return {base, r, c * sizeof(T), rs * sizeof(T)};
    if (rs == 1) return {base, c, r * sizeof(T), cs * sizeof(T)};
    return {};
  }
  // Cache lines per run: a run may straddle one more line than its length needs.
  std::size_t lines_per_row() const { return bytes / 64 + 2; }
  std::size_t lines() const { return rows * lines_per_row(); }
  // Prefetches lines [first, last): line l is the (l % lines_per_row)-th of run
  // l / lines_per_row, clamped to the run's last byte.
  void fetch_lines(std::size_t first, std::size_t last) const {
    if (first >= last) return;
    const std::size_t per = lines_per_row();
    std::size_t row = first / per, col = first % per;
    for (std::size_t l = first; l < last; ++l) {
      __builtin_prefetch(base + row * stride + std::min(col * 64, bytes - 1), 0, 3);
      if (++col == per) col = 0, ++row;
    }
  }
};

// What one macro-kernel prefetches, a share per strip of B: all of region `a` (the next
// block of A) and share `b_part` of `b_parts` of region `b` (the next slab of B, spread over
// the current slab's blocks of A).
struct prefetch_ahead {
  prefetch_region a, b;
  std::size_t b_part = 0, b_parts = 1;

  // Share `s` of `strips`: that piece of the lines of both.
  void fetch(std::size_t s, std::size_t strips) const {
    const std::size_t na = a.lines();
    a.fetch_lines(na * s / strips, na * (s + 1) / strips);
    const std::size_t nb = b.lines();
    const std::size_t lo = nb * b_part / b_parts, hi = nb * (b_part + 1) / b_parts;
    b.fetch_lines(lo + (hi - lo) * s / strips, lo + (hi - lo) * (s + 1) / strips);
  }
};

// Packs the mc x kc block of op(A) whose element (i, p) is a[i*rs + p*cs] into strips of mr
// rows: strip s holds, for each p in [0, kc), the mr values op(A)[s*mr + i][p], rows past mc
// zero. A plain A has (rs, cs) = (lda, 1), a transposed one (1, lda): each gets a loop that
// reads its memory in order.
template <std::size_t mr, class T>
void pack_a(std::size_t mc, std::size_t kc, const T* a, std::size_t rs, std::size_t cs, T* out) {
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

// The transposed operands' packings copy a block as tiles of pack_tile x pack_tile values:
// a tile's source lines and destination lines both stay in L1 while it is copied (a whole
// strip at a time scattered each value of a stored row to its own line: kc lines of the strip,
// 32-64 KiB, thrashed L1, and those loops took ~10% of a transformer step's GEMM time).
inline constexpr std::size_t pack_tile = 16;

// pack_a_rows of a transposed A: element (i, p) of op(A) at a[p*cs + i] (rs == 1).
template <std::size_t mr, std::size_t ka, class T>
void pack_a_rows_transposed(std::size_t mc, std::size_t kc, const T* a, std::size_t cs,
                            T* out) {
  const std::size_t strips = (mc + mr - 1) / mr;
  for (std::size_t p0 = 0; p0 < kc; p0 += pack_tile) {
    const std::size_t pn = std::min(pack_tile, kc - p0);
    for (std::size_t i0 = 0; i0 < mc; i0 += pack_tile) {
      const std::size_t in = std::min(pack_tile, mc - i0);
      for (std::size_t i = i0; i < i0 + in; ++i) {
        T* dst = out + (i / mr) * mr * ka + (i % mr) * ka + p0;
        const T* src = a + p0 * cs + i;
        for (std::size_t p = 0; p < pn; ++p) dst[p] = src[p * cs];
      }
    }
  }
  for (std::size_t i = mc; i < strips * mr; ++i)  // the last strip's rows past mc
    std::fill_n(out + (i / mr) * mr * ka + (i % mr) * ka, kc, T(0));
}

// The same block packed by rows (the AVX-512 kernel's layout): strip s holds mr rows, row i
// the kc values op(A)[s*mr + i][p] at out[i*ka + p] (ka >= kc; rows past mc zero). A plain A
// copies contiguous runs; a transposed one is copied tile by tile (pack_a_rows_transposed).
template <std::size_t mr, std::size_t ka, class T>
void pack_a_rows(std::size_t mc, std::size_t kc, const T* a, std::size_t rs, std::size_t cs,
                 T* out) {
  if (cs != 1) {  // transposed (rs == 1): a blocked transpose of the whole block
    pack_a_rows_transposed<mr, ka>(mc, kc, a, cs, out);
    return;
  }
  for (std::size_t i0 = 0; i0 < mc; i0 += mr) {
    const std::size_t rows = std::min(mr, mc - i0);
    const T* src = a + i0 * rs;
    for (std::size_t i = 0; i < rows; ++i)
      std::memcpy(out + i * ka, src + i * rs, kc * sizeof(T));
    for (std::size_t i = rows; i < mr; ++i) std::fill_n(out + i * ka, kc, T(0));
    out += mr * ka;
  }
}

// Packs the kc x nc block of op(B) whose element (p, j) is b[p*rs + j*cs] into strips of nr
// columns: strip s holds, for each p, the nr values op(B)[p][s*nr + j], columns past nc zero.
// A plain B has (rs, cs) = (ldb, 1) and copies its rows, pack_b_group strips at a time: each
// row's run of pack_b_group * nr values read in order (a strip at a time read each row in
// pieces of nr values, 128 bytes in float, kc rows apart; more strips at once would write
// more streams kc * nr apart, which share L1 sets); a transposed one (1, ldb) reads each of
// the strip's nr stored rows (kc contiguous values), tile by tile (pack_tile), into the strip.
inline constexpr std::size_t pack_b_group = 4;

template <std::size_t nr, class T>
void pack_b(std::size_t kc, std::size_t nc, const T* b, std::size_t rs, std::size_t cs, T* out) {
  if (cs == 1) {  // plain: runs of pack_b_group strips, each stored row's run read in order
    const std::size_t strips = (nc + nr - 1) / nr, full = nc / nr, cols = nc - full * nr;
    for (std::size_t s0 = 0; s0 < strips; s0 += pack_b_group) {
      const std::size_t s1 = std::min(strips, s0 + pack_b_group);
      for (std::size_t p = 0; p < kc; ++p) {
        const T* row = b + p * rs;
        T* dst = out + p * nr;
        for (std::size_t s = s0; s < std::min(s1, full); ++s)
          std::memcpy(dst + s * kc * nr, row + s * nr, nr * sizeof(T));
        if (full < s1) {  // the edge strip: columns past nc zero
          T* edge = dst + full * kc * nr;
          for (std::size_t j = 0; j < cols; ++j) edge[j] = row[full * nr + j];
          for (std::size_t j = cols; j < nr; ++j) edge[j] = T(0);
        }
      }
    }
    return;
  }
  for (std::size_t j0 = 0; j0 < nc; j0 += nr) {
    const std::size_t cols = std::min(nr, nc - j0);
    {  // transposed: rs == 1; column j0 + j of op(B) is contiguous in memory
      for (std::size_t p0 = 0; p0 < kc; p0 += pack_tile) {  // tile by tile (pack_tile)
        const std::size_t pn = std::min(pack_tile, kc - p0);
        for (std::size_t j = 0; j < cols; ++j) {
          const T* col = b + (j0 + j) * cs + p0;
          for (std::size_t p = 0; p < pn; ++p) out[(p0 + p) * nr + j] = col[p];
        }
      }
      for (std::size_t j = cols; j < nr; ++j)
        for (std::size_t p = 0; p < kc; ++p) out[p * nr + j] = T(0);
    }
    out += kc * nr;
  }
}

}  // namespace typeshard::kernels::detail
