// ts::softmax, ts::log_softmax and ts::layer_norm against a serial loop over the same host
// data: every valid spec of ranks 1 and 2 and every second of rank 3 on the (2,2) and (2,4)
// meshes, the dimension rotating with the spec's number (negative numbers included), on an
// even shape, an uneven one and a random one (0 and fewer elements than shards included).
// Large values (up to 600) check the stability: a naive exp would overflow. The plan's
// collectives are checked against the spec: a pmax and a psum over the dimension's axes
// (layer_norm: two psums), none when it is unsharded. layer_norm on bfloat16 against float,
// forward and gradient.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include <typeshard/typeshard.hpp>

#include "support/foundation.hpp"

namespace {

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;

// The serial reference along dimension `dim` of a row-major tensor of shape s.
std::vector<double> reference(const std::vector<double>& x, const std::vector<std::size_t>& s,
                              std::size_t dim, bool log) {
  std::size_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < dim; ++d) outer *= s[d];
  for (std::size_t d = dim + 1; d < s.size(); ++d) inner *= s[d];
  const std::size_t n = s[dim];
  std::vector<double> out(x.size());
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t i = 0; i < inner; ++i) {
      double m = -std::numeric_limits<double>::infinity();
      for (std::size_t k = 0; k < n; ++k) m = std::max(m, x[(o * n + k) * inner + i]);
      double z = 0;
      for (std::size_t k = 0; k < n; ++k) z += std::exp(x[(o * n + k) * inner + i] - m);
      for (std::size_t k = 0; k < n; ++k) {
        const double v = x[(o * n + k) * inner + i];
        out[(o * n + k) * inner + i] = log ? (v - m) - std::log(z) : std::exp(v - m) / z;
      }
    }
  return out;
}

// The serial layer norm along `dim` (two passes in double, biased variance).
std::vector<double> reference_layer_norm(const std::vector<double>& x,
                                         const std::vector<std::size_t>& s, std::size_t dim,
                                         double eps) {
  std::size_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < dim; ++d) outer *= s[d];
  for (std::size_t d = dim + 1; d < s.size(); ++d) inner *= s[d];
  const std::size_t n = s[dim];
  std::vector<double> out(x.size());
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t i = 0; i < inner; ++i) {
      double mu = 0, var = 0;
      for (std::size_t k = 0; k < n; ++k) mu += x[(o * n + k) * inner + i];
      mu /= static_cast<double>(n);
      for (std::size_t k = 0; k < n; ++k)
        var += (x[(o * n + k) * inner + i] - mu) * (x[(o * n + k) * inner + i] - mu);
      var /= static_cast<double>(n);
      for (std::size_t k = 0; k < n; ++k)
        out[(o * n + k) * inner + i] = (x[(o * n + k) * inner + i] - mu) / std::sqrt(var + eps);
    }
  return out;
}

void compare(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= 1e-12 * std::max(1.0, std::abs(want[i])))) {
      CAPTURE(i, got[i], want[i]);
      FAIL("softmax or layer_norm differs from the serial loop");
    }
}

template <class Mesh, class Spec, std::size_t Rank, int Dim>
void check_spec_case(const ts::device_mesh<Mesh>& m, std::mt19937_64& rng) {
  using layout = ts::layout<Mesh, Spec, Rank>;
  constexpr std::size_t dim = Dim < 0 ? static_cast<std::size_t>(Dim + static_cast<int>(Rank))
                                      : static_cast<std::size_t>(Dim);
  std::vector<ts::shape<Rank>> shapes(3);
  for (std::size_t d = 0; d < Rank; ++d) {
    const std::size_t k = layout::shards_along(d);
    shapes[0][d] = k * (1 + d % 2);
    shapes[1][d] = k > 1 ? 2 * k - 1 : 3;
  }
  shapes[2] = ts_test::random_shape<layout>(rng, 200);
  for (const ts::shape<Rank>& s : shapes) {
    INFO("mesh " << Mesh::to_string() << " spec " << Spec::to_string() << " shape "
                 << ts::to_string(s) << " dimension " << Dim);
    ts::host_tensor<double, Rank> host(s);
    std::uniform_real_distribution<double> v(-5, 600);
    for (double& e : host.values()) e = v(rng);
    const auto x = ts::device_put<Spec>(m, host);
    using X = std::remove_cvref_t<decltype(x)>;
    using plan = ts::softmax_plan_for<X, Dim>;
    static_assert(plan::collectives == (layout::shards_along(dim) > 1 ? 2 : 0));
    static_assert(ts::communication_free<plan> == (layout::shards_along(dim) == 1));
    const auto p = ts::softmax<Dim>(x);
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(p)>, X>);
    const std::vector<double> xs(host.values().begin(), host.values().end());
    const std::vector<std::size_t> sv(s.begin(), s.end());
    const auto hp = ts::to_host(p);
    compare(std::vector<double>(hp.values().begin(), hp.values().end()),
            reference(xs, sv, dim, false));
    const auto hl = ts::to_host(ts::log_softmax<Dim>(x));
    compare(std::vector<double>(hl.values().begin(), hl.values().end()),
            reference(xs, sv, dim, true));
    // layer_norm: two psums over the dimension's axes, none when it is unsharded
    using ln_plan = ts::layer_norm_plan_for<X, Dim>;
    static_assert(ln_plan::collectives == (layout::shards_along(dim) > 1 ? 2 : 0));
    const auto y = ts::layer_norm<Dim>(x, 1e-5);
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(y)>, X>);
    const auto hy = ts::to_host(y);
    compare(std::vector<double>(hy.values().begin(), hy.values().end()),
            reference_layer_norm(xs, sv, dim, 1e-5));
  }
}

// Every spec (Stride 1), or every Stride-th (to keep the compile within budget).
template <class Mesh, std::size_t Rank, std::size_t Stride = 1>
void check_mesh_rank(ts::cpu_devices& devices, std::mt19937_64& rng) {
  const ts::device_mesh<Mesh> m{devices};
  ts_test::for_each_spec_sampled<Mesh, Rank, Stride>([&]<class Spec, std::size_t I>() {
    // Dimension I mod rank, counted from the back every second time.
    constexpr int d = static_cast<int>((I + Mesh::size) % Rank);
    check_spec_case<Mesh, Spec, Rank, (I % 2 == 1 ? d - static_cast<int>(Rank) : d)>(m, rng);
  });
}

}  // namespace

TEST_CASE("softmax, log_softmax and layer_norm agree with a serial loop, specs of ranks 1 to 3",
          "[softmax][property]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{8};
  check_mesh_rank<mesh_2x2, 1>(devices, rng);
  check_mesh_rank<mesh_2x2, 2>(devices, rng);
  check_mesh_rank<mesh_2x2, 3, 2>(devices, rng);  // 10 of its 19 specs
  check_mesh_rank<mesh_2x4, 1>(devices, rng);
  check_mesh_rank<mesh_2x4, 2>(devices, rng);
  check_mesh_rank<mesh_2x4, 3, 2>(devices, rng);
}

// A user's own layer_norm helper, called unqualified with typeshard arrays, stays theirs
// (ts::layer_norm is a function object: argument-dependent lookup does not find it).
namespace user_code {
template <class X>
int layer_norm(const X&) {
  return 7;
}
template <class X>
int call_unqualified(const X& x) {
  return layer_norm(x);
}
}  // namespace user_code

namespace {

// layer_norm on bfloat16 (float rows inside) against float, forward and gradient (a loss
// that casts float weights to bfloat16), along an unsharded and two sharded dimensions.
template <class Spec, int Dim>
void check_layer_norm_bf16(const ts::device_mesh<mesh_2x2>& m,
                           const ts::host_tensor<float, 3>& h,
                           const ts::host_tensor<float, 3>& c) {
  INFO("spec " << Spec::to_string() << " dimension " << Dim);
  using bf16 = ts::bfloat16;
  const auto x = ts::device_put<Spec>(m, h);
  using plan = ts::layer_norm_plan_for<std::remove_cvref_t<decltype(x)>, Dim>;
  INFO(plan::describe() << " / backward: " << plan::describe_backward());
  const auto yf = ts::to_host(ts::layer_norm<Dim>(x, 1e-5));
  const auto yb = ts::to_host(ts::astype<float>(ts::layer_norm<Dim>(ts::astype<bf16>(x), 1e-5)));
  for (std::size_t i = 0; i < yf.size(); ++i) {
    CAPTURE(i, yf.data()[i], yb.data()[i]);
    CHECK(std::abs(yf.data()[i] - yb.data()[i]) <= 0.03 * std::max(1.0f, std::abs(yf.data()[i])));
  }
  const auto w = ts::device_put<Spec>(m, c);
  auto [lb, gb] = ts::value_and_grad([&](auto v) {
    return ts::sum(ts::astype<float>(ts::layer_norm<Dim>(ts::astype<bf16>(v), 1e-5)) * w);
  })(x);
  auto [lf, gf] =
      ts::value_and_grad([&](auto v) { return ts::sum(ts::layer_norm<Dim>(v, 1e-5) * w); })(x);
  const auto hb = ts::to_host(gb), hf = ts::to_host(gf);
  for (std::size_t i = 0; i < hf.size(); ++i) {
    CAPTURE(i, hf.data()[i], hb.data()[i]);
    CHECK(std::abs(hf.data()[i] - hb.data()[i]) <= 0.05 * std::max(1.0f, std::abs(hf.data()[i])));
  }
}

}  // namespace

TEST_CASE("layer_norm on bfloat16 agrees with float, forward and gradient", "[softmax][bf16]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  ts::host_tensor<float, 3> h(ts::shape<3>{3, 5, 37}), c(ts::shape<3>{3, 5, 37});
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> v(-3, 3);
  for (float& e : h.values()) e = v(rng);
  for (float& e : c.values()) e = v(rng);
  CHECK(user_code::call_unqualified(ts::device_put<ts::spec<"x">>(m, h)) == 7);
  using ts::none;
  check_layer_norm_bf16<ts::spec<"x", none, none>, -1>(m, h, c);      // local rows
  check_layer_norm_bf16<ts::spec<"x", none, "y">, -1>(m, h, c);       // psums over y
  check_layer_norm_bf16<ts::spec<none, ts::axes("x", "y")>, 1>(m, h, c);  // over x and y
}
