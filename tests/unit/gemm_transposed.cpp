// Every GEMM path this machine runs (support/gemm_impls.hpp: kernels::gemm as it dispatches,
// the CBLAS call with CblasTrans when linked, typeshard's packed kernel at avx512 / avx2 /
// portable) with transposed operands (gemm_ops{trans_a, trans_b}) against a long double
// reference that reads the stored matrices through their transposes itself.
//
// Every (trans_a, trans_b, accumulate) combination, for float and double. Shapes: all
// combinations of tiny and odd extents (0, 1, 2, 5, 7, 13, 33), extents around each path's
// blocking edges (mr, nr, kc, mc), and products larger than mc, kc and nc; row strides are
// wider than the stored matrices.
#include "support/gemm_impls.hpp"

#include <typeshard/kernels/gemm.hpp>
#include <typeshard/kernels/gemm_blocked.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace {

namespace k = typeshard::kernels;
using ts_test::check_case;
using ts_test::gemm_impl;

const k::gemm_ops all_ops[] = {{false, false}, {true, false}, {false, true}, {true, true}};

template <class T>
void tiny_and_odd(gemm_impl which) {
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
void random_shapes(gemm_impl which) {
  const std::uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  // Extents around the path's blocking edges (and primes), then fully random ones.
  const ts_test::gemm_blocks blk = ts_test::blocks_of<T>(which);
  std::vector<std::size_t> edges{1, 17, 127};
  for (std::size_t e : {blk.mr, blk.nr, blk.kc, blk.mc})
    for (std::size_t d : {e - 1, e, e + 1}) edges.push_back(d);
  std::uniform_int_distribution<std::size_t> pick(0, edges.size() - 1);
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
void larger_than_the_blocks(gemm_impl which) {
  const std::uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  const ts_test::gemm_blocks blk = ts_test::blocks_of<T>(which);
  for (const k::gemm_ops ops : all_ops) {
    for (bool acc : {false, true}) {
      // Wider than one nc panel; deeper than two kc slabs; taller than two mc blocks with
      // k past one kc slab (every loop of the blocked driver runs more than once).
      check_case<T>(which, ops, 7, blk.nc + 19, 5, 3, acc, rng, seed);
      check_case<T>(which, ops, 13, 9, 2 * blk.kc + 89, 2, acc, rng, seed);
      check_case<T>(which, ops, 2 * blk.mc + 19, 37, blk.kc + 7, 1, acc, rng, seed);
    }
  }
}

}  // namespace

TEMPLATE_TEST_CASE("gemm transposed: tiny and odd shapes, every (trans_a, trans_b, accumulate)",
                   "[gemm][transpose]", float, double) {
  for (gemm_impl which : ts_test::gemm_impls_here()) tiny_and_odd<TestType>(which);
}

TEMPLATE_TEST_CASE("gemm transposed: random shapes across the blocking boundaries",
                   "[gemm][transpose]", float, double) {
  for (gemm_impl which : ts_test::gemm_impls_here()) random_shapes<TestType>(which);
}

TEMPLATE_TEST_CASE("gemm transposed: products larger than mc, kc and nc", "[gemm][transpose]",
                   float, double) {
  for (gemm_impl which : ts_test::gemm_impls_here()) larger_than_the_blocks<TestType>(which);
}

TEST_CASE("gemm transposed: the untransposed call and gemm_ops{} agree bit for bit",
          "[gemm][transpose]") {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const std::size_t m = 53, n = 41, kk = 300;
  std::vector<float> a(m * kk), b(kk * n), c1(m * n), c2(m * n);
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  for (gemm_impl which : ts_test::gemm_impls_here()) {
    INFO(ts_test::name(which));
    ts_test::run<float>(which, m, n, kk, a.data(), kk, b.data(), n, c1.data(), n, false, {});
    // Neither CBLAS nor the driver alone has a call without gemm_ops.
    if (which == gemm_impl::cblas || which == gemm_impl::packed_interleaved) continue;
    // The same call through the default argument (no gemm_ops at all).
    if (which == gemm_impl::dispatch)
      k::gemm<float>(m, n, kk, a.data(), kk, b.data(), n, c2.data(), n);
    else
      k::detail::gemm_blocked_at<float>(ts_test::isa_of(which), m, n, kk, a.data(), kk,
                                        b.data(), n, c2.data(), n, false);
    CHECK(c1 == c2);
  }
}

TEST_CASE("gemm transposed: k = 0 writes zeros, or leaves C unchanged when accumulating",
          "[gemm][transpose]") {
  for (gemm_impl which : ts_test::gemm_impls_here()) {
    for (const k::gemm_ops ops : all_ops) {
      std::vector<double> c(6, 3.0);
      ts_test::run<double>(which, 2, 3, 0, nullptr, 2, nullptr, 1, c.data(), 3, true, ops);
      CHECK(c == std::vector<double>(6, 3.0));
      ts_test::run<double>(which, 2, 3, 0, nullptr, 2, nullptr, 1, c.data(), 3, false, ops);
      CHECK(c == std::vector<double>(6, 0.0));
    }
  }
}
