// kernels::gemm_bf16 (bfloat16 operands, float accumulation) at every SIMD level this machine
// runs (forced as gemm_correctness.cpp does: avx512 runs the vdpbf16ps kernel where the CPU
// has AVX-512 BF16, the lower levels the float kernel on the widened operands), against a
// double reference on the same bfloat16 values: tiny and odd shapes (odd k: the pair padding),
// shapes across the blocking edges (mr 14, nr 32, kc 1024, mc 168, nc 4096), every transpose,
// row strides wider than the matrices, accumulate, float and bfloat16 results. Small-integer
// operands make every path exact, so those must agree bit for bit.
#include <typeshard/kernels/gemm_bf16.hpp>
#include <typeshard/kernels/gemm_isa.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

namespace {

namespace k = typeshard::kernels;
using bf16 = typeshard::bfloat16;

struct isa_guard {
  ~isa_guard() { k::set_gemm_isa(std::nullopt); }
};

// The levels this CPU runs.
std::vector<k::gemm_isa> levels_here() {
  std::vector<k::gemm_isa> out{k::gemm_isa::portable};
  if (k::gemm_isa_detected() >= k::gemm_isa::avx2) out.push_back(k::gemm_isa::avx2);
  if (k::gemm_isa_detected() >= k::gemm_isa::avx512) out.push_back(k::gemm_isa::avx512);
  return out;
}

// One product: m x n x k with the given ops, padded row strides, C float (or bfloat16),
// against the double reference, on random normal values (tolerance: float summation) or
// small integers (exact).
template <class C>
void check_case(std::size_t m, std::size_t n, std::size_t kk, k::gemm_ops ops, std::size_t pad,
                bool accumulate, bool integers, std::mt19937_64& rng) {
  INFO("m " << m << " n " << n << " k " << kk << " trans_a " << ops.trans_a << " trans_b "
            << ops.trans_b << " pad " << pad << " accumulate " << accumulate << " integers "
            << integers << " level " << k::gemm_isa_name(k::gemm_isa_active()) << " native "
            << k::gemm_bf16_native());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> small(-4, 4);
  auto value = [&] { return bf16(integers ? float(small(rng)) : normal(rng)); };
  const std::size_t a_rows = ops.trans_a ? kk : m, a_cols = ops.trans_a ? m : kk;
  const std::size_t b_rows = ops.trans_b ? n : kk, b_cols = ops.trans_b ? kk : n;
  const std::size_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
  std::vector<bf16> a(a_rows * lda + 1), b(b_rows * ldb + 1);
  for (bf16& v : a) v = value();
  for (bf16& v : b) v = value();
  std::vector<C> c(m * ldc + 1);
  for (C& v : c) v = C(value());
  const std::vector<C> c0 = c;
  k::gemm_bf16(m, n, kk, a.data(), lda, b.data(), ldb, c.data(), ldc, accumulate, ops);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double want = accumulate ? double(float(c0[i * ldc + j])) : 0.0, mag = std::abs(want);
      for (std::size_t p = 0; p < kk; ++p) {
        const double x = float(ops.trans_a ? a[p * lda + i] : a[i * lda + p]);
        const double y = float(ops.trans_b ? b[j * ldb + p] : b[p * ldb + j]);
        want += x * y;
        mag += std::abs(x * y);
      }
      const double got = float(c[i * ldc + j]);
      double tol = integers ? 0.0 : (double(kk) + 2) * std::ldexp(mag, -23);
      if constexpr (std::is_same_v<C, bf16>) tol += std::ldexp(std::abs(want), -8);
      if (std::abs(got - want) > tol) {
        INFO("C(" << i << ", " << j << ") = " << got << ", want " << want << " +- " << tol);
        REQUIRE(std::abs(got - want) <= tol);
      }
    }
  // Nothing outside the m x n block of C is written.
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = n; j < ldc; ++j) REQUIRE(c[i * ldc + j] == c0[i * ldc + j]);
  REQUIRE(c.back() == c0.back());
}

constexpr k::gemm_ops all_ops[] = {{}, {.trans_a = true}, {.trans_b = true},
                                   {.trans_a = true, .trans_b = true}};

}  // namespace

TEST_CASE("gemm_bf16: tiny and odd shapes, every transpose, at every level", "[gemm][bf16]") {
  isa_guard guard;
  std::mt19937_64 rng(std::random_device{}());
  const std::size_t sizes[] = {0, 1, 2, 5, 17, 33};
  for (k::gemm_isa isa : levels_here()) {
    k::set_gemm_isa(isa);
    for (std::size_t m : sizes)
      for (std::size_t n : sizes)
        for (std::size_t kk : sizes)
          for (k::gemm_ops ops : all_ops) {
            const bool acc = (m + n + kk) % 2 == 1;
            check_case<float>(m, n, kk, ops, (m + kk) % 3, acc, false, rng);
          }
  }
}

TEST_CASE("gemm_bf16: shapes across the blocking edges, exact on small integers",
          "[gemm][bf16]") {
  isa_guard guard;
  std::mt19937_64 rng(std::random_device{}());
  struct shape {
    std::size_t m, n, k;
  };
  // mr 14, nr 32, kc 1024 (bfloat16 values), mc 168, nc 4096; odd k past a slab.
  const shape shapes[] = {{14, 32, 1024}, {15, 33, 1025}, {13, 31, 1023}, {169, 65, 2049},
                          {168, 64, 7},   {3, 4100, 9},   {200, 40, 301}};
  for (k::gemm_isa isa : levels_here()) {
    k::set_gemm_isa(isa);
    for (const shape& s : shapes)
      for (k::gemm_ops ops : all_ops) {
        check_case<float>(s.m, s.n, s.k, ops, 1, false, true, rng);
        check_case<float>(s.m, s.n, s.k, ops, 0, true, false, rng);
      }
    for (k::gemm_ops ops : all_ops) {
      check_case<bf16>(37, 45, 133, ops, 2, false, false, rng);
      check_case<bf16>(37, 45, 133, ops, 0, true, true, rng);
    }
  }
}

TEST_CASE("gemm_bf16: the vdpbf16ps kernel runs where the CPU has AVX-512 BF16",
          "[gemm][bf16][isa]") {
  isa_guard guard;
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool bf16_cpu = __builtin_cpu_supports("avx512bf16") &&
                        k::gemm_isa_detected() == k::gemm_isa::avx512;
  CHECK(k::gemm_bf16_detected() == bf16_cpu);
  k::set_gemm_isa(std::nullopt);
  CHECK(k::gemm_bf16_native() == bf16_cpu);
  k::set_gemm_isa(k::gemm_isa::avx2);
  CHECK_FALSE(k::gemm_bf16_native());
  k::set_gemm_isa(k::gemm_isa::avx512);
  CHECK(k::gemm_bf16_native() == bf16_cpu);
#endif
  // A NaN or infinity in an operand reaches the product, as in float.
  std::vector<bf16> a(20 * 20, bf16(1.0f)), b(20 * 20, bf16(1.0f));
  a[3 * 20 + 5] = std::numeric_limits<bf16>::quiet_NaN();
  b[7 * 20 + 9] = std::numeric_limits<bf16>::infinity();
  std::vector<float> c(20 * 20);
  k::gemm_bf16(20, 20, 20, a.data(), 20, b.data(), 20, c.data(), 20);
  CHECK(std::isnan(c[3 * 20 + 0]));
  CHECK(std::isinf(c[0 * 20 + 9]));
  CHECK(c[0] == 20.0f);
}
