// The functions models use (ops/functions.hpp: sigmoid, softplus, gelu tanh and exact, rsqrt,
// pow, clip), the comparisons and ts::where (ops/where.hpp), on global arrays against a serial
// loop over the same host data, and on traced values against finite differences and the
// replicated run (grad_check.hpp). Forward: a sample of specs of ranks 1 to 3 on the (2,2) and
// (2,4) meshes (one axis, two axes on two dimensions, both axes on one), random extents from 1
// to 7 (uneven shards, and fewer elements than shards); where and the comparisons also with a
// replicated operand of extent 1 that broadcasts, and with scalars.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include "grad_check.hpp"

namespace {

using namespace grad_test;

using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;

// ---- serial references -----------------------------------------------------------------------

double ref_sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double ref_softplus(double x) { return std::log1p(std::exp(x)); }
double ref_gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double ref_gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

template <std::size_t Rank>
ts::shape<Rank> random_shape(std::mt19937& gen) {
  std::uniform_int_distribution<std::size_t> e(1, 7);
  ts::shape<Rank> s{};
  for (auto& v : s) v = e(gen);
  return s;
}

// Every element of `got` equals f(x[i]) (to a relative 1e-12), or f(x[i], y[i]).
template <class A, std::size_t Rank, class F>
void check_map(const char* what, const A& got, const ts::host_tensor<double, Rank>& x, F f) {
  INFO(what);
  const auto h = ts::to_host(got);
  REQUIRE(h.extents() == x.extents());
  for (std::size_t i = 0; i < x.size(); ++i) {
    INFO("element " << i << " of " << x.size());
    CHECK(close(h.data()[i], f(x.data()[i]), 1e-12));
  }
}
template <class A, std::size_t Rank, class F>
void check_zip(const char* what, const A& got, const ts::host_tensor<double, Rank>& x,
               const ts::host_tensor<double, Rank>& y, F f) {
  INFO(what);
  const auto h = ts::to_host(got);
  REQUIRE(h.extents() == x.extents());
  for (std::size_t i = 0; i < x.size(); ++i) {
    INFO("element " << i << " of " << x.size());
    CHECK(close(h.data()[i], f(x.data()[i], y.data()[i]), 1e-12));
  }
}

// The forward checks of one spec on one mesh, over random shapes (run-time loop: one
// instantiation per spec).
template <class Spec, std::size_t Rank, class Mesh>
void forward_cases(const ts::device_mesh<Mesh>& m, unsigned seed) {
  std::mt19937 gen(seed);
  for (int trial = 0; trial < 3; ++trial) {
    const ts::shape<Rank> s = random_shape<Rank>(gen);
    INFO(Spec::to_string() << " " << ts::to_string(s));
    const auto hx = random_tensor(s, seed + 10 * trial, 0.0);
    auto hy = random_tensor(s, seed + 10 * trial + 1, 0.0);
    hy.data()[0] = hx.data()[0];  // one tie for the comparisons
    for (std::size_t i = 0; i < hx.size(); ++i) hy.data()[i] *= 3;
    hy.data()[0] = hx.data()[0];
    const auto x = ts::device_put<Spec>(m, hx);
    const auto y = ts::device_put<Spec>(m, hy);
    check_map("sigmoid", ts::sigmoid(x * 8.0), hx, [](double v) { return ref_sigmoid(8 * v); });
    check_map("softplus", ts::softplus(x * 8.0), hx, [](double v) { return ref_softplus(8 * v); });
    check_map("gelu", ts::gelu(x * 3.0), hx, [](double v) { return ref_gelu_tanh(3 * v); });
    check_map("gelu exact", ts::gelu(x * 3.0, false), hx,
              [](double v) { return ref_gelu_erf(3 * v); });
    check_map("rsqrt", ts::rsqrt(x + 1.5), hx, [](double v) { return 1 / std::sqrt(v + 1.5); });
    check_map("pow scalar", ts::pow(x, 3.0), hx, [](double v) { return v * v * v; });
    check_zip("pow", ts::pow(x + 1.5, y), hx, hy,
              [](double a, double b) { return std::pow(a + 1.5, b); });
    check_map("clip", ts::clip(x, -0.25, 0.5), hx,
              [](double v) { return std::min(std::max(v, -0.25), 0.5); });
    check_zip("less", ts::less(x, y), hx, hy, [](double a, double b) { return a < b ? 1.0 : 0.0; });
    check_zip("<=", x <= y, hx, hy, [](double a, double b) { return a <= b ? 1.0 : 0.0; });
    check_zip(">", x > y, hx, hy, [](double a, double b) { return a > b ? 1.0 : 0.0; });
    check_zip(">=", x >= y, hx, hy, [](double a, double b) { return a >= b ? 1.0 : 0.0; });
    check_zip("equal", ts::equal(x, y), hx, hy,
              [](double a, double b) { return a == b ? 1.0 : 0.0; });
    check_zip("not_equal", ts::not_equal(x, y), hx, hy,
              [](double a, double b) { return a != b ? 1.0 : 0.0; });
    check_map("s < x", 0.0 < x, hx, [](double v) { return 0 < v ? 1.0 : 0.0; });
    check_zip("where", ts::where(x > y, x, y * 2.0), hx, hy,
              [](double a, double b) { return a > b ? a : 2 * b; });
    check_map("where scalar b", ts::where(x > 0.0, x, 0.0), hx,
              [](double v) { return v > 0 ? v : 0.0; });
    check_map("where scalar a", ts::where(x > 0.0, -1.0, x), hx,
              [](double v) { return v > 0 ? -1.0 : v; });
    // a replicated operand of extent 1 in the first dimension, broadcast over it
    ts::shape<Rank> s1 = s;
    s1[0] = 1;
    const auto hb = random_tensor(s1, seed + 10 * trial + 2, 0.0);
    const auto b = ts::device_put<ts::spec<>>(m, hb);
    auto bcast = [&](auto f) {
      ts::host_tensor<double, Rank> out(s);
      const std::size_t inner = hx.size() / s[0];
      for (std::size_t i = 0; i < hx.size(); ++i)
        out.data()[i] = f(hx.data()[i], hb.data()[i % inner], i);
      return out;
    };
    const auto want = bcast([](double a, double c, std::size_t) { return a < c ? c : a; });
    check_map("where, broadcast mask and operand", ts::where(ts::less(x, b), b, x), want,
              [](double v) { return v; });
    const auto want2 = bcast([](double a, double c, std::size_t) { return c > 0 ? a : 0.5; });
    check_map("where, broadcast mask only", ts::where(b > 0.0, x, 0.5), want2,
              [](double v) { return v; });
  }
}

TEST_CASE("model functions, comparisons and where on arrays: (2,2) and (2,4) meshes", "[ops]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x2> m22{devices};
  const ts::device_mesh<mesh_2x4> m24{devices};
  // (the meshes are run-time values to the kernels: each spec is one instantiation)
  forward_cases<ts::spec<"x">, 1>(m22, 1);
  forward_cases<ts::spec<ts::axes("y", "x")>, 1>(m24, 2);
  forward_cases<ts::spec<"x", "y">, 2>(m22, 3);
  forward_cases<ts::spec<"x", "y">, 2>(m24, 4);
  forward_cases<ts::spec<ts::none, ts::axes("x", "y")>, 2>(m24, 5);
  forward_cases<ts::spec<"y", ts::none, "x">, 3>(m24, 7);
}

TEST_CASE("model functions: float stays finite at large |x|, NaN passes", "[ops]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const ts::host_tensor<float, 1> h({4}, {-200.0f, 200.0f, 0.0f, NAN});
  const auto x = ts::device_put<ts::spec<"x">>(m, h);
  const auto s = ts::to_host(ts::sigmoid(x));
  CHECK(s.data()[0] == 0.0f);
  CHECK(s.data()[1] == 1.0f);
  CHECK(s.data()[2] == 0.5f);
  CHECK(std::isnan(s.data()[3]));
  const auto p = ts::to_host(ts::softplus(x));
  CHECK(p.data()[0] == 0.0f);
  CHECK(p.data()[1] == 200.0f);
  CHECK(std::isnan(ts::to_host(ts::clip(x, -1.0f, 1.0f)).data()[3]));
  // where keeps -0.0 and NaN exactly
  const ts::host_tensor<float, 1> z({4}, {-0.0f, NAN, 1.0f, -0.0f});
  const auto w = ts::to_host(ts::where(x > 0.0f, ts::device_put<ts::spec<"x">>(m, z), x));
  CHECK(w.data()[0] == -200.0f);
  CHECK(std::isnan(w.data()[1]));
  CHECK(std::signbit(ts::to_host(ts::where(x < 1.0f, ts::device_put<ts::spec<"x">>(m, z), x))
                         .data()[0]));
}

}  // namespace

// A program's own helpers of the same names stay callable unqualified: ts::gelu, ts::sigmoid,
// ts::where and ts::take are function objects, which argument-dependent lookup never finds.
namespace user_code {
template <class H>
auto gelu(const H& h) {
  return h * 0.5;
}
template <class M, class A, class B>
int where(const M&, const A&, const B&) {
  return 7;
}
}  // namespace user_code

namespace {

TEST_CASE("model functions: a program's own gelu and where helpers are not ambiguous", "[ops]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const auto x = ts::device_put<ts::spec<"x">>(m, random_tensor(ts::shape<1>{4}, 3));
  using namespace user_code;
  const auto y = gelu(x);  // user_code::gelu
  CHECK(close(ts::to_host(y).data()[1], random_tensor(ts::shape<1>{4}, 3).data()[1] * 0.5,
              1e-15));
  CHECK(where(x, x, x) == 7);
}

// ---- gradients -----------------------------------------------------------------------------

// Every function in one loss (clip's kinks and where's switch points are away from the
// finite-difference steps for this data).
const auto functions = [](auto x) {
  return sin_sum(ts::sigmoid(x * 2.0) + ts::softplus(x) * 0.5 + ts::gelu(x * 1.5) +
                 ts::gelu(x, false) * 0.7 + ts::rsqrt(x + 2.0) + ts::pow(x + 2.0, 2.5) +
                 ts::pow(x, 3.0) + ts::clip(x * 3.0, -1.0, 0.5) + ts::where(x > 0.1, x * 2.0, 0.3) +
                 ts::where(x < -0.2, -1.0, x * x));
};
// where with a traced mask operand, both branches traced and one of lower rank; pow of two
// arrays.
const auto selects = [](auto a, auto b) {
  return sin_sum(ts::where(a > b, a * 3.0, b) + ts::where(ts::less_equal(b, 0.0), a, b * a) +
                 ts::pow(a + 2.0, b));
};

// (the functions' backward is local, the same for every rank: ranks 2 and 3 keep the compile
// in budget; rank 1 is checked forward above)
TEST_CASE("grad: model functions, where and pow, ranks 2 and 3", "[grad]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  unsigned seed = 40;
  for (const ts::shape<2> s : {ts::shape<2>{4, 4}, ts::shape<2>{3, 5}}) {
    const auto x = random_tensor(s, seed++);
    check_gradients<ts::spec<"y", "x">>("functions [y, x]", functions, m, x);
    const auto b = random_tensor(s, seed++);
    check_gradients<ts::spec<"x", "y">, ts::spec<"x", "y">>("selects same spec", selects, m, x, b);
    check_gradients<ts::spec<"x", "y">, ts::spec<>>("selects rhs replicated", selects, m, x, b);
    // a bias of lower rank: where's cotangent summed over the rows it stretches over
    const auto bias = random_tensor(ts::shape<1>{s[1]}, seed++);
    check_gradients<ts::spec<"x", "y">, ts::spec<"y">>("selects bias", selects, m, x, bias);
  }
  const auto x3 = random_tensor(ts::shape<3>{3, 2, 5}, seed++);
  check_gradients<ts::spec<ts::none, "y", "x">>("functions rank 3", functions, m, x3);
}

}  // namespace
