// ts::slice_in_dim, ts::split and ts::concat (ops/slice.hpp, split.hpp, concat.hpp) against
// serial loops over the same host data: every spec of ranks 1 to 3 on the (2,2) and (2,4)
// meshes, along every dimension, random extents (uneven shards, empty ones, empty results),
// random offsets; the collectives each ran (a communication recorder) equal to its plan's, and
// none along an unsharded dimension. Gradients (ts::value_and_grad) against finite differences
// and the replicated run on a sample of the specs; unreduced operands; run-time errors.
#include <catch2/catch.hpp>

#include <cstddef>
#include <random>
#include <vector>

#include <typeshard/typeshard.hpp>

#include "grad_check.hpp"
#include "support/foundation.hpp"

namespace {

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;

template <std::size_t Rank>
ts::host_tensor<double, Rank> counting(const ts::shape<Rank>& s, double base) {
  ts::host_tensor<double, Rank> t(s);
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = base + static_cast<double>(i);
  return t;
}

// The serial window along d: out index j <- in index j + shift, zero outside.
template <std::size_t Rank>
ts::host_tensor<double, Rank> window(const ts::host_tensor<double, Rank>& x, std::size_t d,
                                     std::ptrdiff_t shift, std::size_t n) {
  ts::shape<Rank> s = x.extents();
  const std::size_t n_in = s[d];
  s[d] = n;
  ts::host_tensor<double, Rank> out(s);
  std::size_t inner = 1;
  for (std::size_t k = d + 1; k < Rank; ++k) inner *= s[k];
  const std::size_t outer = n == 0 || inner == 0 ? 0 : out.size() / (n * inner);
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t j = 0; j < n; ++j) {
      const std::ptrdiff_t g = static_cast<std::ptrdiff_t>(j) + shift;
      if (g < 0 || g >= static_cast<std::ptrdiff_t>(n_in)) continue;
      for (std::size_t i = 0; i < inner; ++i)
        out.data()[(o * n + j) * inner + i] =
            x.data()[(o * n_in + static_cast<std::size_t>(g)) * inner + i];
    }
  return out;
}

template <std::size_t Rank>
void same(const ts::host_tensor<double, Rank>& got, const ts::host_tensor<double, Rank>& want) {
  REQUIRE(got.extents() == want.extents());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    REQUIRE(got.data()[i] == want.data()[i]);
  }
}

// What ran inside f: the collectives of one device.
template <class F>
std::size_t collectives_of(F&& f) {
  ts::communication_recorder rec;
  f();
  return rec.report().size();
}

template <class Mesh, class Spec, std::size_t Rank, std::size_t Dim>
void dim_cases(const ts::device_mesh<Mesh>& m, std::mt19937_64& rng) {
  constexpr std::size_t shards = ts::layout<Mesh, Spec, Rank>::shards_along(Dim);
  std::uniform_int_distribution<std::size_t> e(1, 5);
  for (int trial = 0; trial < 3; ++trial) {
    ts::shape<Rank> s{};
    for (auto& v : s) v = e(rng);
    s[Dim] = ts_test::random_extent(rng, shards);
    INFO(Spec::to_string() << " dim " << Dim << " " << ts::to_string(s));
    const auto h = counting(s, 1);
    const auto x = ts::device_put<Spec>(m, h);

    // slice: a random range (empty ones included); the identity range communicates nothing
    const std::size_t start = std::uniform_int_distribution<std::size_t>(0, s[Dim])(rng);
    const std::size_t size = std::uniform_int_distribution<std::size_t>(0, s[Dim] - start)(rng);
    INFO("slice [" << start << ", " << start + size << ")");
    const auto plan = ts::slice_plan_of<Dim>(x, start, size);
    INFO(plan.describe());
    std::size_t ran = collectives_of([&] {
      const auto y = ts::slice_in_dim<Dim>(x, start, size);
      static_assert(std::is_same_v<typename decltype(y)::spec, typename decltype(x)::spec>);
      same(ts::to_host(y), window(h, Dim, static_cast<std::ptrdiff_t>(start), size));
    });
    CHECK(ran == plan.collectives() + 0);
    if (shards == 1) CHECK_FALSE(plan.communicates());
    CHECK_FALSE(ts::slice_plan_of<Dim>(x, 0, s[Dim]).communicates());

    // concat of three operands of different extents along Dim
    ts::shape<Rank> s2 = s;
    s2[Dim] = ts_test::random_extent(rng, shards);
    const auto h2 = counting(s2, 1000);
    const auto x2 = ts::device_put<Spec>(m, h2);
    const auto cplan = ts::concat_plan_of<Dim>(x, x2, x);
    INFO(cplan.describe());
    ran = collectives_of([&] {
      const auto c = ts::to_host(ts::concat<Dim>(x, x2, x));
      const std::size_t n = s[Dim], n2 = s2[Dim];
      same(ts::to_host(ts::slice_in_dim<Dim>(ts::device_put<ts::spec<>>(m, c), 0, n)), h);
      same(window(c, Dim, static_cast<std::ptrdiff_t>(n), n2), h2);
      same(window(c, Dim, static_cast<std::ptrdiff_t>(n + n2), n), h);
    });
    CHECK(ran == 3 * cplan.collectives());  // the gather runs once per operand
    CHECK(cplan.communicates() == (shards > 1));

    // split into 2 and 3 equal parts
    ts::shape<Rank> s6 = s;
    s6[Dim] = 6 * std::uniform_int_distribution<std::size_t>(0, 2)(rng);
    const auto h6 = counting(s6, 7);
    const auto x6 = ts::device_put<Spec>(m, h6);
    const auto halves = ts::split<Dim, 2>(x6);
    const auto thirds = ts::split<Dim, 3>(x6);
    for (std::size_t i = 0; i < 2; ++i)
      same(ts::to_host(halves[i]),
           window(h6, Dim, static_cast<std::ptrdiff_t>(i * s6[Dim] / 2), s6[Dim] / 2));
    for (std::size_t i = 0; i < 3; ++i)
      same(ts::to_host(thirds[i]),
           window(h6, Dim, static_cast<std::ptrdiff_t>(i * s6[Dim] / 3), s6[Dim] / 3));
    // the concatenation of the parts is the operand
    same(ts::to_host(ts::concat<Dim>(thirds[0], thirds[1], thirds[2])), h6);
  }
}

template <class Mesh, std::size_t Rank>
void check_mesh_rank(ts::cpu_devices& devices, std::mt19937_64& rng) {
  const ts::device_mesh<Mesh> m{devices};
  ts_test::for_each_spec<Mesh, Rank>([&]<class Spec, std::size_t I>() {
    [&]<std::size_t... D>(std::index_sequence<D...>) {
      (dim_cases<Mesh, Spec, Rank, D>(m, rng), ...);
    }(std::make_index_sequence<Rank>{});
  });
}

}  // namespace

TEST_CASE("slice_in_dim, split and concat agree with serial loops, every spec of ranks 1 to 3",
          "[slice][property]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{8};
  check_mesh_rank<mesh_2x2, 1>(devices, rng);
  check_mesh_rank<mesh_2x2, 2>(devices, rng);
  check_mesh_rank<mesh_2x2, 3>(devices, rng);
  check_mesh_rank<mesh_2x4, 1>(devices, rng);
  check_mesh_rank<mesh_2x4, 2>(devices, rng);
  check_mesh_rank<mesh_2x4, 3>(devices, rng);
}

TEST_CASE("slices: plans, static forms, unreduced operands, errors", "[slice]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m{devices};
  const auto h = counting(ts::shape<2>{6, 12}, 0);
  const auto x = ts::device_put<ts::spec<"x", "y">>(m, h);

  SECTION("a shifted range along a sharded dimension gathers it; an aligned one is local") {
    const auto p = ts::slice_plan_of<1>(x, 2, 5);
    CHECK(p.collectives() == 1);
    CHECK(p.steps[0].kind == ts::step_kind::all_gather);
    CHECK(p.describe().find("all_gather over 'y' along dimension 1") != std::string::npos);
    // 12 over 4 shards: blocks of 3; [0, 9) keeps blocks of 3 on the first three devices
    CHECK_FALSE(ts::slice_plan_of<1>(x, 0, 9).communicates());
    CHECK_FALSE(ts::slice_plan_of<0>(x, 0, 6).communicates());
    CHECK_FALSE(ts::slice_plan_of<0>(x, 1, 4).communicates());  // [1,3) and [3,5): held
    CHECK(ts::slice_plan_of<0>(x, 2, 4).communicates());
  }
  SECTION("static range: the extent in the type") {
    const auto y = ts::slice_in_dim<1, 3, 6>(x);
    static_assert(decltype(y)::extents_type::static_extents[1] == 6);
    same(ts::to_host(y), window(h, 1, 3, 6));
    const auto xs = ts::device_put<ts::spec<"x", "y">, ts::extents<6, 12>>(m, h);
    const auto parts = ts::split<1, 4>(xs);
    static_assert(std::tuple_size_v<decltype(parts)> == 4);
    static_assert(std::remove_cvref_t<decltype(parts[0])>::extents_type::static_extents[1] == 3);
    const auto c = ts::concat<0>(xs, xs);
    static_assert(decltype(c)::extents_type::static_extents[0] == 12);
    same(ts::to_host(parts[2]), window(h, 1, 6, 3));
  }
  SECTION("an unreduced operand stays unreduced (a slice is linear)") {
    const auto u = ts::sum<0>(  // rows summed over "x": unreduced over "x"
        ts::device_put<ts::spec<"x", ts::none, "y">>(m, counting(ts::shape<3>{4, 6, 12}, 0)));
    using U = decltype(u);
    static_assert(!U::unreduced_type::empty);
    auto reduced = [](const auto& v) { return ts::to_host(ts::reshard<ts::spec<>>(v)); };
    const auto r = reduced(u);
    const auto y = ts::slice_in_dim<1>(u, 1, 7);
    static_assert(std::is_same_v<typename decltype(y)::unreduced_type, typename U::unreduced_type>);
    same(reduced(y), window(r, 1, 1, 7));
    const auto c = reduced(ts::concat<0>(u, u));
    same(window(c, 0, 0, 6), r);
    same(window(c, 0, 6, 6), r);
  }
  SECTION("a range past the extent, parts that do not divide, extents that differ: shape_error") {
    CHECK_THROWS_AS(ts::slice_in_dim<1>(x, 10, 3), ts::shape_error);
    CHECK_THROWS_AS((ts::split<1, 5>(x)), ts::shape_error);
    const auto other = ts::device_put<ts::spec<"x", "y">>(m, counting(ts::shape<2>{5, 12}, 0));
    CHECK_THROWS_AS(ts::concat<1>(x, other), ts::shape_error);
  }
}

TEST_CASE("slices, split and concat on traced values: gradients against finite differences",
          "[slice][grad]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m{devices};
  const auto a = grad_test::random_tensor(ts::shape<3>{3, 7, 5}, 1);
  const auto b = grad_test::random_tensor(ts::shape<3>{3, 4, 5}, 2);
  auto slices = [](const auto& x) {
    return grad_test::sin_sum(ts::slice_in_dim<1>(x, 2, 4)) +
           grad_test::sin_sum(ts::slice_in_dim<1, 0, 3>(x) * 2.0);
  };
  auto parts = [](const auto& x) {
    const auto p = ts::split<0, 3>(x);
    return grad_test::sin_sum(p[0] * p[2] + p[1]);
  };
  auto joined = [](const auto& x, const auto& y) {
    return grad_test::sin_sum(ts::concat<1>(x, y, x));
  };
  using S1 = ts::spec<ts::none, "y", "x">;
  using S2 = ts::spec<ts::none, ts::axes("y", "x")>;
  using S3 = ts::spec<ts::none, ts::none, "y">;
  grad_test::check_gradients<S1>("slice, dim 1 over y", slices, m, a);
  grad_test::check_gradients<S2>("slice, dim 1 over (y, x)", slices, m, a);
  grad_test::check_gradients<S3>("slice, dim 1 unsharded", slices, m, a);
  grad_test::check_gradients<ts::spec<"x">>("split, dim 0 over x", parts, m, a);
  grad_test::check_gradients<ts::spec<"y", "x">>("split, dim 0 over y", parts, m, a);
  grad_test::check_gradients<S1, S1>("concat, dim 1 over y", joined, m, a, b);
  grad_test::check_gradients<S3, S3>("concat, dim 1 unsharded", joined, m, a, b);

  // a traced operand beside a plain one: the plain one gets nothing, the traced its slice
  const auto pb = ts::device_put<S1>(m, b);
  auto [loss, g] = ts::value_and_grad<0>([&](const auto& x) {
    return ts::sum(ts::concat<1>(pb, x) * 3.0);
  })(ts::device_put<S1>(m, a));
  (void)loss;
  const auto gh = grad_test::host_of(g);
  for (std::size_t i = 0; i < gh.size(); ++i) CHECK(gh.data()[i] == 3.0);
}

TEST_CASE("slices, split and concat on blocks inside shard_map: the block's own data",
          "[slice][block]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m{devices};
  using both = ts::spec<"x", "y">;
  // [4, 12] over (2, 4): blocks [2, 3]; each block's columns rotated by one (a split into
  // [2, 1] and [2, 2], joined the other way round), then its first row kept twice
  const auto h = counting(ts::shape<2>{4, 12}, 0);
  const auto f = ts::shard_map<mesh_2x4, both, both>([](const auto& b) {
    const auto first = ts::slice_in_dim<1>(b, 0, 1);
    const auto rest = ts::slice_in_dim<1>(b, 1, 2);
    const auto rotated = ts::concat<1>(rest, first);
    const auto rows = ts::split<0, 2>(rotated);
    return ts::concat<0>(rows[0], rows[0]);
  });
  const auto y = ts::to_host(f(ts::device_put<both>(m, h)));
  REQUIRE(y.extents() == ts::shape<2>{4, 12});
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 12; ++j) {
      const std::size_t row = (i / 2) * 2, col = (j / 3) * 3 + (j % 3 + 1) % 3;
      INFO(i << ", " << j);
      CHECK(y(i, j) == h(row, col));
    }
}
