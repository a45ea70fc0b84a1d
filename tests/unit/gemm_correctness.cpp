// kernels::gemm and kernels::gemm_blocked against a naive triple loop in long double.
//
// Shapes: every combination of tiny and odd extents (0, 1, 2, 5, 7, 17, 33) plus random ones
// that cross the blocking boundaries (mr = 6, nr = 16/8, kc = 256, mc = 96, nc = 2048/1024),
// with row strides wider than the matrices, with and without accumulate. Both micro-kernels
// (AVX2 where the CPU has it, and the portable one) run on this machine.
#include <typeshard/kernels/gemm.hpp>
#include <typeshard/kernels/gemm_blocked.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

namespace k = typeshard::kernels;

// The three GEMMs under test.
enum class impl { dispatch, blocked_best, blocked_portable };

template <class T>
void run(impl which, std::size_t m, std::size_t n, std::size_t kk, const T* a, std::size_t lda,
         const T* b, std::size_t ldb, T* c, std::size_t ldc, bool acc) {
  switch (which) {
    case impl::dispatch:
      k::gemm<T>(m, n, kk, a, lda, b, ldb, c, ldc, acc);
      break;
    case impl::blocked_best:
      k::gemm_blocked<T>(m, n, kk, a, lda, b, ldb, c, ldc, acc);
      break;
    case impl::blocked_portable:
      k::detail::gemm_blocked_with<T>(k::detail::micro_kernel_choice::portable, m, n, kk, a, lda,
                                      b, ldb, c, ldc, acc);
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

// Checks one product. Padding columns of every operand hold a sentinel; C's must survive.
// Without accumulate, C starts as NaN: the kernel must overwrite, never read, it.
template <class T>
void check_case(impl which, std::size_t m, std::size_t n, std::size_t kk, std::size_t pad,
                bool acc, std::mt19937_64& rng, std::uint64_t seed) {
  const std::size_t lda = kk + pad, ldb = n + pad, ldc = n + pad;
  const T sentinel = T(-12345.5);
  std::uniform_real_distribution<T> dist(T(-1), T(1));
  std::vector<T> a(m * lda, sentinel), b(kk * ldb, sentinel), c(m * ldc, sentinel);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t p = 0; p < kk; ++p) a[i * lda + p] = dist(rng);
  for (std::size_t p = 0; p < kk; ++p)
    for (std::size_t j = 0; j < n; ++j) b[p * ldb + j] = dist(rng);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j)
      c[i * ldc + j] = acc ? dist(rng) : std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> c0 = c;

  run<T>(which, m, n, kk, a.data(), lda, b.data(), ldb, c.data(), ldc, acc);

  // Error bound of a length-k dot product in T: about k * eps * sum |a||b|, with slack 4.
  const long double eps = std::numeric_limits<T>::epsilon();
  std::size_t bad = 0;
  std::string first;
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < ldc; ++j) {
      const T got = c[i * ldc + j];
      if (j >= n) {  // padding: untouched
        if (got != sentinel && bad++ == 0) first = "padding overwritten at row " + std::to_string(i);
        continue;
      }
      long double ref = acc ? c0[i * ldc + j] : 0.0L, mag = acc ? std::fabs(ref) : 0.0L;
      for (std::size_t p = 0; p < kk; ++p) {
        const long double t = (long double)a[i * lda + p] * b[p * ldb + j];
        ref += t;
        mag += std::fabs(t);
      }
      const long double tol = 4 * (kk + 2) * eps * mag;
      if (!(std::fabs(got - ref) <= tol) && bad++ == 0)
        first = "C(" + std::to_string(i) + "," + std::to_string(j) + ") = " +
                std::to_string(got) + ", expected " + std::to_string((double)ref);
    }
  }
  INFO(name(which) << (sizeof(T) == 4 ? " float" : " double") << " m=" << m << " n=" << n
                   << " k=" << kk << " pad=" << pad << " accumulate=" << acc
                   << " seed=" << seed << ": " << first);
  CHECK(bad == 0);
}

template <class T>
void tiny_and_odd(impl which) {
  const std::uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  const std::size_t sizes[] = {0, 1, 2, 5, 7, 17, 33};
  for (std::size_t m : sizes)
    for (std::size_t n : sizes)
      for (std::size_t kk : sizes)
        for (bool acc : {false, true}) check_case<T>(which, m, n, kk, (m + n + kk) % 3, acc, rng, seed);
}

template <class T>
void random_shapes(impl which) {
  const std::uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  // Extents around the blocking boundaries, then fully random ones.
  const std::size_t edges[] = {5, 6, 7, 95, 96, 97, 255, 256, 257};
  std::uniform_int_distribution<std::size_t> pick(0, std::size(edges) - 1);
  std::uniform_int_distribution<std::size_t> any(1, 200), pad(0, 9);
  for (int trial = 0; trial < 12; ++trial) {
    const bool edge = trial % 2 == 0;
    const std::size_t m = edge ? edges[pick(rng)] : any(rng);
    const std::size_t n = edge ? edges[pick(rng)] : any(rng);
    const std::size_t kk = edge ? edges[pick(rng)] : any(rng);
    check_case<T>(which, m, n, kk, pad(rng), trial % 3 == 0, rng, seed);
  }
  // Wider than one nc panel (2048 floats, 1024 doubles) and deeper than two kc slabs.
  check_case<T>(which, 7, 2048 / sizeof(T) * 4 + 19, 3, 1, false, rng, seed);
  check_case<T>(which, 13, 9, 600, 0, true, rng, seed);
}

}  // namespace

TEMPLATE_TEST_CASE("gemm: tiny and odd shapes (0, 1, 7, 33...) match the naive loop", "[gemm]",
                   float, double) {
  for (impl which : {impl::dispatch, impl::blocked_best, impl::blocked_portable})
    tiny_and_odd<TestType>(which);
}

TEMPLATE_TEST_CASE("gemm: random shapes across the blocking boundaries match the naive loop",
                   "[gemm]", float, double) {
  for (impl which : {impl::dispatch, impl::blocked_best, impl::blocked_portable})
    random_shapes<TestType>(which);
}

TEST_CASE("gemm: k = 0 writes zeros, or leaves C unchanged when accumulating", "[gemm]") {
  for (impl which : {impl::dispatch, impl::blocked_best, impl::blocked_portable}) {
    std::vector<float> c(6, 3.0f);
    run<float>(which, 2, 3, 0, nullptr, 0, nullptr, 3, c.data(), 3, true);
    CHECK(c == std::vector<float>(6, 3.0f));
    run<float>(which, 2, 3, 0, nullptr, 0, nullptr, 3, c.data(), 3, false);
    CHECK(c == std::vector<float>(6, 0.0f));
  }
}
