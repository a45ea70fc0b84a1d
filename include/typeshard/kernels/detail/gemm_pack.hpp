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
  explicit pack_buffer(std::size_t n)
      : data(static_cast<T*>(::operator new[](n * sizeof(T), std::align_val_t{64}))) {}
  T* get() const { return data.get(); }
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

// Packs the kc x nc block of op(B) whose element (p, j) is b[p*rs + j*cs] into strips of nr
// columns: strip s holds, for each p, the nr values op(B)[p][s*nr + j], columns past nc zero.
// A plain B has (rs, cs) = (ldb, 1) and copies rows; a transposed one (1, ldb) reads each of
// the strip's nr stored rows in order (kc contiguous values) and scatters them into the strip.
template <std::size_t nr, class T>
void pack_b(std::size_t kc, std::size_t nc, const T* b, std::size_t rs, std::size_t cs, T* out) {
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

}  // namespace typeshard::kernels::detail
