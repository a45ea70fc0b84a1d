// kernels/vector_math.hpp at every SIMD level this CPU runs (forced as the GEMM tests force
// them), and the operations that use it:
//   - exp and tanh against the correctly rounded values (std:: in double, rounded to float)
//     over a sweep of float bit patterns in (-120, 120) and the special values: at most 1 ulp
//     (exp) and 2 ulp (tanh), the bounds measured on AVX-512 and AVX2 (one algorithm, the same
//     bits); NaN stays NaN; overflow gives inf, underflow 0 and subnormals within 1 ulp;
//   - exp_sum's exponentials and row sum; GELU (tanh form) and g * GELU' against double
//     references (absolute error at most 1e-6 (1 + |x|), as the float functors);
//   - to_bfloat16 bit for bit as bfloat16(float), NaN payloads and ties included;
//   - ts::softmax / ts::log_softmax of float and bfloat16 along the last dimension (the row
//     kernel), the dimension sharded (pmax and psum between its steps) and not, against a
//     double serial loop (float: 2e-6 of the row's largest probability, 1e-6 (1 + |value|) for
//     log; bfloat16: one bfloat16 rounding more); ts::gelu and ts::astype<bfloat16> through
//     them.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include <typeshard/typeshard.hpp>
#include <typeshard/kernels/vector_math.hpp>

#include "support/foundation.hpp"

namespace {

namespace ts = typeshard;
namespace k = typeshard::kernels;

struct isa_guard {
  ~isa_guard() { k::set_gemm_isa(std::nullopt); }
};

std::vector<k::gemm_isa> levels_here() {
  std::vector<k::gemm_isa> out{k::gemm_isa::portable};
  if (k::gemm_isa_detected() >= k::gemm_isa::avx2) out.push_back(k::gemm_isa::avx2);
  if (k::gemm_isa_detected() >= k::gemm_isa::avx512) out.push_back(k::gemm_isa::avx512);
  return out;
}

// Floats ordered as integers, so that the difference of two is their distance in ulp
// (subnormals included, -0 == +0).
std::int64_t ordered(float f) {
  const std::int32_t i = std::bit_cast<std::int32_t>(f);
  return i < 0 ? -static_cast<std::int64_t>(i & 0x7fffffff) : i;
}

// Every 509th bit pattern with |x| < 120, and the special values.
std::vector<float> sweep() {
  std::vector<float> x;
  for (std::uint64_t b = 0; b <= 0xffffffffu; b += 509) {
    const float f = std::bit_cast<float>(static_cast<std::uint32_t>(b));
    if (std::abs(f) < 120) x.push_back(f);
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float f : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 88.72f,
                  88.73f, 89.5f, -87.3f, -100.0f, -103.9f, -104.5f, 1e-30f, -1e-30f, 0.5f,
                  -0.5f, 0.49999997f, 9.5f, 10.5f, 1e30f, -1e30f})
    x.push_back(f);
  return x;
}

template <class F, class Ref>
std::int64_t max_ulp(const std::vector<float>& x, F f, Ref ref) {
  std::vector<float> y(x.size());
  f(x.data(), y.data(), x.size());
  std::int64_t worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float want = static_cast<float>(ref(static_cast<double>(x[i])));
    if (std::isnan(want)) {
      INFO("x " << x[i]);
      CHECK(std::isnan(y[i]));
      continue;
    }
    const std::int64_t d = std::abs(ordered(y[i]) - ordered(want));
    if (d > worst) worst = d;
  }
  return worst;
}

}  // namespace

TEST_CASE("vector exp and tanh: within 1 and 2 ulp of the correctly rounded values",
          "[kernels][vector_math]") {
  const isa_guard guard;
  const std::vector<float> x = sweep();
  for (k::gemm_isa isa : levels_here()) {
    k::set_gemm_isa(isa);
    INFO("level " << k::gemm_isa_name(isa));
    const std::int64_t e = max_ulp(x, k::exp, [](double v) { return std::exp(v); });
    const std::int64_t t = max_ulp(x, k::tanh, [](double v) { return std::tanh(v); });
    INFO("exp " << e << " ulp, tanh " << t << " ulp");
    CHECK(e <= 1);
    CHECK(t <= 2);
  }
}

TEST_CASE("vector exp_sum, gelu and gelu' against double references", "[kernels][vector_math]") {
  const isa_guard guard;
  std::mt19937_64 rng(ts_test::seed());
  INFO(ts_test::seed_message());
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (k::gemm_isa isa : levels_here()) {
    k::set_gemm_isa(isa);
    INFO("level " << k::gemm_isa_name(isa));
    for (std::size_t n : {0u, 1u, 7u, 16u, 33u, 200u}) {
      std::vector<float> x(n), g(n), y(n), dy(n);
      for (float& v : x) v = normal(rng);
      for (float& v : g) v = normal(rng);
      const float shift = n ? x[0] : 0.0f;
      const float sum = k::exp_sum(x.data(), shift, y.data(), n);
      double want_sum = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const double e = std::exp(double(x[i] - shift));  // x - shift rounded as the kernel's
        want_sum += e;
        CHECK(std::abs(y[i] - e) <= 1.2e-7 * e + 1e-45);  // 1 ulp, or a subnormal's
      }
      CHECK(std::abs(sum - want_sum) <= 1e-6 * want_sum);
      k::gelu_tanh(x.data(), y.data(), n);
      k::gelu_tanh_chain(g.data(), x.data(), dy.data(), n);
      for (std::size_t i = 0; i < n; ++i) {
        const double v = x[i], c = std::sqrt(2 / M_PI);
        const double t = std::tanh(c * (v + 0.044715 * v * v * v));
        const double gelu = 0.5 * v * (1 + t);
        const double grad = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * c * (1 + 3 * 0.044715 * v * v);
        INFO("x " << v);
        CHECK(std::abs(y[i] - gelu) <= 1e-6 * (1 + std::abs(v)));
        CHECK(std::abs(dy[i] - g[i] * grad) <= 1e-6 * (1 + std::abs(v)) * std::abs(g[i]));
      }
    }
  }
}

TEST_CASE("vector float -> bfloat16: bit for bit as bfloat16(float)", "[kernels][vector_math]") {
  const isa_guard guard;
  std::vector<float> x;
  for (std::uint64_t b = 0; b <= 0xffffffffu; b += 4099)
    x.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(b)));
  for (std::uint32_t b : {0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x7f800001u, 0xff800001u,
                          0x7fc00000u, 0x00008000u, 0x80018000u, 0x3f80ffffu})
    x.push_back(std::bit_cast<float>(b));  // ties both ways, overflow, NaN payloads
  for (k::gemm_isa isa : levels_here()) {
    k::set_gemm_isa(isa);
    INFO("level " << k::gemm_isa_name(isa));
    for (std::size_t n : {x.size(), std::size_t{13}}) {
      std::vector<ts::bfloat16> y(n);
      k::to_bfloat16(x.data(), y.data(), n);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < n; ++i) wrong += y[i].bits != ts::bfloat16(x[i]).bits;
      CHECK(wrong == 0);
    }
  }
}

namespace {

using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;

// The serial softmax (log: log_softmax) of the rows of a [rows, n] row-major tensor.
std::vector<double> reference(const std::vector<float>& x, std::size_t n, bool log) {
  std::vector<double> out(x.size());
  for (std::size_t r = 0; r * n < x.size(); ++r) {
    double m = -std::numeric_limits<double>::infinity(), z = 0;
    for (std::size_t i = 0; i < n; ++i) m = std::max(m, double(x[r * n + i]));
    for (std::size_t i = 0; i < n; ++i) z += std::exp(double(x[r * n + i]) - m);
    for (std::size_t i = 0; i < n; ++i) {
      const double v = double(x[r * n + i]) - m;
      out[r * n + i] = log ? v - std::log(z) : std::exp(v) / z;
    }
  }
  return out;
}

// Softmax and log_softmax of x (any spec, element T) against the reference; tolerance per
// element: see the top of this file.
template <class T, class X>
void check_softmax(const X& x, const std::vector<float>& host, std::size_t n) {
  const double round = std::is_same_v<T, float> ? 0.0 : std::ldexp(1.0, -8);
  for (bool log : {false, true}) {
    INFO("log " << log);
    const auto got = log ? ts::to_host(ts::log_softmax<-1>(x)) : ts::to_host(ts::softmax<-1>(x));
    const std::vector<double> want = reference(host, n, log);
    for (std::size_t r = 0; r * n < want.size(); ++r) {
      double scale = 0;
      for (std::size_t i = 0; i < n; ++i) scale = std::max(scale, std::abs(want[r * n + i]));
      for (std::size_t i = 0; i < n; ++i) {
        const double w = want[r * n + i], g = float(got.values()[r * n + i]);
        INFO("row " << r << " element " << i << " got " << g << " want " << w);
        const double tol = log ? 1e-6 * (1 + std::abs(w)) : 2e-6 * scale;
        CHECK(std::abs(g - w) <= tol + round * std::abs(w));
      }
    }
  }
}

}  // namespace

TEST_CASE("softmax rows on the vector kernel: float and bfloat16, the row sharded and not",
          "[softmax][vector_math]") {
  const isa_guard guard;
  std::mt19937_64 rng(ts_test::seed());
  INFO(ts_test::seed_message());
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m{devices};
  std::uniform_real_distribution<float> value(-30.0f, 30.0f);
  for (k::gemm_isa isa : levels_here()) {
    k::set_gemm_isa(isa);
    INFO("level " << k::gemm_isa_name(isa));
    for (std::size_t n : {1u, 8u, 37u, 100u}) {
      INFO("row of " << n);
      ts::host_tensor<float, 2> h({6, n});
      for (float& v : h.values()) v = value(rng);
      h(0, 0) = -1e9f;  // a masked position: exp underflows to 0
      if (n > 1) h(1, 1) = 500.0f;
      // Values exact in bfloat16, so that both element types see the same inputs.
      for (float& v : h.values()) v = float(ts::bfloat16(v));
      const std::vector<float> host(h.values().begin(), h.values().end());
      const auto local = ts::device_put<ts::spec<"x", ts::none>>(m, h);   // rows whole
      const auto split = ts::device_put<ts::spec<"x", "y">>(m, h);        // rows over "y"
      check_softmax<float>(local, host, n);
      check_softmax<float>(split, host, n);
      check_softmax<ts::bfloat16>(ts::astype<ts::bfloat16>(local), host, n);
      check_softmax<ts::bfloat16>(ts::astype<ts::bfloat16>(split), host, n);

      // ts::astype<bfloat16> and ts::gelu through the vector loops.
      const auto b = ts::to_host(ts::astype<ts::bfloat16>(split * 1.37f));
      const auto gl = ts::to_host(ts::gelu(split * 0.25f));
      for (std::size_t i = 0; i < host.size(); ++i) {
        CHECK(b.values()[i].bits == ts::bfloat16(host[i] * 1.37f).bits);
        const double v = host[i] * 0.25f;
        const double t = std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v));
        const double want = 0.5 * v * (1 + t);
        CHECK(std::abs(gl.values()[i] - want) <= 1e-6 * (1 + std::abs(v)));
      }
    }
  }
}
