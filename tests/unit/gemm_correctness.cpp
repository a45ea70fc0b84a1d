// Every GEMM path this machine runs (support/gemm_impls.hpp: kernels::gemm as it dispatches,
// the CBLAS call when linked, typeshard's packed kernel at avx512 / avx2 / portable) against
// a long double reference, untransposed operands (gemm_transposed.cpp does the others).
//
// Shapes: every combination of tiny and odd extents (0, 1, 2, 5, 7, 17, 33); long thin ones
// of 1000; random ones around each path's blocking edges (mr, nr, kc, mc, nc) and fully
// random ones; row strides wider than the matrices; with and without accumulate. Also: how
// the SIMD level is chosen and forced (gemm_isa.hpp), and concurrent calls (every device is a
// thread).
#include "support/gemm_impls.hpp"

#include <typeshard/kernels/gemm.hpp>
#include <typeshard/kernels/gemm_isa.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace k = typeshard::kernels;
using ts_test::check_case;
using ts_test::gemm_impl;

constexpr k::gemm_ops plain{};

template <class T>
void tiny_and_odd(gemm_impl which) {
  const std::uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  const std::size_t sizes[] = {0, 1, 2, 5, 7, 17, 33};
  for (std::size_t m : sizes)
    for (std::size_t n : sizes)
      for (std::size_t kk : sizes)
        for (bool acc : {false, true})
          check_case<T>(which, plain, m, n, kk, (m + n + kk) % 3, acc, rng, seed);
}

template <class T>
void long_and_thin(gemm_impl which) {
  const std::uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  const std::size_t shapes[][3] = {{1000, 17, 7}, {7, 1000, 17}, {17, 7, 1000},
                                   {1000, 1, 1},  {1, 1000, 1},  {1, 1, 1000},
                                   {1000, 33, 100}};
  for (const auto& s : shapes)
    for (bool acc : {false, true}) check_case<T>(which, plain, s[0], s[1], s[2], 3, acc, rng, seed);
}

// Property-style: extents drawn from each path's blocking edges (one below, at, one above
// mr, nr, kc and mc), then fully random ones; a printed seed replays a failure.
template <class T>
void random_shapes(gemm_impl which) {
  const std::uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  const ts_test::gemm_blocks blk = ts_test::blocks_of<T>(which);
  std::vector<std::size_t> edges;
  for (std::size_t e : {blk.mr, blk.nr, blk.kc, blk.mc})
    for (std::size_t d : {e - 1, e, e + 1}) edges.push_back(d);
  std::uniform_int_distribution<std::size_t> pick(0, edges.size() - 1);
  std::uniform_int_distribution<std::size_t> any(1, 200), pad(0, 9);
  for (int trial = 0; trial < 12; ++trial) {
    const bool edge = trial % 2 == 0;
    const std::size_t m = edge ? edges[pick(rng)] : any(rng);
    const std::size_t n = edge ? edges[pick(rng)] : any(rng);
    const std::size_t kk = edge ? edges[pick(rng)] : any(rng);
    check_case<T>(which, plain, m, n, kk, pad(rng), trial % 3 == 0, rng, seed);
  }
  // Wider than one nc panel; deeper than two kc slabs; taller than two mc blocks.
  check_case<T>(which, plain, 7, blk.nc + 19, 3, 1, false, rng, seed);
  check_case<T>(which, plain, 13, 9, 2 * blk.kc + 5, 0, true, rng, seed);
  check_case<T>(which, plain, 2 * blk.mc + 11, 21, blk.kc + 3, 2, false, rng, seed);
}

// Restores the automatic choice when a test that forces a level ends, even by an exception.
struct isa_guard {
  ~isa_guard() { k::set_gemm_isa(std::nullopt); }
};

}  // namespace

TEMPLATE_TEST_CASE("gemm: tiny and odd shapes (0, 1, 7, 33...) match the reference", "[gemm]",
                   float, double) {
  for (gemm_impl which : ts_test::gemm_impls_here()) tiny_and_odd<TestType>(which);
}

TEMPLATE_TEST_CASE("gemm: long thin shapes of 1000 match the reference", "[gemm]", float,
                   double) {
  for (gemm_impl which : ts_test::gemm_impls_here()) long_and_thin<TestType>(which);
}

TEMPLATE_TEST_CASE("gemm: random shapes across each path's blocking edges match the reference",
                   "[gemm]", float, double) {
  for (gemm_impl which : ts_test::gemm_impls_here()) random_shapes<TestType>(which);
}

TEST_CASE("gemm: k = 0 writes zeros, or leaves C unchanged when accumulating", "[gemm]") {
  for (gemm_impl which : ts_test::gemm_impls_here()) {
    INFO(ts_test::name(which));
    std::vector<float> c(6, 3.0f);
    ts_test::run<float>(which, 2, 3, 0, nullptr, 0, nullptr, 3, c.data(), 3, true, plain);
    CHECK(c == std::vector<float>(6, 3.0f));
    ts_test::run<float>(which, 2, 3, 0, nullptr, 0, nullptr, 3, c.data(), 3, false, plain);
    CHECK(c == std::vector<float>(6, 0.0f));
  }
}

TEST_CASE("gemm: every SIMD level the CPU has is tested, and the detection agrees with CPUID",
          "[gemm][isa]") {
  const std::vector<gemm_impl> here = ts_test::gemm_impls_here();
  const auto has = [&](gemm_impl w) { return std::count(here.begin(), here.end(), w) == 1; };
  CHECK(has(gemm_impl::packed_portable));
  CHECK(has(gemm_impl::packed_interleaved));
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl") && avx2;
  CHECK(has(gemm_impl::packed_avx2) == avx2);
  CHECK(has(gemm_impl::packed_avx512) == avx512);
  CHECK(k::gemm_isa_detected() ==
        (avx512 ? k::gemm_isa::avx512 : avx2 ? k::gemm_isa::avx2 : k::gemm_isa::portable));
#endif
}

TEST_CASE("gemm: forcing a level runs typeshard's own kernel at it, capped at the CPU's",
          "[gemm][isa]") {
  isa_guard restore;
  const k::gemm_isa best = k::gemm_isa_detected();
  for (k::gemm_isa isa : {k::gemm_isa::portable, k::gemm_isa::avx2, k::gemm_isa::avx512}) {
    const k::gemm_isa now = k::set_gemm_isa(isa);
    INFO("forced " << k::gemm_isa_name(isa) << ", detected " << k::gemm_isa_name(best));
    CHECK(static_cast<int>(now) == std::min(static_cast<int>(isa), static_cast<int>(best)));
    CHECK(k::gemm_isa_active() == now);
    CHECK(k::gemm_isa_forced() == isa);
    CHECK_FALSE(k::gemm_uses_blas());
    CHECK(k::gemm_kernel_name() == std::string("typeshard ") + k::gemm_isa_name(now));
    std::mt19937_64 rng(11);
    check_case<float>(gemm_impl::dispatch, plain, 67, 45, 301, 1, true, rng, 11);
    check_case<double>(gemm_impl::dispatch, {.trans_b = true}, 45, 67, 129, 2, false, rng, 11);
  }
  k::set_gemm_isa(std::nullopt);
  CHECK_FALSE(k::gemm_isa_forced());
  CHECK(k::gemm_isa_active() == best);
#if defined(TYPESHARD_HAVE_CBLAS)
  // Unforced, a linked BLAS runs unless typeshard's own AVX-512 kernel can (gemm.hpp).
  CHECK(k::gemm_uses_blas() == (best != k::gemm_isa::avx512));
#else
  CHECK_FALSE(k::gemm_uses_blas());
#endif
}

TEST_CASE("gemm: TYPESHARD_GEMM_ISA names a level, anything else forces nothing", "[gemm][isa]") {
  // The variable is read once, at the first use; its parser is what this checks.
  const char* before = std::getenv("TYPESHARD_GEMM_ISA");
  const std::string saved = before ? before : "";
  const auto parsed = [](const char* v) {
    ::setenv("TYPESHARD_GEMM_ISA", v, 1);
    return k::detail::gemm_isa_from_environment();
  };
  CHECK(parsed("portable") == static_cast<int>(k::gemm_isa::portable));
  CHECK(parsed("avx2") == static_cast<int>(k::gemm_isa::avx2));
  CHECK(parsed("avx512") == static_cast<int>(k::gemm_isa::avx512));
  CHECK(parsed("") == k::detail::gemm_isa_not_forced);
  CHECK(parsed("AVX512") == k::detail::gemm_isa_not_forced);
  CHECK(parsed("sse4") == k::detail::gemm_isa_not_forced);
  if (before)
    ::setenv("TYPESHARD_GEMM_ISA", saved.c_str(), 1);
  else
    ::unsetenv("TYPESHARD_GEMM_ISA");
}

TEST_CASE("gemm: concurrent calls, as the devices make them, each get their own product",
          "[gemm][threads]") {
  // Each thread multiplies its own operands with every path; the main thread checks the
  // results against one computed alone (Catch2's checks are not thread-safe). Packing buffers,
  // the one-time BLAS setup and the level's detection must not be shared unsafely.
  constexpr std::size_t threads = 4, m = 61, n = 75, kk = 300;
  const std::vector<gemm_impl> impls = ts_test::gemm_impls_here();
  std::vector<std::vector<float>> a(threads), b(threads), alone(threads * impls.size()),
      together(threads * impls.size());
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (std::size_t t = 0; t < threads; ++t) {
    a[t].resize(m * kk);
    b[t].resize(kk * n);
    for (float& x : a[t]) x = dist(rng);
    for (float& x : b[t]) x = dist(rng);
  }
  const auto product = [&](std::size_t t, std::size_t w, std::vector<float>& c) {
    c.assign(m * n, 0.0f);
    ts_test::run<float>(impls[w], m, n, kk, a[t].data(), kk, b[t].data(), n, c.data(), n, false,
                        plain);
  };
  for (std::size_t t = 0; t < threads; ++t)
    for (std::size_t w = 0; w < impls.size(); ++w) product(t, w, alone[t * impls.size() + w]);
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round)
        for (std::size_t w = 0; w < impls.size(); ++w)
          product(t, w, together[t * impls.size() + w]);
    });
  for (std::thread& th : pool) th.join();
  for (std::size_t i = 0; i < alone.size(); ++i) {
    INFO(ts_test::name(impls[i % impls.size()]) << ", thread " << i / impls.size());
    CHECK(together[i] == alone[i]);  // the same code on the same data: bit for bit
  }
}
