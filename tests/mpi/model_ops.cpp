// The ops models use on the MPI backend: ts::take (vocabulary-parallel: the psum of the
// partial lookups; its scatter-add gradient), argmax / argmin over a sharded dimension (pmax
// then pmin), one_hot, iota, where and the model functions: one program gives the same
// numbers on MPI ranks as on the thread pool (whose own correctness the unit tests check
// against serial references), uneven shards included. And a mixed-precision training step
// (float master weights cast to bfloat16, einsums accumulated in float, bf16 activations and
// log_softmax): its loss and float gradients on MPI ranks as on threads. Slices, concatenation
// and split across shards with their gradients, max's gradient, and a parameter tree (a Hana
// struct) through value_and_grad and AdamW.
#include "support.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

namespace {

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x1 = ts::mesh<ts::axis("x", 2), ts::axis("y", 1)>;

ts::host_tensor<double, 2> random_tensor(const ts::shape<2>& s, std::mt19937_64& rng) {
  ts::host_tensor<double, 2> t(s);
  std::uniform_int_distribution<int> d(-9, 9);  // small integers: ties, exact sums
  for (double& v : t.values()) v = d(rng) / 4.0;
  return t;
}

template <class W, class B>
struct tree_params {
  BOOST_HANA_DEFINE_STRUCT(tree_params, (W, w), (B, b));
};
// The tree's leaves: W [n, 3] with its columns over y, b [3] over y.
template <class Mesh>
auto W_of(const ts::device_mesh<Mesh>& m, std::size_t n) {
  ts::host_tensor<double, 2> w({n, 3});
  for (std::size_t i = 0; i < w.size(); ++i) w.data()[i] = 0.1 * double(i % 5) - 0.2;
  return ts::device_put<ts::spec<ts::none, "y">>(m, w);
}
template <class Mesh>
auto B_of(const ts::device_mesh<Mesh>& m) {
  return ts::device_put<ts::spec<"y">>(m, ts::host_tensor<double, 1>({3}, {0.1, -0.2, 0.3}));
}

template <class Mesh>
std::vector<std::vector<double>> program(ts::backend& b, const ts::host_tensor<double, 2>& a,
                                         const ts::host_tensor<int, 1>& ids) {
  ts::device_mesh<Mesh> m{b};
  std::vector<std::vector<double>> r;
  auto keep = [&r](const auto& host) {
    r.emplace_back(host.values().begin(), host.values().end());
  };
  const auto A = ts::device_put<ts::spec<"x", "y">>(m, a);
  const auto I = ts::device_put<ts::spec<"y">>(m, ids);
  keep(ts::to_host(ts::argmax<1>(A)));                                    // pmax, pmin over y
  keep(ts::to_host(ts::argmin<0>(A, ts::keep_dims)));                     // over x
  keep(ts::to_host(ts::one_hot(ts::argmax<1>(A), a.extents()[1])));
  keep(ts::to_host(ts::iota<int, ts::spec<"x", "y">, 1>(m, a.extents())));
  keep(ts::to_host(ts::where(A > 0.0, ts::gelu(A), ts::sigmoid(A) + ts::clip(A, -1.0, 1.0))));
  const auto table = ts::device_put<ts::spec<"x", ts::none>>(m, a);      // rows over x
  keep(ts::to_host(ts::reshard<ts::spec<"y", ts::none>>(ts::take(table, I))));  // psum over x
  const auto loss = [&I](auto t) {  // the lookup reduced (psum over x) before the sine
    return ts::sum(ts::sin(ts::reshard<ts::spec<"y", ts::none>>(ts::take(t, I))));
  };
  const auto [l, g] = ts::value_and_grad<0>(loss)(table);
  keep(ts::to_host(ts::reshard<ts::spec<>>(l)));
  keep(ts::to_host(ts::reshard<ts::spec<"x", ts::none>>(g)));           // the all-reduce over y
  // slices, concatenation and split across shards (all_gathers), their gradients, and max's
  const std::size_t n = a.extents()[1];
  keep(ts::to_host(ts::slice_in_dim<1>(A, 1, n - 1)));
  const auto both = ts::concat<1>(A, A);
  keep(ts::to_host(both));
  keep(ts::to_host(ts::split<1, 2>(both)[1]));
  const auto pieces = [n](auto t) {
    return ts::sum<ts::spec<>>(ts::sin(ts::concat<0>(ts::slice_in_dim<1>(t, 1, n - 1),
                                                     ts::slice_in_dim<1>(t, 0, n - 1)))) +
           ts::sum<ts::spec<>>(ts::max<0>(t));
  };
  const auto [ls, gs] = ts::value_and_grad<0>(pieces)(A);
  keep(ts::to_host(ts::reshard<ts::spec<>>(ls)));
  keep(ts::to_host(gs));
  // a parameter tree (a Hana struct) through value_and_grad and AdamW (ZeRO over x)
  tree_params<decltype(W_of(m, n)), decltype(B_of(m))> p{W_of(m, n), B_of(m)};
  auto state = ts::zero_adam_init<"x">(p);
  const auto tree_loss = [&A](const auto& q) {
    return ts::mean(ts::sin(ts::matmul(A, q.w) + q.b));
  };
  for (int step = 0; step < 2; ++step) {
    const auto [lt, gt] = ts::value_and_grad(tree_loss)(p);
    keep(ts::to_host(ts::reshard<ts::spec<>>(lt)));
    p = ts::adamw_update(p, gt, state, {.lr = 0.05, .weight_decay = 0.1});
  }
  keep(ts::to_host(p.w));
  keep(ts::to_host(p.b));
  return r;
}

template <class Mesh>
struct same_numbers {
  static void run(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (const ts::shape<2> e : {ts::shape<2>{8, 6}, ts::shape<2>{5, 3}, ts::shape<2>{3, 7}}) {
      INFO(Mesh::to_string() << " extents " << ts::to_string(e));
      const auto a = random_tensor(e, rng);
      ts::host_tensor<int, 1> ids({5});
      for (std::size_t i = 0; i < 5; ++i) ids(i) = static_cast<int>((i * 7 + seed) % e[0]);
      const auto on_mpi = program<Mesh>(mpi_test::devices(), a, ids);
      ts::cpu_devices threads{Mesh::size};
      const auto on_threads = program<Mesh>(threads, a, ids);
      REQUIRE(on_mpi.size() == on_threads.size());
      for (std::size_t i = 0; i < on_mpi.size(); ++i) {
        INFO("result " << i);
        REQUIRE(on_mpi[i].size() == on_threads[i].size());
        for (std::size_t k = 0; k < on_mpi[i].size(); ++k)
          REQUIRE(std::abs(on_mpi[i][k] - on_threads[i][k]) <=
                  1e-12 * (1 + std::abs(on_threads[i][k])));
      }
    }
  }
};

// The mixed-precision step: data parallel over x, the hidden dimension over y (Megatron): the
// w1 gradient all-reduced over x, the logits over y, in float (preferred_element<float>).
struct mixed_loss {
  template <class W1, class W2, class X, class Y>
  auto operator()(const W1& w1, const W2& w2, const X& x, const Y& y) const {
    using bf16 = ts::bfloat16;
    const auto pf = ts::preferred_element<float>;
    auto h = ts::tanh(ts::astype<bf16>(ts::einsum<"bd,dh->bh">(x, ts::astype<bf16>(w1), pf)));
    h = ts::where(h > 0.0f, h, h * 0.5f);
    auto logits = ts::einsum<"bh,hv->bv", ts::spec<"x", ts::none>>(h, ts::astype<bf16>(w2), pf);
    auto lp = ts::astype<float>(ts::log_softmax<1>(ts::astype<bf16>(logits)));
    return -ts::mean(ts::sum<1>(lp * y));
  }
};

template <class Mesh>
std::vector<std::vector<double>> mixed_program(ts::backend& b,
                                               const ts::host_tensor<float, 2>& w1,
                                               const ts::host_tensor<float, 2>& w2,
                                               const ts::host_tensor<float, 2>& x,
                                               const ts::host_tensor<float, 2>& y) {
  ts::device_mesh<Mesh> m{b};
  ts::host_tensor<ts::bfloat16, 2> xb(x.extents());
  for (std::size_t i = 0; i < x.size(); ++i) xb.data()[i] = ts::bfloat16(x.data()[i]);
  using XS = ts::spec<"x", ts::none>;
  auto [l, g] = ts::value_and_grad<0, 1>(mixed_loss{})(
      ts::device_put<ts::spec<ts::none, "y">>(m, w1),
      ts::device_put<ts::spec<"y", ts::none>>(m, w2),
      ts::device_put<XS>(m, xb), ts::device_put<XS>(m, y));
  const auto& [g1, g2] = g;
  static_assert(std::is_same_v<typename std::remove_cvref_t<decltype(g1)>::value_type, float>);
  std::vector<std::vector<double>> r;
  auto keep = [&r](const auto& host) {
    r.emplace_back(host.values().begin(), host.values().end());
  };
  keep(ts::to_host(ts::reshard<ts::spec<>>(l)));
  keep(ts::to_host(ts::reshard<ts::spec<>>(g1)));  // unreduced over x: the all-reduce
  keep(ts::to_host(ts::reshard<ts::spec<>>(g2)));
  return r;
}

template <class Mesh>
void mixed_same_numbers(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.5f);
  auto random = [&](std::size_t r, std::size_t c) {
    ts::host_tensor<float, 2> t({r, c});
    for (float& v : t.values()) v = d(rng);
    return t;
  };
  for (const auto& [bs, dm, hd, v] : {std::array<std::size_t, 4>{8, 6, 8, 10},
                                      std::array<std::size_t, 4>{6, 5, 6, 4}}) {
    INFO(Mesh::to_string() << " b " << bs << " d " << dm << " h " << hd << " v " << v);
    const auto w1 = random(dm, hd), w2 = random(hd, v), x = random(bs, dm);
    auto y = random(bs, v);
    for (float& t : y.values()) t = std::abs(t);
    const auto on_mpi = mixed_program<Mesh>(mpi_test::devices(), w1, w2, x, y);
    ts::cpu_devices threads{Mesh::size};
    const auto on_threads = mixed_program<Mesh>(threads, w1, w2, x, y);
    REQUIRE(on_mpi.size() == on_threads.size());
    for (std::size_t i = 0; i < on_mpi.size(); ++i) {
      INFO("result " << i << " (loss, d w1, d w2)");
      REQUIRE(on_mpi[i].size() == on_threads[i].size());
      double scale = 0;
      for (double t : on_threads[i]) scale = std::max(scale, std::abs(t));
      REQUIRE(scale > 0);
      // The same float sums, maybe in another order: a bf16 rounding apart at most.
      for (std::size_t k = 0; k < on_mpi[i].size(); ++k)
        REQUIRE(std::abs(on_mpi[i][k] - on_threads[i][k]) <=
                (std::abs(on_threads[i][k]) + scale) / 256);
    }
  }
}

}  // namespace

TEST_CASE("mixed precision (float master weights, bf16 compute): the same step on MPI and "
          "threads",
          "[mpi][bf16]") {
  if (mpi_test::size() == 4)
    mixed_same_numbers<mesh_2x2>(mpi_test::shared_seed());
  else if (mpi_test::size() == 2)
    mixed_same_numbers<mesh_2x1>(mpi_test::shared_seed());
  else
    WARN("run with 2 or 4 ranks; nothing checked with " << mpi_test::size());
}

TEST_CASE("take, argmax, one_hot, iota, where and the model functions: the same numbers on MPI "
          "and threads",
          "[mpi][ops]") {
  if (mpi_test::size() == 4)
    same_numbers<mesh_2x2>::run(mpi_test::shared_seed());
  else if (mpi_test::size() == 2)
    same_numbers<mesh_2x1>::run(mpi_test::shared_seed());
  else
    WARN("run with 2 or 4 ranks; nothing checked with " << mpi_test::size());
}
