// Rank-0 arrays (issue 35 item 5): a reduction over every dimension gives a rank-0 array
// (ts::spec<>, ts::extents<>), as in JAX, on arrays, on shard_map blocks and on traced values.
// Every result is compared with a serial loop over the same host data, on random shapes (empty
// and uneven ones included) over a few specs chosen at run time from a small set:
//   - arrays: sum<>, mean<>, max<>, min<> give rank 0, sum and mean unreduced over every axis
//     the input shards over, max and min replicated; reshard<spec<>> (the psum), to_host (a
//     host_tensor<T, 0>), item(), addressable_shards, printing; keep_dims still keeps every
//     dimension at extent 1; device_put of a rank-0 host tensor; arithmetic with a rank-0
//     array, broadcast against a rank-2 one (x - mean<>(x)), as NumPy and JAX do;
//   - blocks: a shard_map body reducing its block over every dimension gives a rank-0 block,
//     psum'd over the mesh and returned with out spec P();
//   - traced values: ts::value_and_grad of a rank-0 loss, its value and gradient checked
//     against finite differences and against the replicated (serial) run.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <typeshard/typeshard.hpp>

#include "grad_check.hpp"
#include "support/foundation.hpp"

namespace {

namespace ts = typeshard;
using grad_test::check_gradients;
using grad_test::random_tensor;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;


struct serial {
  double sum = 0, max = -INFINITY, min = INFINITY;
  std::size_t n = 0;
};
serial reference(const ts::host_tensor<double, 2>& h) {
  serial r;
  for (double v : h.values()) {
    r.sum += v;
    r.max = std::max(r.max, v);
    r.min = std::min(r.min, v);
  }
  r.n = h.size();
  return r;
}

bool close(double a, double b) {
  return std::abs(a - b) <= 1e-12 * (1 + std::abs(a) + std::abs(b));
}

template <class Spec>
void check_array_reductions(const ts::device_mesh<mesh_2x2>& m, const ts::shape<2>& s,
                            std::mt19937_64& rng) {
  ts::host_tensor<double, 2> h(s);
  std::uniform_int_distribution<int> v(-9, 9);  // small integers: exact sums in any order
  for (double& e : h.values()) e = v(rng);
  const serial want = reference(h);
  const auto x = ts::device_put<Spec>(m, h);
  using X = std::remove_cvref_t<decltype(x)>;
  using partial = typename ts::reduce_plan_for<ts::reduction::sum, X, 0, 1>::out_unreduced;

  const auto sum = ts::sum<>(x);
  using S = std::remove_cvref_t<decltype(sum)>;
  static_assert(S::rank == 0);
  static_assert(std::is_same_v<typename S::spec, ts::spec<>>);
  static_assert(std::is_same_v<typename S::extents_type, ts::extents<>>);
  static_assert(std::is_same_v<typename S::unreduced_type, partial>);  // every sharding axis
  static_assert(std::is_same_v<decltype(ts::sum<0, 1>(x)), S>);  // both spellings
  const ts::host_tensor<double, 0> hs = ts::to_host(ts::reshard<ts::spec<>>(sum));  // psum
  CHECK(hs.extents() == ts::shape<0>{});
  CHECK(hs.size() == 1);
  CHECK(hs() == want.sum);
  CHECK(hs.item() == want.sum);

  const auto mean = ts::reshard<ts::spec<>>(ts::mean<>(x));
  if (want.n != 0) CHECK(close(mean.item(), want.sum / double(want.n)));

  const auto mx = ts::max<>(x);  // pmax over the sharding axes: replicated, no reshard
  static_assert(decltype(mx)::rank == 0 && decltype(mx)::unreduced_type::empty);
  const auto mn = ts::min<>(x);
  CHECK(mx.item() == want.max);
  CHECK(mn.item() == want.min);
  // Every device holds the one element (replicated).
  for (const auto& sh : mx.addressable_shards()) {
    CHECK(sh.shape == ts::shape<0>{});
    REQUIRE(sh.data.size() == 1);
    CHECK(sh.data[0] == want.max);
  }

  // keep_dims: every dimension kept at extent 1 (the rank-2 result).
  const auto kept = ts::sum<>(x, ts::keep_dims);
  static_assert(decltype(kept)::rank == 2);
  CHECK(kept.extents() == ts::shape<2>{1, 1});
  CHECK(ts::to_host(ts::reshard<ts::spec<>>(kept))(0, 0) == want.sum);

  // Arithmetic with rank 0: scalars, rank 0 with rank 0, and broadcast against rank 2.
  const auto two = (mx + mn) * 2.0;
  static_assert(decltype(two)::rank == 0);
  if (want.n != 0) CHECK(two.item() == 2 * (want.max + want.min));  // else -inf + inf
  const auto centred = x - mx;  // rank 2 - rank 0: the scalar broadcasts
  static_assert(std::is_same_v<typename decltype(centred)::spec, typename X::spec>);
  const auto hc = ts::to_host(centred);
  for (std::size_t i = 0; i < h.size(); ++i) CHECK(hc.data()[i] == h.data()[i] - want.max);
  CHECK(ts::to_host(mx - x).extents() == s);  // rank 0 on the left
  // A sum of a rank-0 array is itself.
  CHECK(ts::sum<>(mx).item() == want.max);
}

// A shard_map body that reduces its block over every dimension: a rank-0 block on each
// device, psum'd over both axes, returned with out spec P().
template <class Spec>
void check_block_reductions(const ts::device_mesh<mesh_2x2>& m, std::size_t rows,
                            std::size_t cols, std::mt19937_64& rng) {
  ts::host_tensor<double, 2> h({rows, cols});
  std::uniform_int_distribution<int> v(-9, 9);
  for (double& e : h.values()) e = v(rng);
  const serial want = reference(h);
  const auto f = ts::shard_map<mesh_2x2, Spec, ts::specs<ts::spec<>, ts::spec<>>>(
      [](const auto& b) {
        const auto s = ts::sum<>(b);
        static_assert(std::remove_cvref_t<decltype(s)>::rank == 0);
        const auto k = ts::max<>(b, ts::keep_dims);  // the rank-2 form stays
        static_assert(std::remove_cvref_t<decltype(k)>::rank == 2);
        const auto mx = ts::pmax<"x">(ts::pmax<"y">(ts::max<>(b)));
        const auto sy = ts::psum<"y">(s);  // every spec here shards over y
        // psum over x only where the block varies over x (over an invariant axis it would
        // add equal copies, as in JAX).
        if constexpr (std::remove_cvref_t<decltype(b)>::template varies_over<"x">)
          return std::make_tuple(ts::psum<"x">(sy), mx * 2.0);
        else
          return std::make_tuple(sy, mx * 2.0);
      });
  const auto [total, mx] = f(ts::device_put<Spec>(m, h));
  static_assert(std::is_same_v<typename std::remove_cvref_t<decltype(total)>::spec, ts::spec<>>);
  static_assert(std::remove_cvref_t<decltype(total)>::rank == 0);
  CHECK(total.item() == want.sum);
  CHECK(mx.item() == 2 * want.max);
}

}  // namespace

TEST_CASE("rank 0: reductions over every dimension of arrays, random shapes and specs",
          "[reduce][rank0]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  std::uniform_int_distribution<std::size_t> extent(0, 9);
  for (int trial = 0; trial < 12; ++trial) {
    ts::shape<2> s{extent(rng), extent(rng)};
    if (trial == 0) s = {4, 6};  // even
    if (trial == 1) s = {0, 3};  // empty: sum 0, max -inf
    INFO("shape " << ts::to_string(s) << " spec number " << trial % 4);
    switch (trial % 4) {
      case 0: check_array_reductions<ts::spec<"x", "y">>(m, s, rng); break;
      case 1: check_array_reductions<ts::spec<ts::axes("x", "y")>>(m, s, rng); break;
      case 2: check_array_reductions<ts::spec<ts::none, "y">>(m, s, rng); break;
      default: check_array_reductions<ts::spec<>>(m, s, rng); break;
    }
  }
}

TEST_CASE("rank 0: device_put, to_host, item and printing", "[rank0]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const ts::host_tensor<float, 0> h({}, {2.5f});
  const auto a = ts::device_put<ts::spec<>>(m, h);
  static_assert(decltype(a)::rank == 0);
  CHECK(a.extents() == ts::shape<0>{});
  CHECK(a.size() == 1);
  CHECK(a.item() == 2.5f);
  CHECK(ts::to_host(a) == h);
  CHECK(ts::to_string(a.extents()) == "()");
  CHECK(decltype(a)::sharding_string() ==
        "NamedSharding(mesh=Mesh('x': 2, 'y': 2), spec=PartitionSpec())");
  CHECK(a.addressable_shards().size() == 4);
  // A host tensor's item() needs exactly one element.
  CHECK(ts::host_tensor<float, 1>({1}, {3.0f}).item() == 3.0f);
  const ts::host_tensor<float, 1> two({2}, {3.0f, 4.0f});
  CHECK_THROWS_WITH(two.item(),
                    Catch::Contains("item() needs a one-element array, got shape (2,)"));
}

TEST_CASE("rank 0: a shard_map block reduced over every dimension", "[shard_map][rank0]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  for (const std::size_t r : {2u, 4u, 8u}) {
    INFO("rows " << r);
    check_block_reductions<ts::spec<"x", "y">>(m, r, 2 * r, rng);
    check_block_reductions<ts::spec<"y", ts::none>>(m, r, 3, rng);
  }
}

TEST_CASE("rank 0: value_and_grad of a rank-0 loss", "[grad][rank0]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  // A mean-squared error: mean<> over every dimension of a sharded residual (unreduced over
  // the sharding axes), resharded to a replicated scalar.
  const auto mse = [](auto w, auto x) {
    const auto p = ts::matmul(x, w);  // unreduced over y when the contraction is over y
    const auto e = ts::reshard<typename decltype(p)::spec>(p) - 0.5;
    return ts::reshard<ts::spec<>>(ts::mean<>(e * e));
  };
  // The loss centred by its own max and scaled by a rank-0 sum: rank-0 values inside the
  // traced computation, broadcast against rank-2 ones.
  const auto centred = [](auto w, auto x) {
    const auto p = ts::matmul(x, w);
    const auto y = ts::reshard<typename decltype(p)::spec>(p);
    const auto mx = ts::max<>(y);
    const auto s = ts::reshard<ts::spec<>>(ts::sum<>(ts::sin(y)));
    return ts::reshard<ts::spec<>>(ts::sum<>(ts::exp(y - mx))) * s;
  };
  for (unsigned seed : {1u, 2u}) {
    const auto w = random_tensor(ts::shape<2>{6, 4}, seed);
    const auto x = random_tensor(ts::shape<2>{8, 6}, seed + 10);
    check_gradients<ts::spec<ts::none, "y">, ts::spec<"x", ts::none>>("mse, data over x", mse, m,
                                                                      w, x);
    check_gradients<ts::spec<"y", ts::none>, ts::spec<"x", "y">>("mse, contraction over y", mse, m,
                                                             w, x);
    check_gradients<ts::spec<ts::none, "y">, ts::spec<"x", ts::none>>("centred", centred, m, w, x);
  }
  // The loss is rank 0: its value is one element, item() reads it.
  const auto [l, g] = ts::value_and_grad(mse)(
      ts::device_put<ts::spec<>>(m, random_tensor(ts::shape<2>{6, 4}, 3)),
      ts::device_put<ts::spec<"x", ts::none>>(m, random_tensor(ts::shape<2>{8, 6}, 4)));
  static_assert(std::remove_cvref_t<decltype(l)>::rank == 0);
  static_assert(std::remove_cvref_t<decltype(g)>::rank == 2);
  CHECK(std::isfinite(l.item()));
  std::ostringstream os;
  os << l.item();
  CHECK(!os.str().empty());
}
