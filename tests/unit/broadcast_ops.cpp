// Broadcasting in binary elementwise operations and scalars on either side of + - * /,
// against a serial loop over the same host data. For every valid spec of ranks 1 and 2 on the
// (2,2) and (2,4) meshes, and every third of rank 3 (the lhs), the rhs is derived deterministically from its number: the
// same rank or one less (a missing leading dimension), each of its dimensions keeping the
// lhs's entry or unsharded (ts::none), and each unsharded one either of the lhs's extent or
// 1 (it stretches). Both orders (lhs op rhs, rhs op lhs) on an even shape, an uneven one and a
// random one (0 and fewer elements than shards included): a + b (the linear path) and
// ts::maximum(b, a) (the general one, the broadcast operand first; the other operators share
// these two paths and are checked once below, to keep the compile short). No communication
// happens: each
// device reads its slice of the operand that holds a dimension whole. Plus: scalars, the
// equal-spec fast path, run-time shape errors (extents that do not broadcast, a sharded
// dimension of extent 1 that would stretch), and unreduced operands (rule 3).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include <typeshard/typeshard.hpp>

#include "support/foundation.hpp"

namespace {

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;

// ---- the serial reference ------------------------------------------------------------------

// f over the broadcast of a (shape sa) and b (shape sb), both row-major, trailing aligned.
template <class F>
std::vector<double> reference(const std::vector<double>& a, const std::vector<std::size_t>& sa,
                              const std::vector<double>& b, const std::vector<std::size_t>& sb,
                              F f) {
  const std::size_t rank = std::max(sa.size(), sb.size());
  std::vector<std::size_t> s(rank), pa(rank, 1), pb(rank, 1);
  for (std::size_t i = 0; i < rank; ++i) {
    if (i >= rank - sa.size()) pa[i] = sa[i - (rank - sa.size())];
    if (i >= rank - sb.size()) pb[i] = sb[i - (rank - sb.size())];
    s[i] = pa[i] == 1 ? pb[i] : pa[i];
  }
  std::size_t n = 1;
  for (std::size_t e : s) n *= e;
  std::vector<double> out(n);
  std::vector<std::size_t> idx(rank, 0);
  for (std::size_t k = 0; k < n; ++k) {
    std::size_t oa = 0, ob = 0;
    for (std::size_t i = 0; i < rank; ++i) {
      oa = oa * pa[i] + (pa[i] == 1 ? 0 : idx[i]);
      ob = ob * pb[i] + (pb[i] == 1 ? 0 : idx[i]);
    }
    out[k] = f(a[oa], b[ob]);
    for (std::size_t i = rank; i-- > 0;) {
      if (++idx[i] < s[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

void compare(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))) {
      CAPTURE(i, got[i], want[i]);
      FAIL("broadcast result differs from the serial loop");
    }
}

template <class T, std::size_t Rank>
std::vector<double> values_of(const ts::host_tensor<T, Rank>& t) {
  return std::vector<double>(t.values().begin(), t.values().end());
}
template <std::size_t Rank>
std::vector<std::size_t> dims_of(const ts::shape<Rank>& s) {
  return std::vector<std::size_t>(s.begin(), s.end());
}

template <std::size_t Rank>
ts::host_tensor<double, Rank> small_ints(std::mt19937_64& rng, const ts::shape<Rank>& s,
                                         bool nonzero = false) {
  ts::host_tensor<double, Rank> t(s);
  std::uniform_int_distribution<int> v(-8, 8);
  for (double& e : t.values()) {
    e = v(rng);
    if (nonzero && e == 0) e = 3;
  }
  return t;
}

// ---- the rhs derived from the lhs spec number I ----------------------------------------------

// Rank: the lhs's, or one less (every second I, not for rank 1). Entry d of the rhs keeps the
// lhs's entry (bit d of I / 2 set) or is none.
template <std::size_t LhsRank, std::size_t I>
inline constexpr std::size_t rhs_rank = (LhsRank > 1 && I % 2 == 1) ? LhsRank - 1 : LhsRank;

template <class LhsSpec, std::size_t LhsRank, std::size_t I>
struct rhs_spec_of {
  static constexpr std::size_t rank = rhs_rank<LhsRank, I>;
  static constexpr std::size_t lead = LhsRank - rank;
  static constexpr ts::dim_spec entry(std::size_t d) {
    return ((I / 2) >> d) % 2 == 1 ? LhsSpec::dim(d + lead) : ts::dim_spec{};
  }
  template <std::size_t... D>
  static ts::spec<entry(D)...> make(std::index_sequence<D...>);
  using type = decltype(make(std::make_index_sequence<rank>{}));
};

template <class Mesh, class Spec, std::size_t Rank, std::size_t I>
void check_pair(const ts::device_mesh<Mesh>& m, std::mt19937_64& rng) {
  using layout = ts::layout<Mesh, Spec, Rank>;
  using rhs_spec = typename rhs_spec_of<Spec, Rank, I>::type;
  constexpr std::size_t RB = rhs_rank<Rank, I>;
  constexpr std::size_t lead = Rank - RB;
  std::vector<ts::shape<Rank>> shapes(3);
  for (std::size_t d = 0; d < Rank; ++d) {
    const std::size_t k = layout::shards_along(d);
    shapes[0][d] = k * (1 + d % 2);
    shapes[1][d] = k > 1 ? 2 * k - 1 : 3;
  }
  shapes[2] = ts_test::random_shape<layout>(rng, 200);
  for (std::size_t v = 0; v < shapes.size(); ++v) {
    const ts::shape<Rank>& sa = shapes[v];
    ts::shape<RB> sb{};
    for (std::size_t d = 0; d < RB; ++d) {
      // An unsharded rhs dimension stretches (extent 1) in some cases.
      const bool stretch = rhs_spec::dim(d).is_none() && (I + d + v) % 3 == 0;
      sb[d] = stretch ? 1 : sa[d + lead];
    }
    INFO("mesh " << Mesh::to_string() << " lhs " << Spec::to_string() << " " << ts::to_string(sa)
                 << " rhs " << rhs_spec::to_string() << " " << ts::to_string(sb));
    const auto ha = small_ints(rng, sa);
    const auto hb = small_ints(rng, sb, true);
    const auto a = ts::device_put<Spec>(m, ha);
    const auto b = ts::device_put<rhs_spec>(m, hb);
    const auto sum = a + b;
    static_assert(std::is_same_v<typename decltype(sum)::spec, typename layout::spec_type>);
    CHECK(sum.extents() == sa);
    compare(values_of(ts::to_host(sum)),
            reference(values_of(ha), dims_of(sa), values_of(hb), dims_of(sb),
                      [](double x, double y) { return x + y; }));
    compare(values_of(ts::to_host(ts::maximum(b, a))),
            reference(values_of(hb), dims_of(sb), values_of(ha), dims_of(sa),
                      [](double x, double y) { return std::max(x, y); }));
  }
}

// Every lhs spec (Stride 1), or every Stride-th (to keep the compile within budget).
template <class Mesh, std::size_t Rank, std::size_t Stride = 1>
void check_mesh_rank(ts::cpu_devices& devices, std::mt19937_64& rng) {
  const ts::device_mesh<Mesh> m{devices};
  ts_test::for_each_spec_sampled<Mesh, Rank, Stride>([&]<class Spec, std::size_t I>() {
    check_pair<Mesh, Spec, Rank, (I + Mesh::size) % (std::size_t{1} << (Rank + 1))>(m, rng);
  });
}

}  // namespace

TEST_CASE("broadcasting agrees with a serial loop, every lhs spec of ranks 1 to 3",
          "[elementwise][broadcast][property]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{8};
  check_mesh_rank<mesh_2x2, 1>(devices, rng);
  check_mesh_rank<mesh_2x2, 2>(devices, rng);
  check_mesh_rank<mesh_2x2, 3, 3>(devices, rng);  // 6 of its 19 lhs specs
  check_mesh_rank<mesh_2x4, 1>(devices, rng);
  check_mesh_rank<mesh_2x4, 2>(devices, rng);
  check_mesh_rank<mesh_2x4, 3, 3>(devices, rng);
}

TEST_CASE("scalars on either side of + - * /, and broadcasting's errors", "[elementwise][broadcast]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m{devices};
  const auto hx = small_ints(rng, ts::shape<2>{3, 5}, true);
  const auto x = ts::device_put<ts::spec<"x", "y">>(m, hx);
  const std::vector<double> xs = values_of(hx);
  auto each = [&](auto f) {
    std::vector<double> out;
    for (double v : xs) out.push_back(f(v));
    return out;
  };

  SECTION("scalars") {
    compare(values_of(ts::to_host(x + 1)), each([](double v) { return v + 1; }));
    compare(values_of(ts::to_host(1 + x)), each([](double v) { return 1 + v; }));
    compare(values_of(ts::to_host(x - 2)), each([](double v) { return v - 2; }));
    compare(values_of(ts::to_host(1 - x)), each([](double v) { return 1 - v; }));
    compare(values_of(ts::to_host(2 * x)), each([](double v) { return 2 * v; }));
    compare(values_of(ts::to_host(x / 4)), each([](double v) { return v / 4; }));
    compare(values_of(ts::to_host(2 / x)), each([](double v) { return 2 / v; }));
    static_assert(std::is_same_v<decltype(1 - x), std::remove_cvref_t<decltype(x)>>);
  }
  SECTION("a bias add: [B, D] sharded over x, [D] replicated; every operator") {
    const auto hb = small_ints(rng, ts::shape<1>{5}, true);
    const auto bias = ts::device_put<ts::spec<ts::none>>(m, hb);
    const auto y = x + bias;
    static_assert(std::is_same_v<decltype(y)::spec, ts::spec<"x", "y">>);
    const std::vector<double> bs = values_of(hb);
    compare(values_of(ts::to_host(y)),
            reference(xs, {3, 5}, bs, {5}, [](double a, double b) { return a + b; }));
    compare(values_of(ts::to_host(bias - x)),
            reference(bs, {5}, xs, {3, 5}, [](double a, double b) { return a - b; }));
    compare(values_of(ts::to_host(x * bias)),
            reference(xs, {3, 5}, bs, {5}, [](double a, double b) { return a * b; }));
    compare(values_of(ts::to_host(x / bias)),
            reference(xs, {3, 5}, bs, {5}, [](double a, double b) { return a / b; }));
    compare(values_of(ts::to_host(ts::minimum(bias, x))),
            reference(bs, {5}, xs, {3, 5}, [](double a, double b) { return std::min(a, b); }));
  }
  SECTION("extents that do not broadcast: shape_error naming both shapes") {
    const auto z = ts::device_put<ts::spec<"x", ts::none>>(m, small_ints(rng, ts::shape<2>{3, 4}));
    CHECK_THROWS_AS(x + z, ts::shape_error);
    CHECK_THROWS_WITH(x * z, Catch::Contains("(3, 5) and (3, 4)") && Catch::Contains("broadcast") &&
                                 Catch::Contains("(dimension 1 of the result: 5 and 4)"));
  }
  SECTION("a sharded dimension of extent 1 would stretch: shape_error with the fix") {
    const auto one = ts::device_put<ts::spec<"x", ts::none>>(m, small_ints(rng, ts::shape<2>{1, 5}));
    CHECK_THROWS_WITH(x + one, Catch::Contains("dimension 0 of the result stretches an operand's "
                                               "extent 1 to 3, but that operand shards it") &&
                                   Catch::Contains("reshard that operand to ts::none"));
  }
  SECTION("unreduced operands: + and - broadcast when both are unreduced alike (rule 3)") {
    const auto rows = ts::sum<1>(x);  // [B] over "x", unreduced over "y"
    const auto col = ts::sum<1>(ts::device_put<ts::spec<"x", "y">>(m, hx), ts::keep_dims);
    const auto twice = rows + rows;
    static_assert(std::is_same_v<decltype(twice)::unreduced_type, ts::unreduced<"y">>);
    const auto r = ts::to_host(ts::reshard<ts::spec<"x">>(twice));
    const auto k = ts::to_host(ts::reshard<ts::spec<"x", ts::none>>(col - col));
    for (std::size_t i = 0; i < 3; ++i) {
      double s = 0;
      for (std::size_t j = 0; j < 5; ++j) s += hx(i, j);
      CHECK(r(i) == 2 * s);
      CHECK(k(i, 0) == 0);
    }
  }
}
