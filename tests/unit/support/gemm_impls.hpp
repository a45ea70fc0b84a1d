// tests/unit/support/gemm_impls.hpp: every GEMM path that can run on this machine, and one
// checked product, for the tests/unit/gemm_*.cpp files.
//
//   for (gemm_impl which : gemm_impls_here()) check_case<T>(which, ops, m, n, k, pad, acc, ...);
//
// The paths: kernels::gemm as it dispatches; the CBLAS call it makes when a BLAS is linked
// (its row-major / transpose / stride mapping, called directly because on a CPU with AVX-512
// kernels::gemm does not take it); typeshard's packed kernel at every SIMD level the CPU runs
// (avx512, avx2, portable); and its driver with A packed interleaved (pack_a, the layout
// only the avx512 level reads, for double), through the portable micro-kernel, so that every
// CPU tests that layout and the driver's ka = 0 path.
//
// check_case computes C (+)= op(A) . op(B) with operands stored with padded rows (the
// padding holds a sentinel that C's padding must keep; without accumulate C starts as NaN, so
// a kernel that reads it fails), and compares every element with a long double reference
// within k * eps * sum |a_i b_i| (times 4 for slack).
#pragma once

#include <typeshard/kernels/gemm.hpp>
#include <typeshard/kernels/gemm_blocked.hpp>
#include <typeshard/kernels/gemm_isa.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace ts_test {

namespace kernels = typeshard::kernels;

enum class gemm_impl {
  dispatch, cblas, packed_avx512, packed_avx2, packed_portable, packed_interleaved
};

inline const char* name(gemm_impl which) {
  switch (which) {
    case gemm_impl::dispatch: return "kernels::gemm";
    case gemm_impl::cblas: return "detail::gemm_cblas";
    case gemm_impl::packed_avx512: return "gemm_blocked at avx512";
    case gemm_impl::packed_avx2: return "gemm_blocked at avx2";
    case gemm_impl::packed_portable: return "gemm_blocked at portable";
    case gemm_impl::packed_interleaved: return "gemm_packed, A interleaved, portable kernel";
  }
  return "?";
}

inline kernels::gemm_isa isa_of(gemm_impl which) {
  switch (which) {
    case gemm_impl::packed_avx512: return kernels::gemm_isa::avx512;
    case gemm_impl::packed_avx2: return kernels::gemm_isa::avx2;
    default: return kernels::gemm_isa::portable;
  }
}

// The paths this machine (and build) can run.
inline std::vector<gemm_impl> gemm_impls_here() {
  std::vector<gemm_impl> out{gemm_impl::dispatch};
#if defined(TYPESHARD_HAVE_CBLAS)
  out.push_back(gemm_impl::cblas);
#endif
  const auto best = static_cast<int>(kernels::gemm_isa_detected());
  if (best >= static_cast<int>(kernels::gemm_isa::avx512)) out.push_back(gemm_impl::packed_avx512);
  if (best >= static_cast<int>(kernels::gemm_isa::avx2)) out.push_back(gemm_impl::packed_avx2);
  out.push_back(gemm_impl::packed_portable);
  out.push_back(gemm_impl::packed_interleaved);
  return out;
}

// The packed driver with A interleaved: the portable level's blocking and micro-kernel, both
// reading A as pack_a writes it (ka = 0).
template <class T>
void run_interleaved(std::size_t m, std::size_t n, std::size_t k, const T* a, std::size_t lda,
                     const T* b, std::size_t ldb, T* c, std::size_t ldc, bool acc,
                     kernels::gemm_ops ops) {
  namespace kd = kernels::detail;
  if (m == 0 || n == 0 || k == 0) {  // the driver multiplies non-empty products only
    kernels::gemm<T>(m, n, k, a, lda, b, ldb, c, ldc, acc, ops);
    return;
  }
  kd::gemm_level<T> level = kd::gemm_level_of<kernels::gemm_isa::portable, T>();
  constexpr std::size_t mr = kd::gemm_blocking<T, kernels::gemm_isa::portable>::mr;
  level.ka = 0;
  level.pack_a = &kd::pack_a<mr, T>;
  level.micro = &kd::micro_kernel_portable<0, T>;
  const std::size_t ars = ops.trans_a ? 1 : lda, acs = ops.trans_a ? lda : 1;
  const std::size_t brs = ops.trans_b ? 1 : ldb, bcs = ops.trans_b ? ldb : 1;
  kd::gemm_packed(level, m, n, k, a, ars, acs, b, brs, bcs, c, ldc, acc);
}

template <class T>
void run(gemm_impl which, std::size_t m, std::size_t n, std::size_t k, const T* a,
         std::size_t lda, const T* b, std::size_t ldb, T* c, std::size_t ldc, bool acc,
         kernels::gemm_ops ops) {
  switch (which) {
    case gemm_impl::dispatch:
      kernels::gemm<T>(m, n, k, a, lda, b, ldb, c, ldc, acc, ops);
      return;
    case gemm_impl::cblas:
#if defined(TYPESHARD_HAVE_CBLAS)
      if (k == 0) {  // kernels::gemm answers k == 0 itself, before any kernel
        kernels::gemm<T>(m, n, k, a, lda, b, ldb, c, ldc, acc, ops);
        return;
      }
      // (No Catch2 macro here: run() is also called from several threads at once.)
      if (!kernels::detail::gemm_cblas<T>(m, n, k, a, lda, b, ldb, c, ldc, acc, ops))
        throw std::logic_error("gemm_cblas refused a size that fits an int");
      return;
#else
      throw std::logic_error("no CBLAS in this build");
#endif
    case gemm_impl::packed_interleaved:
      run_interleaved<T>(m, n, k, a, lda, b, ldb, c, ldc, acc, ops);
      return;
    default:
      kernels::detail::gemm_blocked_at<T>(isa_of(which), m, n, k, a, lda, b, ldb, c, ldc, acc,
                                          ops);
      return;
  }
}

// Checks one product; see the header comment.
template <class T>
void check_case(gemm_impl which, kernels::gemm_ops ops, std::size_t m, std::size_t n,
                std::size_t k, std::size_t pad, bool acc, std::mt19937_64& rng,
                std::uint64_t seed) {
  const std::size_t rows_a = ops.trans_a ? k : m, cols_a = ops.trans_a ? m : k;
  const std::size_t rows_b = ops.trans_b ? n : k, cols_b = ops.trans_b ? k : n;
  const std::size_t lda = cols_a + pad, ldb = cols_b + pad, ldc = n + pad;
  const T sentinel = T(-12345.5);
  std::uniform_real_distribution<T> dist(T(-1), T(1));
  std::vector<T> a(rows_a * lda, sentinel), b(rows_b * ldb, sentinel), c(m * ldc, sentinel);
  for (std::size_t r = 0; r < rows_a; ++r)
    for (std::size_t q = 0; q < cols_a; ++q) a[r * lda + q] = dist(rng);
  for (std::size_t r = 0; r < rows_b; ++r)
    for (std::size_t q = 0; q < cols_b; ++q) b[r * ldb + q] = dist(rng);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j)
      c[i * ldc + j] = acc ? dist(rng) : std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> c0 = c;

  run<T>(which, m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc, acc, ops);

  // The oracle: op(A)(i, p) and op(B)(p, j) read from the stored matrices directly.
  const auto op_a = [&](std::size_t i, std::size_t p) {
    return ops.trans_a ? a[p * lda + i] : a[i * lda + p];
  };
  const auto op_b = [&](std::size_t p, std::size_t j) {
    return ops.trans_b ? b[j * ldb + p] : b[p * ldb + j];
  };
  const long double eps = std::numeric_limits<T>::epsilon();
  std::size_t bad = 0;
  std::string first;
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < ldc; ++j) {
      const T got = c[i * ldc + j];
      if (j >= n) {  // padding: untouched
        if (got != sentinel && bad++ == 0)
          first = "padding overwritten at row " + std::to_string(i);
        continue;
      }
      long double ref = acc ? c0[i * ldc + j] : 0.0L, mag = acc ? std::fabs(ref) : 0.0L;
      for (std::size_t p = 0; p < k; ++p) {
        const long double t = static_cast<long double>(op_a(i, p)) * op_b(p, j);
        ref += t;
        mag += std::fabs(t);
      }
      const long double tol = 4 * (k + 2) * eps * mag;
      if (!(std::fabs(got - ref) <= tol) && bad++ == 0)
        first = "C(" + std::to_string(i) + "," + std::to_string(j) + ") = " +
                std::to_string(got) + ", expected " + std::to_string(static_cast<double>(ref));
    }
  }
  INFO(name(which) << (sizeof(T) == 4 ? " float" : " double") << " trans_a=" << ops.trans_a
                   << " trans_b=" << ops.trans_b << " m=" << m << " n=" << n << " k=" << k
                   << " pad=" << pad << " accumulate=" << acc << " seed=" << seed << ": "
                   << bad << " bad, first " << first);
  CHECK(bad == 0);
}

// The blocking of the packed kernel at a path's level (for shapes that cross its edges).
struct gemm_blocks {
  std::size_t mr, nr, kc, mc, nc;
};
template <class T, kernels::gemm_isa Isa>
gemm_blocks blocks_at() {
  using b = kernels::detail::gemm_blocking<T, Isa>;
  return {b::mr, b::nr, b::kc, b::mc, b::nc};
}
template <class T>
gemm_blocks blocks_of(gemm_impl which) {
  using kernels::gemm_isa;
  // The packed paths run at their own level; kernels::gemm at the active one unless it calls
  // the BLAS, whose blocking is its own (the AVX2 one stands in for it, as for gemm_cblas).
  const bool blas = which == gemm_impl::cblas ||
                    (which == gemm_impl::dispatch && kernels::gemm_uses_blas());
  const gemm_isa level = blas                           ? gemm_isa::avx2
                         : which == gemm_impl::dispatch ? kernels::gemm_isa_active()
                                                        : isa_of(which);
  switch (level) {
    case gemm_isa::avx512: return blocks_at<T, gemm_isa::avx512>();
    case gemm_isa::portable: return blocks_at<T, gemm_isa::portable>();
    case gemm_isa::avx2: break;
  }
  return blocks_at<T, gemm_isa::avx2>();
}

}  // namespace ts_test
