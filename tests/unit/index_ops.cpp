// ts::iota, ts::one_hot, ts::argmax and ts::argmin (ops/indices.hpp) against serial loops over
// the same host data: ranks 1 to 3, the reduced dimension sharded over one axis, two axes or
// none, on the (2,2) and (2,4) meshes, random extents from 1 to 7 (uneven shards, and fewer
// elements than shards), data with many ties (the first index wins) and NaN (it wins, as in
// JAX); argmax on a value traced by ts::value_and_grad reads its forward value.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>

#include <typeshard/typeshard.hpp>

namespace {

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;

template <std::size_t Rank>
ts::host_tensor<double, Rank> tied_data(const ts::shape<Rank>& s, std::mt19937& gen, bool nan) {
  ts::host_tensor<double, Rank> t(s);
  std::uniform_int_distribution<int> v(0, 3);
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = v(gen);
  if (nan && t.size() > 2) t.data()[t.size() / 2] = NAN;
  return t;
}

// The serial arg-extremum along d of a row-major tensor: first index, NaN wins.
template <std::size_t Rank>
std::vector<std::int64_t> reference(const ts::host_tensor<double, Rank>& x, std::size_t d,
                                    bool max) {
  const auto& s = x.extents();
  std::size_t inner = 1;
  for (std::size_t k = d + 1; k < Rank; ++k) inner *= s[k];
  const std::size_t outer = x.size() / (inner * s[d]);
  std::vector<std::int64_t> out(outer * inner);
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t i = 0; i < inner; ++i) {
      std::int64_t best = 0;
      double bv = x.data()[o * s[d] * inner + i];
      for (std::size_t j = 1; j < s[d]; ++j) {
        const double v = x.data()[(o * s[d] + j) * inner + i];
        if (std::isnan(bv)) break;
        if (std::isnan(v) || (max ? v > bv : v < bv)) best = static_cast<std::int64_t>(j), bv = v;
      }
      out[o * inner + i] = best;
    }
  return out;
}

template <class Spec, int Dim, std::size_t Rank, class Mesh>
void arg_cases(const ts::device_mesh<Mesh>& m, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<std::size_t> e(1, 7);
  constexpr std::size_t d = static_cast<std::size_t>(Dim < 0 ? Dim + static_cast<int>(Rank) : Dim);
  for (int trial = 0; trial < 4; ++trial) {
    ts::shape<Rank> s{};
    for (auto& v : s) v = e(gen);
    const auto h = tied_data(s, gen, trial == 3);
    INFO(Spec::to_string() << " dim " << Dim << " " << ts::to_string(s));
    const auto x = ts::device_put<Spec>(m, h);
    const auto amax = ts::to_host(ts::argmax<Dim>(x));
    const auto amin = ts::to_host(ts::argmin<Dim>(x, ts::keep_dims));
    static_assert(std::is_same_v<typename decltype(amax)::value_type, std::int64_t>);
    const auto want_max = reference(h, d, true), want_min = reference(h, d, false);
    REQUIRE(amax.size() == want_max.size());
    REQUIRE(amin.size() == want_min.size());
    REQUIRE(amin.extents()[d] == 1);
    for (std::size_t i = 0; i < want_max.size(); ++i) {
      INFO("element " << i);
      CHECK(amax.data()[i] == want_max[i]);
      CHECK(amin.data()[i] == want_min[i]);
    }
  }
}

TEST_CASE("argmax and argmin over sharded dimensions, uneven, ties and NaN", "[ops]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x2> m22{devices};
  const ts::device_mesh<mesh_2x4> m24{devices};
  arg_cases<ts::spec<"x">, 0, 1>(m22, 1);
  arg_cases<ts::spec<ts::axes("y", "x")>, 0, 1>(m24, 2);
  arg_cases<ts::spec<"x", "y">, 1, 2>(m24, 3);
  arg_cases<ts::spec<"x", "y">, 0, 2>(m22, 4);
  arg_cases<ts::spec<ts::none, ts::axes("x", "y")>, -1, 2>(m24, 5);
  arg_cases<ts::spec<"y", ts::none, "x">, 1, 3>(m24, 6);
  arg_cases<ts::spec<"y", ts::none, "x">, 2, 3>(m22, 7);
}

TEST_CASE("iota and one_hot: local, any spec, uneven", "[ops]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m{devices};
  const auto i = ts::to_host(ts::iota<std::int64_t, ts::spec<"x", "y">, 1>(m, ts::shape<2>{3, 7}));
  const auto j = ts::to_host(ts::iota<float, ts::spec<ts::axes("y", "x")>>(m, ts::shape<1>{11}));
  for (std::size_t r = 0; r < 3; ++r)
    for (std::size_t c = 0; c < 7; ++c) CHECK(i(r, c) == static_cast<std::int64_t>(c));
  for (std::size_t c = 0; c < 11; ++c) CHECK(j(c) == static_cast<float>(c));
  const auto k =
      ts::to_host(ts::iota<int, ts::spec<ts::none, "y", "x">, 0>(m, ts::shape<3>{5, 3, 2}));
  for (std::size_t a = 0; a < 5; ++a) CHECK(k(a, 2, 1) == static_cast<int>(a));

  ts::host_tensor<int, 2> labels({3, 5});
  for (std::size_t n = 0; n < labels.size(); ++n) labels.data()[n] = static_cast<int>(n % 7) - 1;
  const auto l = ts::device_put<ts::spec<"y", "x">>(m, labels);
  const auto oh = ts::one_hot<double>(l, 5);
  static_assert(std::is_same_v<decltype(oh)::spec, ts::spec<"y", "x", ts::none>>);
  const auto h = ts::to_host(oh);
  REQUIRE(h.extents() == ts::shape<3>{3, 5, 5});
  for (std::size_t a = 0; a < 3; ++a)
    for (std::size_t b = 0; b < 5; ++b)
      for (std::size_t c = 0; c < 5; ++c)
        CHECK(h(a, b, c) == (labels(a, b) == static_cast<int>(c) ? 1.0 : 0.0));  // -1, 5: zeros
}

TEST_CASE("argmax of a traced value: the forward value's index", "[grad]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  ts::host_tensor<double, 2> h({2, 4}, {0, 3, 1, 3, 5, 4, -1, 2});
  const auto x = ts::device_put<ts::spec<"x", "y">>(m, h);
  std::int64_t seen[2] = {-1, -1};
  auto [l, g] = ts::value_and_grad<0>([&](auto w) {
    const auto k = ts::to_host(ts::argmax<1>(w));
    seen[0] = k(0), seen[1] = k(1);
    return ts::sum(w * w);
  })(x);
  (void)l, (void)g;
  CHECK(seen[0] == 1);
  CHECK(seen[1] == 0);
}

}  // namespace

TEST_CASE("take, one_hot and iota on blocks inside shard_map: the block's own rows",
          "[ops][block]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m{devices};
  ts::host_tensor<double, 2> rows({5, 8});  // row v, column c: 10 v + c
  for (std::size_t v = 0; v < 5; ++v)
    for (std::size_t c = 0; c < 8; ++c) rows(v, c) = 10.0 * double(v) + double(c);
  const ts::host_tensor<int, 1> ids({6}, {4, 0, 2, 7, -1, 3});  // 7 and -1: rows of zeros
  using cols = ts::spec<ts::none, "y">;
  using by_x = ts::spec<"x">;
  using xy = ts::spec<"x", "y">;
  const auto f = ts::shard_map<mesh_2x4, ts::specs<cols, by_x>,
                               ts::specs<xy, ts::spec<"x", ts::none>, xy>>(
      [](const auto& table, const auto& i) {
        return std::make_tuple(ts::take(table, i), ts::one_hot<double>(i, 5),
                               ts::iota<double, 1>(i.context(), ts::shape<2>{2, 3}));
      });
  const auto [looked, hot, counts] =
      f(ts::device_put<cols>(m, rows), ts::device_put<by_x>(m, ids));
  const auto k = ts::to_host(counts);  // each block [2, 3] counts its own columns
  REQUIRE(k.extents() == ts::shape<2>{4, 12});
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 12; ++j) CHECK(k(i, j) == double(j % 3));
  const auto e = ts::to_host(looked);
  const auto h = ts::to_host(hot);
  for (std::size_t i = 0; i < 6; ++i) {
    const bool in = ids(i) >= 0 && ids(i) < 5;
    for (std::size_t c = 0; c < 8; ++c)
      CHECK(e(i, c) == (in ? 10.0 * ids(i) + double(c) : 0.0));
    for (std::size_t v = 0; v < 5; ++v) CHECK(h(i, v) == (in && int(v) == ids(i) ? 1.0 : 0.0));
  }
}
