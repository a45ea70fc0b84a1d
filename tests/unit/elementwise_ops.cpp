// Elementwise operations against a plain serial loop over the same host data: every op, on
// several meshes and specs (even, uneven, replicated, multi-axis), random shapes (0 and
// smaller than the shard count included), random device orders, with NaN, infinities and
// signed zeros mixed into the data. Plus: operands on different devices (device_mesh_error
// naming both), shapes that differ (shape_error), NaN and infinity passing through, and the
// linear operations on unreduced values keeping the unreduced type (rule 3).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <typeshard/typeshard.hpp>

#include "support/foundation.hpp"

namespace {

namespace ts = typeshard;

// ---- comparison, shared by every instantiation --------------------------------------------

// got[i] and expected[i] agree: both NaN, or equal values (so -0 == +0: see the abs test for
// the sign of zero).
void compare(const char* op, const std::vector<double>& got, const std::vector<double>& expected,
             const std::vector<double>& x, const std::vector<double>& y) {
  INFO("op " << op);
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool same = (std::isnan(got[i]) && std::isnan(expected[i])) || got[i] == expected[i];
    if (!same) {
      const double y_i = i < y.size() ? y[i] : 0.0;
      CAPTURE(i, got[i], expected[i], x[i], y_i);
      FAIL("elementwise result differs from the serial loop");
    }
  }
}

template <class T, std::size_t Rank>
std::vector<double> as_doubles(const ts::host_tensor<T, Rank>& t) {
  return std::vector<double>(t.values().begin(), t.values().end());
}

// ---- random data ----------------------------------------------------------------------------

template <class T>
T random_value(std::mt19937_64& rng, bool nonzero) {
  if constexpr (std::is_floating_point_v<T>) {
    const int pick = std::uniform_int_distribution<int>(0, 99)(rng);
    constexpr T inf = std::numeric_limits<T>::infinity();
    if (pick == 0) return std::numeric_limits<T>::quiet_NaN();
    if (pick == 1) return inf;
    if (pick == 2) return -inf;
    if (pick == 3 && !nonzero) return T(0);
    if (pick == 4 && !nonzero) return -T(0);
    const T v = std::uniform_real_distribution<T>(T(-4), T(4))(rng);
    return nonzero && v == T(0) ? T(1) : v;
  } else {
    const T v = std::uniform_int_distribution<T>(-1000, 1000)(rng);
    return nonzero && v == 0 ? T(7) : v;
  }
}

template <class T, std::size_t Rank>
ts::host_tensor<T, Rank> random_tensor(const ts::shape<Rank>& e, std::mt19937_64& rng, bool nonzero = false) {
  ts::host_tensor<T, Rank> t(e);
  for (T& v : t.values()) v = random_value<T>(rng, nonzero);
  return t;
}

// The serial reference: op applied to every element of the host data, in a plain loop.
template <class R, class T, std::size_t Rank, class F>
std::vector<double> serial(const ts::host_tensor<T, Rank>& x, F f) {
  std::vector<double> out;
  for (const T& v : x.values()) out.push_back(static_cast<double>(static_cast<R>(f(v))));
  return out;
}
template <class R, class T, std::size_t Rank, class F>
std::vector<double> serial(const ts::host_tensor<T, Rank>& x, const ts::host_tensor<T, Rank>& y, F f) {
  std::vector<double> out;
  for (std::size_t i = 0; i < x.size(); ++i)
    out.push_back(static_cast<double>(static_cast<R>(f(x.values()[i], y.values()[i]))));
  return out;
}

// maximum / minimum as JAX defines them: NaN if either side is NaN.
template <class T>
T jax_maximum(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  return a < b ? b : a;
}
template <class T>
T jax_minimum(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  return b < a ? b : a;
}

// ---- every op on one mesh, spec, rank and element type ---------------------------------------

template <class Mesh, class Spec, std::size_t Rank, class T>
void check_ops(ts::cpu_devices& devices, std::mt19937_64& rng) {
  using L = ts::layout<Mesh, Spec, Rank>;
  INFO(Mesh::to_string() << ", " << L::spec_type::to_string() << ", " << (std::is_same_v<T, float> ? "float" : std::is_same_v<T, double> ? "double" : "int"));
  for (int trial = 0; trial < 4; ++trial) {
    const ts::shape<Rank> e = ts_test::random_shape<L>(rng, 600);
    std::vector<ts::device_id> order(devices.device_count());
    std::iota(order.begin(), order.end(), ts::device_id{0});
    std::shuffle(order.begin(), order.end(), rng);
    order.resize(Mesh::size);
    CAPTURE(e, order);
    const ts::device_mesh<Mesh> m{devices, order};

    const auto hx = random_tensor<T, Rank>(e, rng);
    const auto hy = random_tensor<T, Rank>(e, rng, /*nonzero=*/true);
    const auto x = ts::device_put<Spec>(m, hx);
    const auto y = ts::device_put<Spec>(m, hy);
    const std::vector<double> dx = as_doubles(hx), dy = as_doubles(hy);
    const T s = random_value<T>(rng, /*nonzero=*/true);
    CAPTURE(s);

#define TS_UNARY(name, expr, ref)                                              \
  {                                                                            \
    const auto r = (expr);                                                     \
    static_assert(std::is_same_v<typename decltype(r)::spec, typename decltype(x)::spec>); \
    using R = typename decltype(r)::value_type;                                \
    compare(name, as_doubles(ts::to_host(r)), serial<R>(hx, ref), dx, {});     \
  }
#define TS_BINARY(name, expr, ref)                                             \
  {                                                                            \
    const auto r = (expr);                                                     \
    static_assert(std::is_same_v<typename decltype(r)::spec, typename decltype(x)::spec>); \
    using R = typename decltype(r)::value_type;                                \
    compare(name, as_doubles(ts::to_host(r)), serial<R>(hx, hy, ref), dx, dy); \
  }
    // linear
    TS_BINARY("x + y", x + y, [](T a, T b) { return a + b; })
    TS_BINARY("x - y", x - y, [](T a, T b) { return a - b; })
    TS_UNARY("-x", -x, [](T a) { return -a; })
    TS_UNARY("x * s", x * s, [s](T a) { return a * s; })
    TS_UNARY("s * x", s * x, [s](T a) { return s * a; })
    TS_UNARY("x / s", x / s, [s](T a) { return a / s; })
    // non-linear
    TS_BINARY("x * y", x * y, [](T a, T b) { return a * b; })
    TS_BINARY("maximum", ts::maximum(x, y), jax_maximum<T>)
    TS_BINARY("minimum", ts::minimum(x, y), jax_minimum<T>)
    TS_BINARY("maximum (y, x)", ts::maximum(y, x), [](T a, T b) { return jax_maximum(b, a); })
    TS_BINARY("minimum (y, x)", ts::minimum(y, x), [](T a, T b) { return jax_minimum(b, a); })
    TS_UNARY("abs", ts::abs(x), [](T a) { return std::abs(a); })
    TS_UNARY("relu", ts::relu(x), [](T a) { return a < T(0) ? T(0) : a; })
    TS_UNARY("map", ts::map(x, [](T a) { return a * a + T(1); }), [](T a) { return a * a + T(1); })
    TS_UNARY("map to bool-ish int", ts::map(x, [](T a) { return a > T(0) ? 1 : 0; }),
             [](T a) { return a > T(0) ? 1 : 0; })
    TS_BINARY("zip", ts::zip(x, y, [](T a, T b) { return a - T(2) * b; }),
              [](T a, T b) { return a - T(2) * b; })
    if constexpr (std::is_floating_point_v<T>) {
      TS_BINARY("x / y", x / y, [](T a, T b) { return a / b; })
      TS_UNARY("sin", ts::sin(x), [](T a) { return std::sin(a); })
      TS_UNARY("cos", ts::cos(x), [](T a) { return std::cos(a); })
      TS_UNARY("exp", ts::exp(x), [](T a) { return std::exp(a); })
      TS_UNARY("log", ts::log(x), [](T a) { return std::log(a); })  // NaN below 0
      TS_UNARY("tanh", ts::tanh(x), [](T a) { return std::tanh(a); })
      TS_UNARY("sqrt", ts::sqrt(x), [](T a) { return std::sqrt(a); })
      TS_UNARY("composition", ts::relu(ts::sin(x) * T(2) - ts::exp(x / T(4))),
               [](T a) {
                 const T v = std::sin(a) * T(2) - std::exp(a / T(4));
                 return v < T(0) ? T(0) : v;
               })
    }
#undef TS_UNARY
#undef TS_BINARY
  }
}

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_3 = ts::mesh<ts::axis("x", 3)>;
using mesh_2x1x3 = ts::mesh<ts::axis("a", 2), ts::axis("b", 1), ts::axis("c", 3)>;

}  // namespace

TEST_CASE("every elementwise op agrees with a serial loop over the host data", "[elementwise][property]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{8};
  SECTION("P('x', 'y') on 2x2: tiles") {
    check_ops<mesh_2x2, ts::spec<"x", "y">, 2, float>(devices, rng);
    check_ops<mesh_2x2, ts::spec<"x", "y">, 2, double>(devices, rng);
    check_ops<mesh_2x2, ts::spec<"x", "y">, 2, int>(devices, rng);
  }
  SECTION("P(None, 'y') on 2x2: replicated over x") {
    check_ops<mesh_2x2, ts::spec<ts::none, "y">, 2, float>(devices, rng);
  }
  SECTION("P(('y', 'x'),) on 2x2: one dimension over both axes") {
    check_ops<mesh_2x2, ts::spec<ts::axes("y", "x")>, 1, double>(devices, rng);
  }
  SECTION("fully replicated on 2x2") {
    check_ops<mesh_2x2, ts::spec<>, 3, float>(devices, rng);
  }
  SECTION("P('x') on 3 devices: uneven") {
    check_ops<mesh_3, ts::spec<"x">, 2, float>(devices, rng);
    check_ops<mesh_3, ts::spec<"x">, 2, int>(devices, rng);
  }
  SECTION("P(None, 'c', ('a', 'b')) on 2x1x3") {
    check_ops<mesh_2x1x3, ts::spec<ts::none, "c", ts::axes("a", "b")>, 3, double>(devices, rng);
  }
}

TEST_CASE("operands of different element types: linear ops give the common type", "[elementwise]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const ts::host_tensor<float, 2> hf({2, 3}, {1.5f, -2, 3, 4, 5, 6});
  const ts::host_tensor<double, 2> hd({2, 3}, {0.25, 1, 2, 3, 4, 5});
  const auto f = ts::device_put<ts::spec<"x", "y">>(m, hf);
  const auto d = ts::device_put<ts::spec<"x", "y">>(m, hd);
  const auto sum = f + d;
  STATIC_REQUIRE(std::is_same_v<decltype(sum)::value_type, double>);
  const auto back = ts::to_host(sum);
  for (std::size_t i = 0; i < 6; ++i)
    REQUIRE(back.values()[i] == static_cast<double>(hf.values()[i]) + hd.values()[i]);
}

TEST_CASE("NaN and infinity pass through where the op preserves them", "[elementwise]") {
  constexpr float nan = std::numeric_limits<float>::quiet_NaN();
  constexpr float inf = std::numeric_limits<float>::infinity();
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  // 4 rows over x: each special value sits on a different device.
  const ts::host_tensor<float, 2> h({4, 2}, {nan, 1.0f, inf, -inf, -0.0f, 0.0f, 2.0f, -nan});
  const ts::host_tensor<float, 2> ones({4, 2}, 1.0f);
  const auto x = ts::device_put<ts::spec<"x", ts::none>>(m, h);
  const auto one = ts::device_put<ts::spec<"x", ts::none>>(m, ones);

  const auto relu = ts::to_host(ts::relu(x));
  CHECK(std::isnan(relu(0, 0)));  // relu(NaN) stays NaN
  CHECK(std::isnan(relu(3, 1)));
  CHECK(relu(1, 0) == inf);
  CHECK(relu(1, 1) == 0.0f);  // relu(-inf) = 0
  const auto abs = ts::to_host(ts::abs(x));
  CHECK(std::isnan(abs(0, 0)));
  CHECK(abs(1, 0) == inf);
  CHECK(abs(1, 1) == inf);
  CHECK(abs(2, 0) == 0.0f);
  CHECK_FALSE(std::signbit(abs(2, 0)));  // abs(-0) is +0, as std::abs and jnp.abs give
  const auto neg = ts::to_host(-x);
  CHECK(std::isnan(neg(0, 0)));
  CHECK(neg(1, 0) == -inf);
  CHECK(std::signbit(neg(2, 1)));  // -(+0) = -0
  const auto scaled = ts::to_host(x * 2.0f);
  CHECK(std::isnan(scaled(0, 0)));
  CHECK(scaled(1, 1) == -inf);
  const auto sum = ts::to_host(x + one);
  CHECK(std::isnan(sum(0, 0)));
  CHECK(sum(1, 0) == inf);
  const auto exp = ts::to_host(ts::exp(x));
  CHECK(std::isnan(exp(0, 0)));
  CHECK(exp(1, 0) == inf);
  CHECK(exp(1, 1) == 0.0f);
  const auto sqrt = ts::to_host(ts::sqrt(x));
  CHECK(sqrt(1, 0) == inf);
  CHECK(std::isnan(sqrt(1, 1)));  // sqrt(-inf) is NaN
  const auto tanh = ts::to_host(ts::tanh(x));
  CHECK(tanh(1, 0) == 1.0f);
  CHECK(tanh(1, 1) == -1.0f);
  const auto log = ts::to_host(ts::log(x));
  CHECK(log(2, 1) == -inf);  // log(0)
  CHECK(log(1, 0) == inf);
  // maximum / minimum: NaN on either side gives NaN (as jnp.maximum); inf wins otherwise.
  for (const auto& r : {ts::to_host(ts::maximum(x, one)), ts::to_host(ts::maximum(one, x)),
                        ts::to_host(ts::minimum(x, one)), ts::to_host(ts::minimum(one, x))}) {
    CHECK(std::isnan(r(0, 0)));
    CHECK(std::isnan(r(3, 1)));
  }
  CHECK(ts::to_host(ts::maximum(one, x))(1, 0) == inf);
  CHECK(ts::to_host(ts::minimum(one, x))(1, 1) == -inf);
  // inf - inf is NaN
  CHECK(std::isnan(ts::to_host(x - x)(1, 0)));
}

TEST_CASE("abs(-0.0) is +0.0 everywhere: global arrays, blocks, the functor", "[elementwise][abs]") {
  // One family of functions (kernels/functors.hpp) serves arrays and blocks; blocks used to
  // compute abs as x < 0 ? -x : x, which keeps -0.0.
  CHECK_FALSE(std::signbit(ts::fn::abs(-0.0)));
  CHECK_FALSE(std::signbit(ts::fn::abs(-0.0f)));
  CHECK(ts::fn::abs(-3) == 3);
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const ts::host_tensor<double, 2> h({4, 2}, {-0.0, 0.0, -0.0, -1.5, -0.0, 2.0, -0.0, -0.0});
  const auto x = ts::device_put<ts::spec<"x", ts::none>>(m, h);
  const auto on_array = ts::to_host(ts::abs(x));
  const auto on_blocks = ts::to_host(ts::shard_map<mesh_2x2, ts::spec<"x", ts::none>,
                                                   ts::spec<"x", ts::none>>(
      [](const auto& b) { return ts::abs(b); })(x));
  for (const auto& r : {on_array, on_blocks}) {
    for (std::size_t i = 0; i < r.values().size(); ++i) {
      INFO("element " << i);
      CHECK(r.values()[i] == std::abs(h.values()[i]));
      CHECK_FALSE(std::signbit(r.values()[i]));
    }
  }
}

TEST_CASE("operands on different devices are a device_mesh_error naming both", "[elementwise]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x2> low{devices};
  const ts::device_mesh<mesh_2x2> high{devices, {4, 5, 6, 7}};
  const ts::device_mesh<mesh_2x2> permuted{devices, {1, 0, 2, 3}};
  const auto h = ts::arange<float>(8);
  const auto a = ts::device_put<ts::spec<"x">>(low, h);
  const auto b = ts::device_put<ts::spec<"x">>(high, h);
  const auto c = ts::device_put<ts::spec<"x">>(permuted, h);
  // (Catch2 v2's && of matchers keeps references: the parts must outlive the combination.)
  const auto prefix = Catch::StartsWith("typeshard: ");
  const auto names_low = Catch::Contains("Mesh('x': 2, 'y': 2) on devices [0, 1, 2, 3]");
  const auto names_high = Catch::Contains("Mesh('x': 2, 'y': 2) on devices [4, 5, 6, 7]");
#define NAMES_BOTH prefix && names_low && names_high
  REQUIRE_THROWS_AS(a + b, ts::device_mesh_error);
  REQUIRE_THROWS_WITH(a + b, NAMES_BOTH);
  REQUIRE_THROWS_WITH(a - b, NAMES_BOTH);
  REQUIRE_THROWS_WITH(a * b, NAMES_BOTH);
  REQUIRE_THROWS_WITH(ts::maximum(a, b), NAMES_BOTH);
  REQUIRE_THROWS_WITH(ts::zip(a, b, [](float p, float q) { return p + q; }), NAMES_BOTH);
  // The same devices in another order are other devices for position 0 and 1.
  REQUIRE_THROWS_AS(a + c, ts::device_mesh_error);
  REQUIRE_THROWS_WITH(a / c, Catch::Contains("on devices [1, 0, 2, 3]"));
  // The same device list on a separately built device_mesh is the same devices.
  const ts::device_mesh<mesh_2x2> low_again{devices, {0, 1, 2, 3}};
  const auto d = ts::device_put<ts::spec<"x">>(low_again, h);
  REQUIRE(ts::to_host(a + d) == ts::to_host(a * 2.0f));
#undef NAMES_BOTH
}

TEST_CASE("operands of different shapes are a shape_error naming both", "[elementwise]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const auto a = ts::device_put<ts::spec<"x", "y">>(m, ts::host_tensor<float, 2>({4, 6}));
  const auto b = ts::device_put<ts::spec<"x", "y">>(m, ts::host_tensor<float, 2>({4, 5}));
  const auto prefix = Catch::StartsWith("typeshard: ");
  const auto names_a = Catch::Contains("(4, 6)");
  const auto names_b = Catch::Contains("(4, 5)");
#define NAMES_BOTH prefix && names_a && names_b
  REQUIRE_THROWS_AS(a + b, ts::shape_error);
  REQUIRE_THROWS_WITH(a + b, NAMES_BOTH);
  REQUIRE_THROWS_WITH(a - b, NAMES_BOTH);
  REQUIRE_THROWS_WITH(a * b, NAMES_BOTH);
  REQUIRE_THROWS_WITH(ts::minimum(a, b), NAMES_BOTH);
  // Equal element counts are not enough.
  const auto c = ts::device_put<ts::spec<"x", "y">>(m, ts::host_tensor<float, 2>({6, 4}));
  REQUIRE_THROWS_AS(a + c, ts::shape_error);
#undef NAMES_BOTH
}

TEST_CASE("linear operations on unreduced values keep the unreduced type", "[elementwise][unreduced]") {
  using spec = ts::spec<"x", ts::none>;
  using partial = ts::sharded_array<float, mesh_2x2, spec, ts::dextents<2>, ts::unreduced<"y">>;
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());

  // Each position holds its own partial sum: random blocks of the layout's local shape.
  const ts::shape<2> e{5, 3};
  auto adopt = [&] {
    std::vector<ts::detail::buffer<float>> blocks;
    for (std::size_t p = 0; p < mesh_2x2::size; ++p) {
      const ts::shape<2> local = partial::layout_type::local_shape(e, p);
      ts::detail::buffer<float> b(local[0] * local[1]);
      for (std::size_t i = 0; i < b.size(); ++i)
        b.data()[i] = std::uniform_real_distribution<float>(-2, 2)(rng);
      blocks.push_back(std::move(b));
    }
    return partial(ts::adopt_shards, m, e, std::move(blocks));
  };
  const partial u = adopt();
  const partial v = adopt();

  const auto sum = u + v;
  const auto diff = u - v;
  const auto neg = -u;
  const auto twice = u * 2.0f;
  const auto twice_left = 2.0f * u;
  const auto half = u / 2.0f;
  STATIC_REQUIRE(std::is_same_v<decltype(sum), const partial>);
  STATIC_REQUIRE(std::is_same_v<decltype(diff), const partial>);
  STATIC_REQUIRE(std::is_same_v<decltype(neg), const partial>);
  STATIC_REQUIRE(std::is_same_v<decltype(twice), const partial>);
  STATIC_REQUIRE(std::is_same_v<decltype(twice_left), const partial>);
  STATIC_REQUIRE(std::is_same_v<decltype(half), const partial>);
  STATIC_REQUIRE(std::is_same_v<decltype(sum)::unreduced_type, ts::unreduced<"y">>);

  // Each position's partial sum is combined with the same position's, element by element.
  for (std::size_t p = 0; p < mesh_2x2::size; ++p) {
    CAPTURE(p);
    const auto a = u.local_data(p), b = v.local_data(p);
    REQUIRE(sum.local_data(p).size() == a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      REQUIRE(sum.local_data(p)[i] == a[i] + b[i]);
      REQUIRE(diff.local_data(p)[i] == a[i] - b[i]);
      REQUIRE(neg.local_data(p)[i] == -a[i]);
      REQUIRE(twice.local_data(p)[i] == a[i] * 2.0f);
      REQUIRE(twice_left.local_data(p)[i] == a[i] * 2.0f);
      REQUIRE(half.local_data(p)[i] == a[i] / 2.0f);
    }
  }
  REQUIRE(sum.extents() == e);
  REQUIRE(sum.device_mesh() == m);
}
