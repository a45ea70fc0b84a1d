// ts::random: the Threefry-2x32 cipher against Random123's known answers; keys, split and
// fold_in; every valid spec of ranks 1 to 3 on a 1-device, a 2x2 and a 2x4 mesh (enumerated
// as values at run time, on random device orders and uneven extents) gives, block for block,
// the array drawn on one device; the moments of each distribution are within bounds for the
// sample size; bad parameters throw.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include <typeshard/ops/dropout.hpp>
#include <typeshard/ops/random.hpp>
#include <typeshard/typeshard.hpp>

#include "support/foundation.hpp"

namespace {

namespace ts = typeshard;
namespace tr = typeshard::random;

using mesh_1 = ts::mesh<ts::axis("x", 1)>;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;

const tr::detail::distribution distributions[] = {
    {tr::detail::distribution_kind::uniform, -3.0, 5.0},
    {tr::detail::distribution_kind::normal, 0, 0},
    {tr::detail::distribution_kind::truncated_normal, -2.0, 1.0},
    {tr::detail::distribution_kind::bernoulli, 0.3, 0},
};

// The whole array drawn on one device, through the public functions.
template <class T, std::size_t Rank>
ts::host_tensor<T, Rank> on_one_device(ts::backend& b, tr::prng_key k,
                                       const tr::detail::distribution& d,
                                       const ts::shape<Rank>& global) {
  const ts::device_mesh<mesh_1> one{b, {5}};
  using S = ts::spec<>;
  switch (d.kind) {
    case tr::detail::distribution_kind::uniform:
      return ts::to_host(tr::uniform<S, T>(k, one, global, T(d.a), T(d.b)));
    case tr::detail::distribution_kind::normal:
      return ts::to_host(tr::normal<S, T>(k, one, global));
    case tr::detail::distribution_kind::truncated_normal:
      return ts::to_host(tr::truncated_normal<S, T>(k, d.a, d.b, one, global));
    case tr::detail::distribution_kind::bernoulli:
      return ts::to_host(tr::bernoulli<S, T>(k, d.a, one, global));
  }
  return {};
}

// Every valid spec of rank Rank on Mesh, as values: draws the blocks with random_blocks on a
// random device order and compares each, element for element, with the one-device array at
// the block's index. Returns the number of specs checked.
template <class Mesh, std::size_t Rank, class T>
std::size_t check_every_spec(ts::cpu_devices& devices, std::mt19937_64& rng) {
  using all = ts_test::all_specs<Mesh, Rank>;
  std::vector<ts::device_id> order(8);
  std::iota(order.begin(), order.end(), 0);
  for (std::size_t s = 0; s < all::count; ++s) {
    std::shuffle(order.begin(), order.end(), rng);
    const ts::device_mesh<Mesh> m{devices, std::vector<ts::device_id>(order.begin(),
                                                                      order.begin() + Mesh::size)};
    ts::shape<Rank> global{};
    for (std::size_t d = 0; d < Rank; ++d)
      global[d] = std::uniform_int_distribution<std::size_t>(0, 4)(rng) == 0
                      ? std::uniform_int_distribution<std::size_t>(0, 3)(rng)
                      : std::uniform_int_distribution<std::size_t>(1, 13)(rng);
    const tr::prng_key k = tr::key(rng());
    const tr::detail::distribution& dist = distributions[s % 4];
    const ts::detail::spec_array<Rank> spec = all::list[s];
    INFO(Mesh::to_string() << " spec " << ts::detail::spec_string(spec) << " extents "
                           << ts::to_string(global) << " kind " << int(dist.kind) << " "
                           << k.to_string());
    const ts::detail::placement<Rank> at{devices, std::span<const ts::device_id>(m.devices()),
                                         ts::detail::mesh_value_of<Mesh>(), spec};
    const auto blocks = tr::detail::random_blocks<T, Rank>(at, global, k, dist);
    const ts::host_tensor<T, Rank> whole = on_one_device<T, Rank>(devices, k, dist, global);
    REQUIRE(blocks.size() == Mesh::size);
    for (std::size_t p = 0; p < Mesh::size; ++p) {
      const ts::index_slices<Rank> ix = ts::detail::index_of(at.mesh, spec, global, p);
      std::size_t count = 1;
      for (std::size_t d = 0; d < Rank; ++d) count *= ix[d].size();
      REQUIRE(blocks[p].size() == count);
      std::array<std::size_t, Rank> local{};
      for (std::size_t e = 0; e < count; ++e) {
        std::size_t rest = e, g = 0;
        for (std::size_t d = Rank; d-- > 0;) {
          local[d] = rest % ix[d].size();
          rest /= ix[d].size();
        }
        for (std::size_t d = 0; d < Rank; ++d) g = g * global[d] + ix[d].start + local[d];
        if (!(blocks[p].data()[e] == whole.values()[g])) {
          INFO("position " << p << " element " << e);
          REQUIRE(blocks[p].data()[e] == whole.values()[g]);
        }
      }
    }
  }
  return all::count;
}

struct moments {
  double mean = 0, var = 0, fourth = 0, min = 0, max = 0;
};

template <class T>
moments moments_of(std::span<const T> v) {
  moments m;
  m.min = m.max = double(v[0]);
  for (T x : v) {
    m.mean += double(x);
    m.min = std::min(m.min, double(x));
    m.max = std::max(m.max, double(x));
  }
  m.mean /= double(v.size());
  for (T x : v) {
    const double c = double(x) - m.mean;
    m.var += c * c;
    m.fourth += c * c * c * c;
  }
  m.var /= double(v.size());
  m.fourth /= double(v.size());
  return m;
}

double phi(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI); }
double cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

}  // namespace

TEST_CASE("threefry2x32 gives Random123's known answers", "[random]") {
  // Random123's kat_vectors: rounds, counter, key, result.
  using w = std::array<std::uint32_t, 2>;
  constexpr w zero{0, 0}, ones{0xffffffffu, 0xffffffffu};
  constexpr w pi_ctr{0x243f6a88u, 0x85a308d3u}, pi_key{0x13198a2eu, 0x03707344u};
  STATIC_REQUIRE(tr::detail::threefry2x32<20>(zero, zero) == w{0x6b200159u, 0x99ba4efeu});
  STATIC_REQUIRE(tr::detail::threefry2x32<20>(ones, ones) == w{0x1cb996fcu, 0xbb002be7u});
  STATIC_REQUIRE(tr::detail::threefry2x32<20>(pi_key, pi_ctr) == w{0xc4923a9cu, 0x483df7a0u});
  STATIC_REQUIRE(tr::detail::threefry2x32<13>(zero, zero) == w{0x9d1c5ec6u, 0x8bd50731u});
  STATIC_REQUIRE(tr::detail::threefry2x32<13>(ones, ones) == w{0xfd36d048u, 0x2d17272cu});
  STATIC_REQUIRE(tr::detail::threefry2x32<13>(pi_key, pi_ctr) == w{0xba3e4725u, 0xf27d669eu});
  STATIC_REQUIRE(tr::detail::threefry2x32<32>(zero, zero) == w{0xcee3d47eu, 0xa23dfd5cu});
  STATIC_REQUIRE(tr::detail::threefry2x32<32>(ones, ones) == w{0x6e2fe0d0u, 0xb1b76f82u});
  STATIC_REQUIRE(tr::detail::threefry2x32<32>(pi_key, pi_ctr) == w{0xe2827716u, 0xc3c05cdfu});
}

TEST_CASE("keys: key, split and fold_in as jax.random's", "[random]") {
  STATIC_REQUIRE(tr::key(0).data == std::array<std::uint32_t, 2>{0, 0});
  STATIC_REQUIRE(tr::key(0x123456789abcdef0ull).data ==
                 std::array<std::uint32_t, 2>{0x12345678u, 0x9abcdef0u});
  constexpr tr::prng_key k = tr::key(42);
  constexpr auto two = tr::split(k);
  STATIC_REQUIRE(two[0] != two[1]);
  STATIC_REQUIRE(two[0] != k);
  // split(k, n)[j] is the cipher of counter (0, j) under k, as JAX's partitionable split;
  // the first keys of a longer split are those of a shorter one.
  const auto five = tr::split(k, 5);
  const auto three = tr::split<3>(k);
  REQUIRE(five.size() == 5);
  for (std::size_t j = 0; j < 3; ++j) REQUIRE(three[j] == five[j]);
  REQUIRE(five[0] == two[0]);
  REQUIRE(five[1].data == tr::detail::threefry2x32(k.data, {0u, 1u}));
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < i; ++j) REQUIRE(five[i] != five[j]);
  STATIC_REQUIRE(tr::fold_in(k, 7) != tr::fold_in(k, 8));
  STATIC_REQUIRE(tr::fold_in(k, 7) != tr::fold_in(tr::key(43), 7));
  REQUIRE(tr::fold_in(k, 7).data == tr::detail::threefry2x32(k.data, {0u, 7u}));
  REQUIRE(tr::key(42).to_string() == "key(0x00000000, 0x0000002a)");
}

TEST_CASE("random elements are functions of the key and the global index", "[random]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m{devices};
  const tr::prng_key k = tr::key(2026);
  const ts::shape<2> extents{7, 5};
  // uniform float: the top 23 bits of the two words' xor, scaled to [lo, hi).
  const auto u = ts::to_host(tr::uniform<ts::spec<"y", "x">>(k, m, extents, -2.0f, 6.0f));
  const auto ud = ts::to_host(tr::uniform<ts::spec<"x">, double>(k, m, extents));
  for (std::size_t i = 0; i < u.size(); ++i) {
    const auto w = tr::detail::threefry2x32(k.data, {0u, std::uint32_t(i)});
    const float unit = float((w[0] ^ w[1]) >> 9) * 0x1p-23f;
    REQUIRE(u.values()[i] == std::max(-2.0f, unit * 8.0f - 2.0f));
    const std::uint64_t bits = (std::uint64_t{w[0]} << 32) | w[1];
    REQUIRE(ud.values()[i] == double(bits >> 12) * 0x1p-52);
  }
  // The same key and extents on another mesh, spec and static extents: the same array.
  const ts::device_mesh<mesh_2x2> m4{devices, {7, 3, 1, 0}};
  using E = ts::extents<7, ts::dyn>;
  const auto n8 = tr::normal<ts::spec<ts::axes("y", "x"), ts::none>>(k, m, extents);
  const auto n4 = tr::normal<ts::spec<ts::none, "y">, float, E>(k, m4, extents);
  STATIC_REQUIRE(std::is_same_v<decltype(n4)::extents_type, E>);
  REQUIRE(ts::to_host(n8) == ts::to_host(n4));
  const auto b8 = tr::bernoulli<ts::spec<"x", "y">, int>(k, 0.5, m, extents);
  const auto b4 = tr::bernoulli<ts::spec<"y">, int>(k, 0.5, m4, extents);
  REQUIRE(ts::to_host(b8) == ts::to_host(b4));
  // Different keys, different arrays.
  REQUIRE(!(ts::to_host(tr::normal<ts::spec<>>(tr::key(1), m, extents)) == ts::to_host(n8)));
}

TEST_CASE("every spec of ranks 1-3 on 1, 2x2 and 2x4 devices draws the one-device array",
          "[random][property]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{8};
  std::size_t specs = 0;
  specs += check_every_spec<mesh_1, 1, float>(devices, rng);
  specs += check_every_spec<mesh_1, 2, double>(devices, rng);
  specs += check_every_spec<mesh_1, 3, float>(devices, rng);
  specs += check_every_spec<mesh_2x2, 1, double>(devices, rng);
  specs += check_every_spec<mesh_2x2, 2, float>(devices, rng);
  specs += check_every_spec<mesh_2x2, 3, double>(devices, rng);
  specs += check_every_spec<mesh_2x4, 1, float>(devices, rng);
  specs += check_every_spec<mesh_2x4, 2, double>(devices, rng);
  specs += check_every_spec<mesh_2x4, 3, float>(devices, rng);
  REQUIRE(specs == 2 + 3 + 4 + 2 * (5 + 11 + 19));
}

TEST_CASE("random arrays' moments are within bounds for the sample size", "[random][stats]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m{devices};
  const ts::shape<2> extents{512, 513};  // uneven over both axes
  const double n = 512.0 * 513.0;
  const double z = 6.0;  // standard errors allowed: fixed keys, so this cannot flake
  const auto [k1, k2, k3, k4] = tr::split<4>(tr::key(7));

  SECTION("uniform") {
    const auto uh = ts::to_host(tr::uniform<ts::spec<"x", "y">>(k1, m, extents));
    const std::span<const float> u = uh.values();
    const moments s = moments_of(u);
    REQUIRE(s.min >= 0.0);
    REQUIRE(s.max < 1.0);
    REQUIRE(std::abs(s.mean - 0.5) < z * std::sqrt(1.0 / 12.0 / n));
    REQUIRE(std::abs(s.var - 1.0 / 12.0) < z * std::sqrt((1.0 / 80.0 - 1.0 / 144.0) / n));
    // Neighbours are uncorrelated.
    double lag = 0;
    for (std::size_t i = 1; i < u.size(); ++i) lag += (u[i] - 0.5) * (u[i - 1] - 0.5);
    REQUIRE(std::abs(lag / n / (1.0 / 12.0)) < z / std::sqrt(n));
    const auto r = ts::to_host(tr::uniform<ts::spec<"y">, double>(k2, m, extents, -3.0, 5.0));
    const moments sr = moments_of(r.values());
    REQUIRE(sr.min >= -3.0);
    REQUIRE(sr.max < 5.0);
    REQUIRE(std::abs(sr.mean - 1.0) < z * std::sqrt(64.0 / 12.0 / n));
  }
  SECTION("normal, float and double") {
    const auto ah = ts::to_host(tr::normal<ts::spec<ts::none, "y">>(k1, m, extents));
    const auto bh = ts::to_host(tr::normal<ts::spec<"x">, double>(k2, m, extents));
    const std::span<const float> a = ah.values();
    const std::span<const double> b = bh.values();
    for (const moments s : {moments_of(a), moments_of(b)}) {
      REQUIRE(std::abs(s.mean) < z / std::sqrt(n));
      REQUIRE(std::abs(s.var - 1.0) < z * std::sqrt(2.0 / n));
      REQUIRE(std::abs(s.fourth - 3.0) < z * std::sqrt(96.0 / n));
      REQUIRE(s.max > 4.0);  // P(max of 262656 draws < 4) = (1 - 3.2e-5)^n < 1e-3
      REQUIRE(s.min < -4.0);
    }
    // The distribution function at a few points, and independence of split keys.
    for (double x : {-2.0, -1.0, 0.0, 0.5, 1.5}) {
      const double below =
          double(std::count_if(a.begin(), a.end(), [x](float v) { return v < x; }));
      const double p = cdf(x);
      REQUIRE(std::abs(below / n - p) < z * std::sqrt(p * (1 - p) / n));
    }
    double cov = 0;
    for (std::size_t i = 0; i < a.size(); ++i) cov += double(a[i]) * b[i];
    REQUIRE(std::abs(cov / n) < z / std::sqrt(n));
  }
  SECTION("truncated normal") {
    const double lo = -2.0, hi = 1.0;
    const auto t = ts::to_host(tr::truncated_normal<ts::spec<"y", "x">>(k3, lo, hi, m, extents));
    const moments s = moments_of(t.values());
    REQUIRE(s.min > lo);
    REQUIRE(s.max < hi);
    const double mass = cdf(hi) - cdf(lo);
    const double mean = (phi(lo) - phi(hi)) / mass;
    const double var = 1.0 + (lo * phi(lo) - hi * phi(hi)) / mass - mean * mean;
    REQUIRE(std::abs(s.mean - mean) < z * std::sqrt(var / n));
    REQUIRE(std::abs(s.var - var) < z * std::sqrt(2.0 / n));
    // A narrow far window stays inside it.
    const auto far =
        ts::to_host(tr::truncated_normal<ts::spec<>, double>(k4, 3.0, 3.5, m, ts::shape<2>{64, 9}));
    const moments sf = moments_of(far.values());
    REQUIRE(sf.min > 3.0);
    REQUIRE(sf.max < 3.5);
  }
  SECTION("bernoulli") {
    for (const double p : {0.0, 0.1, 0.5, 0.9, 1.0}) {
      const auto b = ts::to_host(tr::bernoulli<ts::spec<"x", "y">>(k4, p, m, extents));
      double ones = 0;
      for (float v : b.values()) {
        REQUIRE((v == 0.0f || v == 1.0f));
        ones += v;
      }
      REQUIRE(std::abs(ones / n - p) <= z * std::sqrt(p * (1 - p) / n));
    }
  }
}

TEST_CASE("random arrays refuse bad parameters", "[random]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const tr::prng_key k = tr::key(0);
  const ts::shape<1> s{4};
  REQUIRE_THROWS_AS(tr::uniform<ts::spec<"x">>(k, m, s, 1.0f, 0.0f), ts::usage_error);
  REQUIRE_THROWS_AS(tr::truncated_normal<ts::spec<"x">>(k, 1.0, 1.0, m, s), ts::usage_error);
  REQUIRE_THROWS_AS(tr::bernoulli<ts::spec<"x">>(k, 1.5, m, s), ts::usage_error);
  REQUIRE_THROWS_AS(tr::bernoulli<ts::spec<"x">>(k, -0.1, m, s), ts::usage_error);
  using E = ts::extents<5>;
  REQUIRE_THROWS_AS((tr::normal<ts::spec<"x">, float, E>(k, m, s)), ts::shape_error);
}

TEST_CASE("dropout: the gradient uses the forward's mask, the same on any mesh", "[random]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m{devices};
  const ts::device_mesh<mesh_1> one{devices, {2}};
  const auto keys = tr::split<3>(tr::key(11));  // (not a structured binding: lambdas capture kd)
  const tr::prng_key kw = keys[0], kc = keys[1], kd = keys[2];
  const ts::shape<2> extents{6, 5};  // uneven over both axes
  const double rate = 0.25;
  const auto w = tr::normal<ts::spec<"x", "y">, double>(kw, m, extents);
  const auto c = tr::uniform<ts::spec<"x", "y">, double>(kc, m, extents);
  const auto mask = ts::to_host(tr::bernoulli<ts::spec<>, double>(kd, 1.0 - rate, one, extents));
  const auto wh = ts::to_host(w), ch = ts::to_host(c);

  const auto dropped = ts::to_host(tr::dropout(kd, rate, w));
  const auto [loss, g] = ts::value_and_grad([&](auto v) {
    return ts::sum(tr::dropout(kd, rate, v) * c);
  })(w);
  const auto gh = ts::to_host(ts::reshard<ts::spec<"x", "y">>(g));
  double expected_loss = 0;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < wh.size(); ++i) {
    const double m_i = mask.values()[i];
    kept += m_i == 1.0;
    REQUIRE(dropped.values()[i] == wh.values()[i] * (m_i * (1.0 / (1.0 - rate))));
    REQUIRE(gh.values()[i] == Approx(m_i / (1.0 - rate) * ch.values()[i]));
    expected_loss += dropped.values()[i] * ch.values()[i];
  }
  REQUIRE(kept > 0);
  REQUIRE(kept < wh.size());
  REQUIRE(ts::to_host(ts::reshard<ts::spec<>>(loss)).values()[0] == Approx(expected_loss));
  // rate 1 gives zeros, rate 0 the input; rates outside [0, 1] throw.
  const auto zeros = ts::to_host(tr::dropout(kd, 1.0, w));
  for (double v : zeros.values()) REQUIRE(v == 0.0);
  REQUIRE(ts::to_host(tr::dropout(kd, 0.0, w)) == wh);
  REQUIRE_THROWS_AS(tr::dropout(kd, 1.5, w), ts::usage_error);
}
