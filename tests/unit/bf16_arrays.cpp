// ts::bfloat16: the scalar (round to nearest even from float, NaN kept quiet, exact to float,
// arithmetic in float rounded once), and bf16 arrays on 2x2 and 2x4 meshes against float
// references over random shapes and specs: device_put / to_host / reshard exactly, elementwise
// operations (each computed in float and rounded once: exactly the reference), reductions
// (accumulated in float), printing and visualize, and every collective in shard_map, whose
// bf16 runs receive exactly half the bytes of the same program on float.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <typeshard/ops/communication_report.hpp>
#include <typeshard/typeshard.hpp>

#include "support/foundation.hpp"

namespace ts = typeshard;
// Not `using ts::bfloat16`: OpenBLAS's headers declare a global ::bfloat16 of their own.
using bf16 = ts::bfloat16;

namespace {

float from_bits32(std::uint32_t u) { return std::bit_cast<float>(u); }

// The nearest bf16 by brute force: the two candidates around f, ties to the even one.
std::uint16_t nearest_bits(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t lo = static_cast<std::uint16_t>(u >> 16);
  const std::uint16_t hi = static_cast<std::uint16_t>(lo + 1);
  const double dlo = std::abs(double(f) - double(float(bf16::from_bits(lo))));
  const double dhi = std::abs(double(f) - double(float(bf16::from_bits(hi))));
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1u) == 0 ? lo : hi;
}

}  // namespace

TEST_CASE("bf16: conversions round to nearest even, keep NaN, are exact to float",
          "[bf16]") {
  static_assert(sizeof(bf16) == 2 && std::is_trivially_copyable_v<bf16>);
  static_assert(bf16(1.0f).bits == 0x3f80 && float(bf16(-2.0f)) == -2.0f);
  CHECK(bf16(from_bits32(0x3f808000u)).bits == 0x3f80);  // tie, even below
  CHECK(bf16(from_bits32(0x3f818000u)).bits == 0x3f82);  // tie, even above
  CHECK(bf16(from_bits32(0x3f808001u)).bits == 0x3f81);  // past the tie
  CHECK(bf16(from_bits32(0x3f807fffu)).bits == 0x3f80);
  CHECK(bf16(std::numeric_limits<float>::max()).bits == 0x7f80);  // rounds to infinity
  CHECK(bf16(-std::numeric_limits<float>::infinity()).bits == 0xff80);
  CHECK(bf16(from_bits32(0x7f7f7fffu)).bits == 0x7f7f);  // the largest finite, kept
  // NaNs stay NaN (a signalling one made quiet, the sign kept), even a payload in low bits.
  for (std::uint32_t nan : {0x7f800001u, 0x7fc00000u, 0xff800001u, 0x7fffffffu, 0x7f80ffffu}) {
    const bf16 b(from_bits32(nan));
    CHECK(ts::is_nan(b));
    CHECK(std::isnan(float(b)));
    CHECK((b.bits & 0x0040u) != 0);
    CHECK((b.bits >> 15) == (nan >> 31));
  }
  // Every bf16 converts to float and back unchanged (NaNs: to a NaN).
  for (std::uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const bf16 b = bf16::from_bits(static_cast<std::uint16_t>(bits));
    const bf16 back{float(b)};
    if (ts::is_nan(b))
      REQUIRE(ts::is_nan(back));
    else
      REQUIRE(back.bits == b.bits);
  }
  // Random floats: the nearest bf16, ties to even.
  std::mt19937_64 rng(ts_test::seed());
  INFO(ts_test::seed_message());
  std::uniform_int_distribution<std::uint32_t> any(0, 0x7f7effffu);
  for (int i = 0; i < 100000; ++i) {
    std::uint32_t u = any(rng);
    if (i % 4 == 0) u = (u & ~0xffffu) | 0x8000u;  // exact ties
    const float f = from_bits32(u | (i % 2 == 0 ? 0u : 0x80000000u));
    REQUIRE(bf16(f).bits == nearest_bits(f));
  }
  // Arithmetic computes in float and rounds once; mixed operands are float.
  const bf16 one(1.0f), tiny(1.0f / 256);
  CHECK(one + tiny == one);                        // 1 + 2^-8: a tie, rounded to even
  CHECK(float(one + tiny + tiny) == 1.0f);
  CHECK(float(bf16(3.0f) * bf16(0.5f)) == 1.5f);
  CHECK(float(-bf16(2.0f)) == -2.0f);
  static_assert(std::is_same_v<decltype(one + 1.0f), float>);
  static_assert(std::is_same_v<decltype(one + one), bf16>);
  static_assert(!std::is_convertible_v<float, bf16>);  // narrowing: explicit only
  // The elementwise functors see bfloat16's NaNs (max and min take a NaN from either side).
  const bf16 nan = std::numeric_limits<bf16>::quiet_NaN();
  CHECK(ts::is_nan(ts::fn::maximum(one, nan)));
  CHECK(ts::is_nan(ts::fn::minimum(one, nan)));
  CHECK(ts::is_nan(ts::fn::maximum(nan, one)));
  CHECK(ts::fn::maximum(one, bf16(2.0f)) == bf16(2.0f));
  std::ostringstream os;
  os << bf16(1.5f) << ' ' << std::numeric_limits<bf16>::epsilon();
  CHECK(os.str() == "1.5 0.0078125");
}

namespace {

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x4 = ts::mesh<ts::axis("data", 2), ts::axis("model", 4)>;

ts::host_tensor<bf16, 2> random_bf16(std::size_t r, std::size_t c, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.0f, 2.0f);
  ts::host_tensor<bf16, 2> t({r, c});
  for (bf16& v : t.values()) v = bf16(d(rng));
  return t;
}

ts::host_tensor<float, 2> widen(const ts::host_tensor<bf16, 2>& t) {
  ts::host_tensor<float, 2> f({t.extent(0), t.extent(1)});
  for (std::size_t i = 0; i < t.size(); ++i) f.data()[i] = float(t.data()[i]);
  return f;
}

// Exact: every value the bf16 of the float reference.
void check_rounded(const ts::host_tensor<bf16, 2>& got, const ts::host_tensor<float, 2>& ref,
                   const char* what) {
  INFO(what);
  REQUIRE(got.size() == ref.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bf16 want(ref.data()[i]);
    if (ts::is_nan(want)) REQUIRE(ts::is_nan(got.data()[i]));
    else REQUIRE(got.data()[i].bits == want.bits);
  }
}

// Within bf16's accuracy of a float reference summed from n terms of magnitude <= scale.
void check_close(const ts::host_tensor<bf16, 2>& got, const ts::host_tensor<float, 2>& ref,
                 double n, double scale, const char* what) {
  INFO(what);
  REQUIRE(got.size() == ref.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tol = (std::abs(double(ref.data()[i])) + n * scale) * std::ldexp(1.0, -7);
    REQUIRE(std::abs(double(float(got.data()[i])) - double(ref.data()[i])) <= tol);
  }
}

// A sum's value on the host: reduced (its partial sums all-reduced) first.
template <class A>
ts::host_tensor<bf16, 2> reduced_host(const A& a) {
  return ts::to_host(ts::reshard<typename A::spec>(a));
}

// One spec on one mesh: random extents, the array operations against float references.
template <class Mesh, class Spec, class Other>
void check_array_ops(const ts::device_mesh<Mesh>& m, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::size_t> ext(1, 13);
  for (int round = 0; round < 4; ++round) {
    const std::size_t r = ext(rng), c = ext(rng);
    INFO("extents " << r << " x " << c);
    const auto hx = random_bf16(r, c, rng), hy = random_bf16(r, c, rng);
    const auto fx = widen(hx), fy = widen(hy);
    const auto x = ts::device_put<Spec>(m, hx);
    const auto y = ts::device_put<Spec>(m, hy);
    static_assert(std::is_same_v<typename decltype(x)::value_type, bf16>);
    REQUIRE(ts::to_host(x) == hx);
    REQUIRE(ts::to_host(ts::reshard<Other>(x)) == hx);
    REQUIRE(ts::to_host(ts::reshard<Spec>(ts::reshard<Other>(x))) == hx);

    auto ref = [&](auto f) {
      ts::host_tensor<float, 2> out({r, c});
      for (std::size_t i = 0; i < out.size(); ++i) out.data()[i] = f(fx.data()[i], fy.data()[i]);
      return out;
    };
    check_rounded(ts::to_host(x + y), ref([](float a, float b) { return a + b; }), "x + y");
    check_rounded(ts::to_host(x - y), ref([](float a, float b) { return a - b; }), "x - y");
    check_rounded(ts::to_host(x * y), ref([](float a, float b) { return a * b; }), "x * y");
    check_rounded(ts::to_host(x / y), ref([](float a, float b) { return a / b; }), "x / y");
    check_rounded(ts::to_host(-x), ref([](float a, float) { return -a; }), "-x");
    check_rounded(ts::to_host(x * bf16(3.0f)), ref([](float a, float) { return a * 3.0f; }),
                  "x * 3");
    check_rounded(ts::to_host(ts::maximum(x, y)),
                  ref([](float a, float b) { return a < b ? b : a; }), "maximum");
    check_rounded(ts::to_host(ts::relu(x)), ref([](float a, float) { return a < 0 ? 0.0f : a; }),
                  "relu");
    check_rounded(ts::to_host(ts::abs(x)), ref([](float a, float) { return std::abs(a); }),
                  "abs");
    check_rounded(ts::to_host(ts::exp(x)), ref([](float a, float) { return std::exp(a); }),
                  "exp");
    check_rounded(ts::to_host(ts::tanh(y)), ref([](float, float b) { return std::tanh(b); }),
                  "tanh");

    // Reductions: accumulated in float, so within a rounding or two of the float sum.
    ts::host_tensor<float, 2> rows({r, 1}), cols({1, c}), rmax({r, 1});
    for (std::size_t i = 0; i < r; ++i)
      for (std::size_t j = 0; j < c; ++j) {
        const float v = fx.data()[i * c + j];
        rows.data()[i] += v;
        cols.data()[j] += v;
        rmax.data()[i] = j == 0 ? v : std::max(rmax.data()[i], v);
      }
    check_close(reduced_host(ts::sum<1>(x, ts::keep_dims)), rows, double(c), 8.0, "sum rows");
    check_close(reduced_host(ts::sum<0>(x, ts::keep_dims)), cols, double(r), 8.0, "sum cols");
    check_rounded(ts::to_host(ts::max<1>(x, ts::keep_dims)), rmax, "max rows");
    ts::host_tensor<float, 2> means = cols;
    for (float& v : means.values()) v /= static_cast<float>(r);
    check_close(reduced_host(ts::mean<0>(x, ts::keep_dims)), means, 1.0, 8.0, "mean cols");

    // visualize draws bf16 arrays as float ones.
    std::ostringstream pic, pic_f;
    ts::visualize(pic, x);
    ts::visualize(pic_f, ts::device_put<Spec>(m, fx));
    CHECK(pic.str() == pic_f.str());
  }
}

}  // namespace

TEST_CASE("bf16 arrays: placement, reshard, elementwise ops and reductions vs float",
          "[bf16]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{8};
  using ts::none;
  ts::device_mesh<mesh_2x2> m4{devices};
  check_array_ops<mesh_2x2, ts::spec<"x", "y">, ts::spec<"y", none>>(m4, rng);
  check_array_ops<mesh_2x2, ts::spec<ts::axes("x", "y"), none>, ts::spec<none, "x">>(m4, rng);
  ts::device_mesh<mesh_2x4> m8{devices};
  check_array_ops<mesh_2x4, ts::spec<"data", "model">, ts::spec<"model", "data">>(m8, rng);
  check_array_ops<mesh_2x4, ts::spec<none, ts::axes("model", "data")>, ts::spec<none, none>>(
      m8, rng);
}

namespace {

template <class T>
using results = std::vector<std::map<std::string, ts::host_tensor<float, 2>>>;

// Every collective over the group A... in one shard_map on blocks of T (the global array's
// values given as floats), each device's results widened to float, and the bytes the
// recorder saw.
template <class T, class Mesh, class Spec, ts::axis_name... A>
results<T> run_collectives(const ts::device_mesh<Mesh>& m, const ts::host_tensor<float, 2>& g,
                           std::size_t& bytes) {
  ts::host_tensor<T, 2> host({g.extent(0), g.extent(1)});
  for (std::size_t i = 0; i < g.size(); ++i) host.data()[i] = static_cast<T>(g.data()[i]);
  const auto x = ts::device_put<Spec>(m, host);
  results<T> out(Mesh::size);
  ts::communication_recorder rec;
  const auto f = ts::shard_map<Mesh, Spec, Spec>(
      [&](const ts::shard_context<Mesh>& c, const auto& b) {
        auto& mine = out[c.position()];
        auto keep = [&](const std::string& name, const auto& r) {
          const auto h = r.to_host();
          ts::host_tensor<float, 2> w({h.extent(0), h.extent(1)});
          for (std::size_t i = 0; i < h.size(); ++i) w.data()[i] = static_cast<float>(h.data()[i]);
          mine[name] = w;
        };
        keep("psum", ts::psum<A...>(b));
        keep("pmax", ts::pmax<A...>(b));
        keep("pmin", ts::pmin<A...>(b));
        keep("pmean", ts::pmean<A...>(b));
        for (std::size_t dim = 0; dim < 2; ++dim) {
          const std::string d = std::to_string(dim);
          keep("all_gather " + d, ts::all_gather<A...>(b, dim));
          keep("psum_scatter " + d, ts::psum_scatter<A...>(b, dim));
          keep("all_to_all " + d, ts::all_to_all<A...>(b, dim, 1 - dim));
        }
        keep("shift", ts::shift<A...>(b, 1));
        return b;
      });
  (void)f(x);
  bytes = rec.report().bytes_received();
  return out;
}

// The group's collectives on bf16 and on float, on the same values: small integers, so
// every sum and mean (groups of 2, 4, 8) is exact in bf16 too and the results agree
// exactly, with half the bytes received.
template <class Mesh, class Spec, ts::axis_name... A>
void check_collectives(const ts::device_mesh<Mesh>& m, std::mt19937_64& rng, std::size_t rows_by,
                       std::size_t cols_by) {
  std::uniform_int_distribution<int> v(-8, 8);
  constexpr std::size_t n = (std::size_t{1} * ... * Mesh::size_of(A));
  // Blocks of 2n x 2n per device (the group divides each block's extents, for all_to_all);
  // Spec shards rows over rows_by devices and columns over cols_by.
  const std::size_t r = 2 * n * rows_by, c = 2 * n * cols_by;
  ts::host_tensor<float, 2> g({r, c});
  for (float& x : g.values()) x = static_cast<float>(v(rng));
  std::size_t bytes_bf16 = 0, bytes_f32 = 0;
  const auto got = run_collectives<bf16, Mesh, Spec, A...>(m, g, bytes_bf16);
  const auto want = run_collectives<float, Mesh, Spec, A...>(m, g, bytes_f32);
  for (std::size_t p = 0; p < Mesh::size; ++p)
    for (const auto& [name, t] : want[p]) {
      INFO("device " << p << ": " << name);
      REQUIRE(got[p].at(name) == t);
    }
  CHECK(bytes_f32 > 0);
  CHECK(2 * bytes_bf16 == bytes_f32);
}

}  // namespace

TEST_CASE("bf16 collectives agree with float ones and move half the bytes", "[bf16]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{8};
  using ts::none;
  ts::device_mesh<mesh_2x2> m4{devices};
  check_collectives<mesh_2x2, ts::spec<"x", "y">, "x">(m4, rng, 2, 2);
  check_collectives<mesh_2x2, ts::spec<"x", "y">, "x", "y">(m4, rng, 2, 2);
  ts::device_mesh<mesh_2x4> m8{devices};
  check_collectives<mesh_2x4, ts::spec<"data", "model">, "model">(m8, rng, 2, 4);
  check_collectives<mesh_2x4, ts::spec<"data", "model">, "data", "model">(m8, rng, 2, 4);
}

TEST_CASE("bf16 psum of random values: float sums per element, within bf16 rounding",
          "[bf16]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_2x4> m{devices};
  using spec = ts::spec<"data", "model">;
  const auto h = random_bf16(6, 8, rng);
  const auto x = ts::device_put<spec>(m, h);
  std::vector<ts::host_tensor<bf16, 2>> got(8);
  const auto f = ts::shard_map<mesh_2x4, spec, spec>(
      [&](const ts::shard_context<mesh_2x4>& c, const auto& b) {
        got[c.position()] = ts::psum<"data", "model">(b).to_host();
        return b;
      });
  (void)f(x);
  // The reference: the 8 blocks (3 x 2 each) summed in float.
  ts::host_tensor<float, 2> sum({3, 2});
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 8; ++j) sum.data()[(i % 3) * 2 + j % 2] += float(h.data()[i * 8 + j]);
  for (std::size_t p = 0; p < 8; ++p) check_close(got[p], sum, 8.0, 8.0, "psum");
}

namespace {

// The array-API moves (slice_in_dim, split, concat, take) on bf16 and on float, on values that
// bf16 holds exactly: the results agree bit for bit (these ops move elements, they compute
// nothing), for one sharded and one unsharded dimension, with uneven extents.
template <class Mesh, class Spec>
void check_slices(const ts::device_mesh<Mesh>& m, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::size_t> ext(5, 13);
  std::uniform_int_distribution<int> v(-64, 64);
  const std::size_t r = ext(rng), c = ext(rng);
  INFO(Spec::to_string() << ", extents " << r << " x " << c);
  ts::host_tensor<float, 2> f({r, c});
  ts::host_tensor<bf16, 2> h({r, c});
  for (std::size_t i = 0; i < f.size(); ++i) {
    f.data()[i] = static_cast<float>(v(rng)) / 4.0f;  // exact in bf16
    h.data()[i] = bf16(f.data()[i]);
  }
  const auto xf = ts::device_put<Spec>(m, f);
  const auto xb = ts::device_put<Spec>(m, h);
  const auto same = [](const auto& got_bf16, const auto& want_f32) {
    const auto g = ts::to_host(got_bf16);
    const auto w = ts::to_host(want_f32);
    REQUIRE(g.extents() == w.extents());
    for (std::size_t i = 0; i < w.size(); ++i)
      REQUIRE(static_cast<float>(g.data()[i]) == w.data()[i]);
  };
  same(ts::slice_in_dim<0>(xb, 1, r - 3), ts::slice_in_dim<0>(xf, 1, r - 3));
  same(ts::slice_in_dim<1>(xb, 2, c - 2), ts::slice_in_dim<1>(xf, 2, c - 2));
  same(ts::concat<0>(xb, xb), ts::concat<0>(xf, xf));
  same(ts::concat<1>(xb, xb, xb), ts::concat<1>(xf, xf, xf));
  const auto sb = ts::split<0, 2>(ts::concat<0>(xb, xb));
  const auto sf = ts::split<0, 2>(ts::concat<0>(xf, xf));
  same(sb[0], sf[0]);
  same(sb[1], sf[1]);
  // take: rows of the table, the ids replicated.
  ts::host_tensor<int, 1> ids({4});
  for (std::size_t i = 0; i < 4; ++i) ids.data()[i] = static_cast<int>((3 * i + 1) % r);
  const auto id = ts::device_put<ts::spec<ts::none>>(m, ids);
  // A table sharded over its rows gives a partial sum (each row lives on one device): reduce
  // it (exact: one nonzero term per element).
  const auto reduced = [](const auto& e) {
    return ts::reshard<typename std::remove_cvref_t<decltype(e)>::spec>(e);
  };
  same(reduced(ts::take(xb, id)), reduced(ts::take(xf, id)));
}

}  // namespace

TEST_CASE("bf16 slices, split, concat and take equal float's bit for bit", "[bf16]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{8};
  using ts::none;
  ts::device_mesh<mesh_2x2> m4{devices};
  check_slices<mesh_2x2, ts::spec<"x", "y">>(m4, rng);
  check_slices<mesh_2x2, ts::spec<none, ts::axes("x", "y")>>(m4, rng);
  ts::device_mesh<mesh_2x4> m8{devices};
  check_slices<mesh_2x4, ts::spec<"model", none>>(m8, rng);
  check_slices<mesh_2x4, ts::spec<"data", "model">>(m8, rng);
}
