// shard_map's contract beyond the collectives: inputs as views (no copy, copy on write),
// outputs adopted without a copy, implicit reshard of mismatched or unreduced inputs,
// the context argument, several outputs, replication through an out spec, and the
// run-time errors (uneven dynamic extents, different device meshes, unequal output shapes,
// a throwing function).
#include <catch2/catch.hpp>

#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

namespace {

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using rows_x = ts::spec<"x", ts::none>;
using cols_x = ts::spec<ts::none, "x">;
using replicated = ts::spec<ts::none, ts::none>;

ts::host_tensor<int, 2> iota(std::size_t r, std::size_t c) {
  ts::host_tensor<int, 2> t({r, c});
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<int>(i);
  return t;
}

}  // namespace

TEST_CASE("shard_map: input blocks view the shards; output blocks become the shards", "[shard_map]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto host = iota(4, 6);
  const auto a = ts::device_put<rows_x>(m, host);
  std::vector<const int*> seen(4), made(4);
  std::vector<char> viewed(4);  // not vector<bool>: devices write their own elements concurrently
  const auto f = ts::shard_map<mesh_2x2, rows_x, rows_x>(
      [&](const ts::shard_context<mesh_2x2>& c, const auto& b) {
        using B = std::remove_cvref_t<decltype(b)>;
        static_assert(B::template varies_over<"x"> && !B::template varies_over<"y">);
        seen[c.position()] = b.data();
        viewed[c.position()] = !b.owns();
        auto out = b * 2;
        made[c.position()] = out.data();
        return out;
      });
  const auto r = f(a);
  for (std::size_t p = 0; p < 4; ++p) {
    CHECK(viewed[p]);
    CHECK(seen[p] == a.local_data(p).data());
    CHECK(made[p] == r.local_data(p).data());
  }
  auto twice = host;
  for (int& v : twice.values()) v *= 2;
  CHECK(ts::to_host(r) == twice);
}

TEST_CASE("shard_map: writing to an input block never changes the caller's array", "[shard_map]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto host = iota(4, 4);
  const auto a = ts::device_put<rows_x>(m, host);
  const auto f = ts::shard_map<mesh_2x2, rows_x, rows_x>([](auto b) {
    b(0, 0) = -1;  // copy on write: b is this function's own copy now
    return b;
  });
  const auto r = ts::to_host(f(a));
  CHECK(ts::to_host(a) == host);
  CHECK(r(0, 0) == -1);
  CHECK(r(2, 0) == -1);
  CHECK(r(1, 1) == host(1, 1));
}

TEST_CASE("shard_map: inputs of another spec are resharded first, as in JAX", "[shard_map]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto host = iota(4, 8);
  const auto a = ts::device_put<rows_x>(m, host);  // P('x', None), the in spec is P(None, 'x')
  std::vector<ts::shape<2>> shapes(4);
  const auto f = ts::shard_map<mesh_2x2, cols_x, cols_x>(
      [&](const ts::shard_context<mesh_2x2>& c, const auto& b) {
        shapes[c.position()] = b.extents();
        return b + b;
      });
  const auto r = f(a);
  static_assert(std::is_same_v<decltype(r)::spec, cols_x>);
  for (const auto& s : shapes) CHECK(s == ts::shape<2>{4, 4});
  auto twice = host;
  for (int& v : twice.values()) v *= 2;
  CHECK(ts::to_host(r) == twice);
}

TEST_CASE("shard_map: an unreduced input is reduced to the in spec first", "[shard_map][unreduced]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  // Partial sums over "y": position p holds (p + 1) * value; the value is their sum over y.
  const ts::shape<2> extents{4, 4};
  using partial = ts::sharded_array<int, mesh_2x2, rows_x, ts::dextents<2>, ts::unreduced<"y">>;
  std::vector<ts::detail::buffer<int>> blocks;
  for (std::size_t p = 0; p < 4; ++p) {
    const auto ix = partial::layout_type::index(extents, p);
    ts::detail::buffer<int> b(ix[0].size() * ix[1].size());
    for (std::size_t i = 0; i < ix[0].size(); ++i)
      for (std::size_t j = 0; j < 4; ++j)
        b.data()[i * 4 + j] = static_cast<int>((p + 1) * ((ix[0].start + i) * 4 + j));
    blocks.push_back(std::move(b));
  }
  const partial u(ts::adopt_shards, m, extents, std::move(blocks));
  const auto f = ts::shard_map<mesh_2x2, rows_x, rows_x>([](const auto& b) { return b; });
  const auto r = ts::to_host(f(u));
  // Positions 0, 1 (x = 0) hold 1x and 2x; positions 2, 3 (x = 1) hold 3x and 4x.
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 4; ++j) CHECK(r(i, j) == static_cast<int>((i < 2 ? 3 : 7) * (i * 4 + j)));
}

TEST_CASE("shard_map: several outputs, and an out spec over an invariant axis",
          "[shard_map]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto a = ts::device_put<rows_x>(m, iota(4, 2));
  const auto f = ts::shard_map<mesh_2x2, rows_x, ts::specs<rows_x, ts::spec<"y", ts::none>>>(
      [](const auto& b) { return std::make_tuple(b, ts::all_gather<"x">(b, 0)); });
  const auto [same, gathered] = f(a);
  CHECK(ts::to_host(same) == iota(4, 2));
  // all_gather over x is invariant over x and y; P('y', None) concatenates the y copies.
  const auto g = ts::to_host(gathered);
  REQUIRE(g.extents() == ts::shape<2>{8, 2});
  for (std::size_t i = 0; i < 8; ++i)
    for (std::size_t j = 0; j < 2; ++j) CHECK(g(i, j) == iota(4, 2)(i % 4, j));
}

TEST_CASE("shard_map: blocks built inside f, and pvary", "[shard_map]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto a = ts::device_put<rows_x>(m, iota(4, 2));
  const auto f = ts::shard_map<mesh_2x2, rows_x, ts::spec<"x", "y">>(
      [](const ts::shard_context<mesh_2x2>& c, const auto& b) {
        // A constant block: invariant over every axis until marked otherwise.
        const ts::block<int, 2, mesh_2x2> ones(c, ts::host_tensor<int, 2>({1, 2}, 1));
        static_assert(decltype(ones)::varying == 0);
        auto sum = ts::zip(b, ts::all_gather<"x">(ts::pvary<"x">(ones), 0), [](int x, int y) {
          return x + y;
        });
        static_assert(decltype(sum)::varying == ts::vary<mesh_2x2, "x">);
        for (std::size_t i = 0; i < 2; ++i)
          for (std::size_t j = 0; j < 2; ++j)
            if (sum(i, j) != b(i, j) + 1) throw std::logic_error("zip with a constant block");
        // Columns per y coordinate: tagged with y, so it varies over y.
        const auto y = ts::pvary<"y">(b);
        static_assert(std::remove_cvref_t<decltype(y)>::varying == ts::vary<mesh_2x2, "x", "y">);
        auto out = ts::map(y, [](int v) { return v; });
        return ts::psum_scatter<"y">(ts::all_gather<"y">(out, 1), 1);
      });
  // all_gather over y of equal blocks gives [b | b]; psum_scatter over y sums the two
  // devices' copies and keeps one half: 2 b on every device, which P('x', 'y') lays side
  // by side.
  const auto r = ts::to_host(f(a));
  REQUIRE(r.extents() == ts::shape<2>{4, 4});
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 4; ++j) CHECK(r(i, j) == 2 * iota(4, 2)(i, j % 2));
}

TEST_CASE("shard_map: axis_index tags each device with its coordinates", "[shard_map]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices, {3, 2, 1, 0}};
  const auto a = ts::device_put<ts::spec<"x", "y">>(m, iota(2, 2));
  const auto f = ts::shard_map<mesh_2x2, ts::spec<"x", "y">, ts::spec<"x", "y">>(
      [](const ts::shard_context<mesh_2x2>& c, const auto& b) {
        auto out = b;
        out(0, 0) = static_cast<int>(100 * c.device() + 10 * ts::axis_index<"x">(b) +
                                     ts::axis_index<"y">(b));
        return out;
      });
  const auto r = ts::to_host(f(a));
  CHECK(r(0, 0) == 300);
  CHECK(r(0, 1) == 201);
  CHECK(r(1, 0) == 110);
  CHECK(r(1, 1) == 11);
}

TEST_CASE("shard_map: uneven dynamic extents are a shape_error naming the numbers", "[shard_map]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto a = ts::device_put<ts::spec<ts::none, ts::axes("x", "y")>>(m, iota(3, 10));
  const auto f = ts::shard_map<mesh_2x2, ts::spec<ts::none, ts::axes("x", "y")>,
                               ts::spec<ts::none, ts::axes("x", "y")>>([](const auto& b) { return b; });
  try {
    (void)f(a);
    FAIL("no exception");
  } catch (const ts::shape_error& e) {
    const std::string what = e.what();
    CHECK(what.rfind("typeshard: ", 0) == 0);
    CHECK(what.find("dimension 1 has extent 10") != std::string::npos);
    CHECK(what.find("4 shards over 'x' (2) x 'y' (2)") != std::string::npos);
  }
}

TEST_CASE("shard_map: arguments on different device meshes are a device_mesh_error", "[shard_map]") {
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_2x2> low{devices, {0, 1, 2, 3}};
  ts::device_mesh<mesh_2x2> high{devices, {4, 5, 6, 7}};
  const auto a = ts::device_put<rows_x>(low, iota(4, 4));
  const auto b = ts::device_put<rows_x>(high, iota(4, 4));
  const auto f = ts::shard_map<mesh_2x2, ts::specs<rows_x, rows_x>, rows_x>(
      [](const auto& x, const auto& y) { return x + y; });
  CHECK_THROWS_AS(f(a, b), ts::device_mesh_error);
  CHECK_THROWS_WITH(f(a, b), Catch::Contains("on devices [0, 1, 2, 3]") &&
                                 Catch::Contains("on devices [4, 5, 6, 7]"));
  CHECK(ts::to_host(f(b, b)) == ts::to_host(b + b));
}

TEST_CASE("shard_map: devices returning blocks of different shapes is a shape_error", "[shard_map]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto a = ts::device_put<ts::spec<ts::none, ts::axes("x", "y")>>(m, iota(3, 4));
  // psum_scatter of an extent of 3 over 2 devices: slices of 2 and 1.
  const auto f = ts::shard_map<mesh_2x2, ts::spec<ts::none, ts::axes("x", "y")>,
                               ts::spec<ts::axes("x", "y"), ts::none>>(
      [](const auto& b) { return ts::psum_scatter<"y">(b, 0); });
  CHECK_THROWS_AS(f(a), ts::shape_error);
}

TEST_CASE("shard_map: a function that throws on one device reaches the caller; the pool stays usable",
          "[shard_map]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto a = ts::device_put<rows_x>(m, iota(4, 4));
  const auto f = ts::shard_map<mesh_2x2, rows_x, rows_x>(
      [](const ts::shard_context<mesh_2x2>& c, const auto& b) {
        if (c.position() == 2) throw std::runtime_error("bad block");
        return ts::psum<"y">(b);  // the others wait for their peers here
      });
  try {
    (void)f(a);
    FAIL("no exception");
  } catch (const ts::device_error& e) {
    CHECK(e.device() == 2);
    CHECK(std::string(e.what()).find("bad block") != std::string::npos);
  }
  const auto g = ts::shard_map<mesh_2x2, rows_x, rows_x>([](const auto& b) { return ts::psum<"y">(b); });
  auto twice = iota(4, 4);
  for (int& v : twice.values()) v *= 2;
  CHECK(ts::to_host(g(a)) == twice);
}
