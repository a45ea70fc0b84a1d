// Mixed precision on the 2x2 mesh against float references: ts::softmax and ts::log_softmax on
// bfloat16 (row statistics in float; along a sharded dimension too), and ts::value_and_grad of
// a loss that casts float master weights to bfloat16 (ts::astype on traced values), computes
// in bfloat16 (einsum / matmul with preferred_element<float>, tanh, log_softmax) and returns
// float gradients for the float weights, checked against the same loss computed in float on
// the same (bf16-rounded) data, with bf16 tolerances.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <type_traits>

#include <typeshard/typeshard.hpp>

#include "support/foundation.hpp"

namespace ts = typeshard;
using bf16 = ts::bfloat16;  // not `using ts::bfloat16`: OpenBLAS declares a global ::bfloat16

namespace {

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using ts::none;

// Values rounded to bf16 (so the float reference sees exactly the bf16 inputs).
template <std::size_t R>
ts::host_tensor<float, R> random_rounded(const ts::shape<R>& s, std::mt19937_64& rng,
                                         float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  ts::host_tensor<float, R> t(s);
  for (float& v : t.values()) v = float(bf16(d(rng)));
  return t;
}

template <class U, std::size_t R>
ts::host_tensor<U, R> cast(const ts::host_tensor<float, R>& t) {
  ts::host_tensor<U, R> out(t.extents());
  for (std::size_t i = 0; i < t.size(); ++i) out.data()[i] = U(t.data()[i]);
  return out;
}

template <class A>
auto whole(const A& a) {
  return ts::to_host(ts::reshard<ts::spec<>>(a));
}

// |got - want| <= tol * (|want| + max |want|): bf16 accuracy relative to the array's scale.
template <class G>
void check_near(const G& got, const ts::host_tensor<float, 2>& want, double tol,
                const char* what) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  double scale = 0;
  for (float v : want.values()) scale = std::max(scale, std::abs(double(v)));
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = double(float(got.data()[i])), w = double(want.data()[i]);
    INFO("element " << i << ": " << g << " vs " << w);
    REQUIRE(std::abs(g - w) <= tol * (std::abs(w) + scale));
  }
}

template <class Spec, bool Log, int Dim>
void check_softmax(const ts::device_mesh<mesh_2x2>& m, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::size_t> ext(1, 11);
  for (int round = 0; round < 4; ++round) {
    const ts::shape<2> s{ext(rng), ext(rng)};
    INFO("extents " << s[0] << " x " << s[1] << (Log ? " log_softmax" : " softmax"));
    const auto hx = random_rounded(s, rng, 3.0f);
    const auto xb = ts::device_put<Spec>(m, cast<bf16>(hx));
    const auto xf = ts::device_put<Spec>(m, hx);
    if constexpr (Log) {
      auto y = ts::log_softmax<Dim>(xb);
      static_assert(std::is_same_v<typename decltype(y)::value_type, bf16>);
      check_near(whole(y), whole(ts::log_softmax<Dim>(xf)), 1.0 / 128, "log_softmax");
    } else {
      auto y = ts::softmax<Dim>(xb);
      static_assert(std::is_same_v<typename decltype(y)::value_type, bf16>);
      check_near(whole(y), whole(ts::softmax<Dim>(xf)), 1.0 / 128, "softmax");
    }
  }
}

// The model: two layers, tanh, a log_softmax cross-entropy against soft targets y.
// Mixed: the weights cast to bf16, contractions accumulated in float, activations in bf16.
struct mixed_loss {
  template <class W1, class W2, class X, class Y>
  auto operator()(const W1& w1, const W2& w2, const X& x, const Y& y) const {
    const auto pf = ts::preferred_element<float>;
    auto h = ts::tanh(ts::astype<bf16>(ts::einsum<"bd,dh->bh">(x, ts::astype<bf16>(w1), pf)));
    auto logits = ts::einsum<"bh,hv->bv", ts::spec<"x", none>>(h, ts::astype<bf16>(w2), pf);
    auto lp = ts::astype<float>(ts::log_softmax<1>(ts::astype<bf16>(logits)));
    return -ts::mean(ts::sum<1>(lp * y));
  }
};
// The same model in float.
struct float_loss {
  template <class W1, class W2, class X, class Y>
  auto operator()(const W1& w1, const W2& w2, const X& x, const Y& y) const {
    auto h = ts::tanh(ts::einsum<"bd,dh->bh">(x, w1));
    auto logits = ts::einsum<"bh,hv->bv", ts::spec<"x", none>>(h, w2);
    return -ts::mean(ts::sum<1>(ts::log_softmax<1>(logits) * y));
  }
};

}  // namespace

TEST_CASE("mixed precision: softmax and log_softmax on bf16 vs float, sharded rows too",
          "[bf16][softmax]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  check_softmax<ts::spec<"x", "y">, false, -1>(m, rng);   // a pmax and a psum over y, in float
  check_softmax<ts::spec<"x", "y">, true, 0>(m, rng);     // over x
  check_softmax<ts::spec<none, none>, true, 1>(m, rng);   // local
  // bf16's row statistics are float: a long row of equal values sums exactly.
  ts::host_tensor<bf16, 2> ones({2, 4096});
  for (bf16& v : ones.values()) v = bf16(1.0f);
  const auto p = whole(ts::softmax<1>(ts::device_put<ts::spec<none, "y">>(m, ones)));
  for (bf16 v : p.values()) REQUIRE(v.bits == bf16(1.0f / 4096).bits);
}

TEST_CASE("mixed precision: value_and_grad through bf16 compute gives float gradients",
          "[bf16][grad]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  for (int round = 0; round < 3; ++round) {
    std::uniform_int_distribution<std::size_t> ext(2, 24);
    const std::size_t b = 2 * ext(rng), d = ext(rng), hd = 2 * ext(rng), v = 2 * ext(rng);
    INFO("b " << b << " d " << d << " h " << hd << " v " << v);
    const auto hw1 = random_rounded<2>({d, hd}, rng, 0.5f);
    const auto hw2 = random_rounded<2>({hd, v}, rng, 0.5f);
    const auto hx = random_rounded<2>({b, d}, rng, 1.0f);
    auto hy = random_rounded<2>({b, v}, rng, 1.0f);
    for (float& t : hy.values()) t = std::abs(t);
    // Data parallel over x, the hidden dimension over y (Megatron): the w1 gradient is
    // all-reduced over x, the logits over y (both in float).
    using W1S = ts::spec<none, "y">;
    using W2S = ts::spec<"y", none>;
    using XS = ts::spec<"x", none>;
    const auto w1 = ts::device_put<W1S>(m, hw1);
    const auto w2 = ts::device_put<W2S>(m, hw2);
    const auto y = ts::device_put<XS>(m, hy);
    auto [l, g] = ts::value_and_grad<0, 1>(mixed_loss{})(
        w1, w2, ts::device_put<XS>(m, cast<bf16>(hx)), y);
    auto [lf, gf] = ts::value_and_grad<0, 1>(float_loss{})(w1, w2, ts::device_put<XS>(m, hx), y);
    auto& [g1, g2] = g;
    auto& [gf1, gf2] = gf;
    // Float, w1's spec, and reduced already: astype's cotangent is a whole value (the
    // data-parallel all-reduce ran in float, in the backward of the preferred_element einsum).
    using G1 = std::remove_cvref_t<decltype(g1)>;
    static_assert(std::is_same_v<typename G1::value_type, float> &&
                  std::is_same_v<typename G1::spec, typename decltype(w1)::spec> &&
                  G1::unreduced_type::empty);
    const double lv = whole(l).data()[0], lfv = whole(lf).data()[0];
    REQUIRE(std::abs(lv - lfv) <= 0.02 * (1 + std::abs(lfv)));
    check_near(whole(g1), whole(gf1), 0.05, "d w1");
    check_near(whole(g2), whole(gf2), 0.05, "d w2");
  }
  // matmul with preferred_element on a traced operand: d w = x^T g.
  const auto hx = random_rounded<2>({8, 6}, rng, 1.0f);
  const auto hw = random_rounded<2>({6, 4}, rng, 1.0f);
  auto f = [](const auto& w, const auto& x) {
    return ts::sum(ts::matmul(x, ts::astype<bf16>(w), ts::preferred_element<float>));
  };
  auto gw = ts::grad<0>(f)(ts::device_put<ts::spec<>>(m, hw),
                           ts::device_put<ts::spec<"x", none>>(m, cast<bf16>(hx)));
  ts::host_tensor<float, 2> want({6, 4});
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 4; ++j) {
      float s = 0;
      for (std::size_t r = 0; r < 8; ++r) s += hx(r, i);
      want(i, j) = s;
    }
  check_near(whole(gw), want, 1.0 / 128, "matmul d w");
}
