// Mixed precision on the 2x2 mesh against float references: ts::softmax and ts::log_softmax on
// bfloat16 (row statistics in float; along a sharded dimension too), and ts::value_and_grad of
// a loss that casts float master weights to bfloat16 (ts::astype on traced values), computes
// in bfloat16 (einsum / matmul with preferred_element<float>, tanh, log_softmax) and returns
// float gradients for the float weights, checked against the same loss computed in float on
// the same (bf16-rounded) data, with bf16 tolerances; the model functions, comparisons, where,
// argmax / argmin and scalar literals on bf16 arrays, blocks and traced values (each the float
// result rounded once).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

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
    // Float, w1's spec, and unreduced over "x" (data parallel) as the float model's: w1's bf16
    // copy is a cast leaf, whose contributions keep their unreduced axes; whole() all-reduces.
    using G1 = std::remove_cvref_t<decltype(g1)>;
    using GF1 = std::remove_cvref_t<decltype(gf1)>;
    static_assert(std::is_same_v<typename G1::value_type, float> &&
                  std::is_same_v<typename G1::spec, typename decltype(w1)::spec> &&
                  std::is_same_v<typename G1::unreduced_type, ts::unreduced<"x">> &&
                  std::is_same_v<G1, GF1>);
    const double lv = whole(l).data()[0], lfv = whole(lf).data()[0];
    REQUIRE(std::abs(lv - lfv) <= 0.02 * (1 + std::abs(lfv)));
    check_near(whole(g1), whole(gf1), 0.05, "d w1");
    check_near(whole(g2), whole(gf2), 0.05, "d w2");
    if (round == 0) {  // the plans of the same step: the cast leaves record no node
      const auto lines = ts::backward_plans<0, 1>(mixed_loss{})(
          w1, w2, ts::device_put<XS>(m, cast<bf16>(hx)), y);
      REQUIRE(!lines.empty());
      std::size_t mixed = 0;
      for (const auto& line : lines) mixed += line.find("preferred_element") != line.npos;
      CHECK(mixed == 2);
    }
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
  // A plain bf16 matmul of the cast leaf: the bf16 partial sums reach w's gradient as float,
  // unreduced over "x" (the caller's all-reduce adds them in float).
  auto f16 = [](const auto& w, const auto& x) {
    return ts::sum(ts::astype<float>(ts::matmul(x, ts::astype<bf16>(w))));
  };
  auto gw16 = ts::grad<0>(f16)(ts::device_put<ts::spec<>>(m, hw),
                               ts::device_put<ts::spec<"x", none>>(m, cast<bf16>(hx)));
  static_assert(std::is_same_v<decltype(gw16), decltype(gw)>);
  check_near(whole(gw16), want, 1.0 / 64, "plain bf16 matmul d w");
}

namespace {

// The model functions, comparisons, where and scalar literals on one operand kind (arrays or
// blocks): x any values, p positive ones, both with x's spec. Each result is one operation on
// its inputs, so on bf16 it must be the float result rounded once.
struct model_ops {
  template <class X>
  auto operator()(const X& x, const X& p) const {
    return std::tuple{ts::sigmoid(x),         ts::softplus(x),
                      ts::gelu(x),            ts::gelu(x, false),
                      ts::rsqrt(p),           ts::pow(p, 0.5f),
                      ts::pow(x, 3),          ts::pow(p, x),
                      ts::clip(x, -1.0f, 1),  x > 0.5f,
                      ts::less_equal(x, p),   ts::where(x > 0.0f, x, p),
                      ts::where(p < 1, 2.0, x), x * 2.0f,
                      3 * x,                  x + 1,
                      1.5 - x,                x / 4.0f,
                      3.0f / p,               ts::argmax<1>(x),
                      ts::argmin<0>(p)};
  }
};

template <class R>
auto host_of(const R& r) {
  if constexpr (ts::block_like<R>)
    return r.to_host();
  else
    return whole(r);
}

// The results (by position in model_ops) whose bf16 elements differ from the float ones
// rounded to bf16 (indices: differ at all), with how many differ; empty when none does.
template <class TB, class TF>
std::string mismatches(const TB& got, const TF& want) {
  std::string out;
  auto one = [&](std::size_t op, const auto& g, const auto& w) {
    const auto hg = host_of(g);
    const auto hw = host_of(w);
    std::size_t bad = hg.size() == hw.size() ? 0 : 1;
    for (std::size_t i = 0; bad == 0 && i < hg.size(); ++i) {
      using G = std::remove_cvref_t<decltype(hg.data()[i])>;
      if constexpr (std::is_same_v<G, bf16>)
        bad += hg.data()[i].bits != bf16(hw.data()[i]).bits;
      else
        bad += hg.data()[i] != hw.data()[i];
    }
    if (bad != 0) out += "op " + std::to_string(op) + " ";
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (one(I, std::get<I>(got), std::get<I>(want)), ...);
  }(std::make_index_sequence<std::tuple_size_v<TB>>{});
  return out;
}

// A loss through the model functions of float weights w: on a bf16 copy of w (Bf16) or on w.
template <bool Bf16>
struct functions_loss {
  template <class W>
  auto operator()(const W& w) const {
    auto f = [](const auto& x) {
      auto y = ts::sigmoid(x) + ts::softplus(x) * 0.5f + ts::gelu(x) - ts::gelu(x, false) * 2;
      auto z = ts::rsqrt(x * x + 1) + ts::pow(x, 3) + ts::clip(x, -1.0f, 1);
      return y + ts::where(x > 0.0f, z, 0.25f * x);
    };
    if constexpr (Bf16)
      return ts::sum(ts::astype<float>(f(ts::astype<bf16>(w))));
    else
      return ts::sum(f(w));
  }
};

}  // namespace

TEST_CASE("mixed precision: model functions, where, argmax and scalar literals on bf16",
          "[bf16]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  using S = ts::spec<"x", "y">;
  std::uniform_int_distribution<std::size_t> ext(1, 9);
  for (int round = 0; round < 3; ++round) {
    const ts::shape<2> s{2 * ext(rng), 2 * ext(rng)};
    INFO("extents " << s[0] << " x " << s[1]);
    const auto hx = random_rounded(s, rng, 2.0f);
    auto hp = random_rounded(s, rng, 2.0f);
    for (float& v : hp.values()) v = float(bf16(std::abs(v) + 0.25f));
    const auto xb = ts::device_put<S>(m, cast<bf16>(hx));
    const auto pb = ts::device_put<S>(m, cast<bf16>(hp));
    const auto xf = ts::device_put<S>(m, hx);
    const auto pf = ts::device_put<S>(m, hp);
    // Arrays.
    const auto gb = model_ops{}(xb, pb);
    static_assert(std::is_same_v<typename std::tuple_element_t<0, decltype(gb)>::value_type,
                                 bf16>);
    CHECK(mismatches(gb, model_ops{}(xf, pf)) == "");
    // Blocks, inside shard_map: each device compares its own blocks.
    std::vector<std::string> bad(4);
    const auto f = ts::shard_map<mesh_2x2, ts::specs<S, S, S, S>, S>(
        [&](const ts::shard_context<mesh_2x2>& c, const auto& x, const auto& p,
            const auto& x32, const auto& p32) {
          bad[c.position()] = mismatches(model_ops{}(x, p), model_ops{}(x32, p32));
          return x32;
        });
    (void)f(xb, pb, xf, pf);
    for (std::size_t d = 0; d < 4; ++d) CHECK(bad[d] == "");
    // Traced: float weights, bf16 compute; against the same loss in float on the same values.
    const auto w = ts::device_put<S>(m, hx);
    auto [l, g] = ts::value_and_grad(functions_loss<true>{})(w);
    auto [lf, gf] = ts::value_and_grad(functions_loss<false>{})(w);
    static_assert(std::is_same_v<typename decltype(g)::value_type, float>);
    const double lv = whole(l).data()[0], lfv = whole(lf).data()[0];
    CHECK(std::abs(lv - lfv) <= 0.02 * (1 + std::abs(lfv)));
    check_near(whole(g), whole(gf), 1.0 / 32, "d w through the functions");
  }
}
