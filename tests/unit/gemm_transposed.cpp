// kernels::gemm and kernels::gemm_blocked with transposed operands (gemm_ops{trans_a,
// trans_b}) against a plain triple loop in long double that reads the stored matrices
// through their transposes itself.
//
// Every (trans_a, trans_b, accumulate) combination, for float and double, through the
// dispatching kernels::gemm (CBLAS with CblasTrans when the build links typeshard::blas) and
// gemm_blocked with both micro-kernels. Shapes: all combinations of tiny and odd extents
// (0, 1, 2, 5, 7, 13, 33), extents around the blocking boundaries (mr = 6, nr = 16/8,
// kc = 256, mc = 96, nc = 2048/1024), and products larger than mc, kc and nc; row strides are
// wider than the stored matrices.
#include <typeshard/kernels/gemm.hpp>
#include <typeshard/kernels/gemm_blocked.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

namespace k = typeshard::kernels;

enum class impl { dispatch, blocked_best, blocked_portable };

const impl all_impls[] = {impl::dispatch, impl::blocked_best, impl::blocked_portable};
const k::gemm_ops all_ops[] = {{false, false}, {true, false}, {false, true}, {true, true}};

template <class T>
void run(impl which, std::size_t m, std::size_t n, std::size_t kk, const T* a, std::size_t lda,
         const T* b, std::size_t ldb, T* c, std::size_t ldc, bool acc, k::gemm_ops ops) {
  switch (which) {
    case impl::dispatch:
      k::gemm<T>(m, n, kk, a, lda, b, ldb, c, ldc, acc, ops);
      break;
    case impl::blocked_best:
      k::gemm_blocked<T>(m, n, kk, a, lda, b, ldb, c, ldc, acc, ops);
      break;
    case impl::blocked_portable:
      k::detail::gemm_blocked_with<T>(k::detail::micro_kernel_choice::portable, m, n, kk, a, lda,
                                      b, ldb, c, ldc, acc, ops);
      break;
  }
}

const char* name(impl which) {
  switch (which) {
    case impl::dispatch: return "kernels::gemm";
    case impl::blocked_best: return "gemm_blocked (best micro-kernel)";
    case impl::blocked_portable: return "gemm_blocked (portable micro-kernel)";
  }
  return "?";
}

// One product C[m x n] (+)= op(A) . op(B). A is stored as rows_a x cols_a (k x m when
// transposed, else m x k) with row stride cols_a + pad, B likewise; padding holds a sentinel
// that C's padding must keep. Without accumulate C starts as NaN: the kernel must not read it.
template <class T>
void check_case(impl which, k::gemm_ops ops, std::size_t m, std::size_t n, std::size_t kk,
                std::size_t pad, bool acc, std::mt19937_64& rng, std::uint64_t seed) {
  const std::size_t rows_a = ops.trans_a ? kk : m, cols_a = ops.trans_a ? m : kk;
  const std::size_t rows_b = ops.trans_b ? n : kk, cols_b = ops.trans_b ? kk : n;
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

  run<T>(which, m, n, kk, a.data(), lda, b.data(), ldb, c.data(), ldc, acc, ops);

  // The oracle: op(A)(i, p) and op(B)(p, j) read from the stored matrices directly.
  const auto op_a = [&](std::size_t i, std::size_t p) {
    return ops.trans_a ? a[p * lda + i] : a[i * lda + p];
  };
  const auto op_b = [&](std::size_t p, std::size_t j) {
    return ops.trans_b ? b[j * ldb + p] : b[p * ldb + j];
  };
  // Error bound of a length-k dot product in T: about k * eps * sum |a||b|, with slack 4.
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
      for (std::size_t p = 0; p < kk; ++p) {
        const long double t = static_cast<long double>(op_a(i, p)) * op_b(p, j);
        ref += t;
        mag += std::fabs(t);
      }
      const long double tol = 4 * (kk + 2) * eps * mag;
      if (!(std::fabs(got - ref) <= tol) && bad++ == 0)
        first = "C(" + std::to_string(i) + "," + std::to_string(j) + ") = " +
                std::to_string(got) + ", expected " + std::to_string(static_cast<double>(ref));
    }
  }
  INFO(name(which) << (sizeof(T) == 4 ? " float" : " double") << " trans_a=" << ops.trans_a
                   << " trans_b=" << ops.trans_b << " m=" << m << " n=" << n << " k=" << kk
                   << " pad=" << pad << " accumulate=" << acc << " seed=" << seed << ": "
                   << first);
  CHECK(bad == 0);
}

template <class T>
void tiny_and_odd(impl which) {
  const std::uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  const std::size_t sizes[] = {0, 1, 2, 5, 7, 13, 33};
  for (const k::gemm_ops ops : all_ops)
    for (std::size_t m : sizes)
      for (std::size_t n : sizes)
        for (std::size_t kk : sizes)
          for (bool acc : {false, true})
            check_case<T>(which, ops, m, n, kk, (m + 2 * n + kk) % 4, acc, rng, seed);
}

template <class T>
void random_shapes(impl which) {
  const std::uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  // Extents around the blocking boundaries (and primes), then fully random ones.
  const std::size_t edges[] = {1, 5, 6, 7, 17, 95, 96, 97, 127, 255, 256, 257};
  std::uniform_int_distribution<std::size_t> pick(0, std::size(edges) - 1);
  std::uniform_int_distribution<std::size_t> any(1, 160), pad(0, 9);
  for (const k::gemm_ops ops : all_ops) {
    for (int trial = 0; trial < 8; ++trial) {
      const bool edge = trial % 2 == 0;
      const std::size_t m = edge ? edges[pick(rng)] : any(rng);
      const std::size_t n = edge ? edges[pick(rng)] : any(rng);
      const std::size_t kk = edge ? edges[pick(rng)] : any(rng);
      check_case<T>(which, ops, m, n, kk, pad(rng), trial % 4 < 2, rng, seed);
    }
  }
}

template <class T>
void larger_than_the_blocks(impl which) {
  const std::uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  constexpr std::size_t nc = 2048 / sizeof(T) * 4;  // gemm_blocking<T>::nc
  for (const k::gemm_ops ops : all_ops) {
    for (bool acc : {false, true}) {
      // Wider than one nc panel; deeper than two kc slabs; taller than two mc blocks with
      // k past one kc slab (every loop of the blocked driver runs more than once).
      check_case<T>(which, ops, 7, nc + 19, 5, 3, acc, rng, seed);
      check_case<T>(which, ops, 13, 9, 601, 2, acc, rng, seed);
      check_case<T>(which, ops, 211, 37, 263, 1, acc, rng, seed);
    }
  }
}

}  // namespace

TEMPLATE_TEST_CASE("gemm transposed: tiny and odd shapes, every (trans_a, trans_b, accumulate)",
                   "[gemm][transpose]", float, double) {
  for (impl which : all_impls) tiny_and_odd<TestType>(which);
}

TEMPLATE_TEST_CASE("gemm transposed: random shapes across the blocking boundaries",
                   "[gemm][transpose]", float, double) {
  for (impl which : all_impls) random_shapes<TestType>(which);
}

TEMPLATE_TEST_CASE("gemm transposed: products larger than mc, kc and nc", "[gemm][transpose]",
                   float, double) {
  for (impl which : all_impls) larger_than_the_blocks<TestType>(which);
}

TEST_CASE("gemm transposed: the untransposed call and gemm_ops{} agree bit for bit",
          "[gemm][transpose]") {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const std::size_t m = 53, n = 41, kk = 300;
  std::vector<float> a(m * kk), b(kk * n), c1(m * n), c2(m * n);
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  for (impl which : all_impls) {
    run<float>(which, m, n, kk, a.data(), kk, b.data(), n, c1.data(), n, false, {});
    if (which == impl::dispatch)
      k::gemm<float>(m, n, kk, a.data(), kk, b.data(), n, c2.data(), n);
    else if (which == impl::blocked_best)
      k::gemm_blocked<float>(m, n, kk, a.data(), kk, b.data(), n, c2.data(), n);
    else
      k::detail::gemm_blocked_with<float>(k::detail::micro_kernel_choice::portable, m, n, kk,
                                          a.data(), kk, b.data(), n, c2.data(), n, false);
    CHECK(c1 == c2);
  }
}

TEST_CASE("gemm transposed: k = 0 writes zeros, or leaves C unchanged when accumulating",
          "[gemm][transpose]") {
  for (impl which : all_impls) {
    for (const k::gemm_ops ops : all_ops) {
      std::vector<double> c(6, 3.0);
      run<double>(which, 2, 3, 0, nullptr, 2, nullptr, 1, c.data(), 3, true, ops);
      CHECK(c == std::vector<double>(6, 3.0));
      run<double>(which, 2, 3, 0, nullptr, 2, nullptr, 1, c.data(), 3, false, ops);
      CHECK(c == std::vector<double>(6, 0.0));
    }
  }
}
