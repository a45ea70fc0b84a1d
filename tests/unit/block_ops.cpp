// Blocks as first-class values inside ts::shard_map: broadcasting of blocks (y - mu of a
// [b, O] and a [1, O] block, an outer product of [b, 1] and [1, O]), reductions on blocks
// (ts::sum, ts::mean, ts::max, ts::min with dims and keep_dims: local, then a psum where the
// program asks for one), the model functions and ts::where on blocks; each against a serial
// loop over the same host data, on the (2,2) and (2,4) meshes, rows sharded and both
// dimensions sharded. Traced values: every reduction form arrays take (an output spec as a
// template argument or a value, keep_dims) differentiated against finite differences.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>

#include "grad_check.hpp"

namespace {

using namespace grad_test;

using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;
using rows = ts::spec<"x", ts::none>;

// A LayerNorm per row with the block operations (rows sharded over x: each device holds
// whole rows, so no collective), against the serial LayerNorm.
template <class Mesh>
void layer_norm_case(const ts::device_mesh<Mesh>& m, std::size_t r, std::size_t c,
                     unsigned seed) {
  INFO("layer norm " << r << "x" << c);
  const auto h = random_tensor(ts::shape<2>{r, c}, seed);
  const auto f = ts::shard_map<Mesh, rows, rows>([](const auto& b) {
    const auto mu = ts::mean<1>(b, ts::keep_dims);  // [b, 1]
    const auto d = b - mu;                           // broadcast: [b, O] - [b, 1]
    const auto var = ts::mean<-1>(d * d, ts::keep_dims);
    return d * ts::rsqrt(var + 1e-5);
  });
  const auto y = ts::to_host(f(ts::device_put<rows>(m, h)));
  for (std::size_t i = 0; i < r; ++i) {
    double mu = 0, var = 0;
    for (std::size_t j = 0; j < c; ++j) mu += h(i, j) / static_cast<double>(c);
    for (std::size_t j = 0; j < c; ++j)
      var += (h(i, j) - mu) * (h(i, j) - mu) / static_cast<double>(c);
    for (std::size_t j = 0; j < c; ++j)
      CHECK(close(y(i, j), (h(i, j) - mu) / std::sqrt(var + 1e-5), 1e-12));
  }
}

// Reductions over the sharded dimension: local, then the psum / pmax the program names.
template <class Mesh>
void sharded_reduction_case(const ts::device_mesh<Mesh>& m, std::size_t r, std::size_t c,
                            unsigned seed) {
  INFO("column reductions " << r << "x" << c);
  using both = ts::spec<"x", "y">;
  const auto h = random_tensor(ts::shape<2>{r, c}, seed);
  using outs = ts::specs<ts::spec<ts::none, "y">, ts::spec<ts::none, "y">, ts::spec<"x", "y">,
                         ts::spec<"x">, ts::spec<>>;
  const auto f = ts::shard_map<Mesh, both, outs>([](const auto& b) {
    const auto col = ts::psum<"x">(ts::sum<0>(b, ts::keep_dims));   // [1, c / y]
    const auto cmax = ts::pmax<"x">(ts::max<0>(b, ts::keep_dims));  // [1, c / y]
    // [b, 1] * [1, O]: both stretch
    const auto outer = ts::min<1>(b, ts::keep_dims) * ts::max<0>(b, ts::keep_dims);
    const auto rmax = ts::max<1>(b);                          // [b]: local along y only
    const auto total = ts::psum<"x", "y">(ts::sum(b));        // every dimension: rank 0
    static_assert(std::remove_cvref_t<decltype(rmax)>::rank == 1);
    static_assert(std::remove_cvref_t<decltype(total)>::rank == 0);
    return std::make_tuple(col, cmax, ts::where(b > col * (1.0 / 4), outer, b),
                           ts::pmax<"y">(rmax), total);
  });
  const auto [col, cmax, sel, rmax, total] = f(ts::device_put<both>(m, h));
  const auto hc = ts::to_host(col), hm = ts::to_host(cmax), hs = ts::to_host(sel);
  const auto hr = ts::to_host(rmax);
  const auto ht = ts::to_host(total);  // rank 0: another type than hr
  REQUIRE(hc.extents() == ts::shape<2>{1, c});
  REQUIRE(hr.extents() == ts::shape<1>{r});
  REQUIRE(ht.extents() == ts::shape<0>{});
  const std::size_t br = r / Mesh::template axis_size<"x">, bc = c / Mesh::template axis_size<"y">;
  double all = 0;
  for (std::size_t j = 0; j < c; ++j) {
    double s = 0, mx = -INFINITY;
    for (std::size_t i = 0; i < r; ++i) s += h(i, j), mx = std::max(mx, h(i, j));
    CHECK(close(hc(0, j), s, 1e-12));
    CHECK(hm(0, j) == mx);
    all += s;
    for (std::size_t i = 0; i < r; ++i) {
      // the block's own row min times its own column max
      const std::size_t i0 = i / br * br, j0 = j / bc * bc;
      double rmin = INFINITY, cm = -INFINITY;
      for (std::size_t k = j0; k < j0 + bc; ++k) rmin = std::min(rmin, h(i, k));
      for (std::size_t k = i0; k < i0 + br; ++k) cm = std::max(cm, h(k, j));
      CHECK(close(hs(i, j), h(i, j) > s / 4 ? rmin * cm : h(i, j), 1e-12));
    }
  }
  for (std::size_t i = 0; i < r; ++i)
    CHECK(hr(i) == *std::max_element(&h(i, 0), &h(i, 0) + c));
  CHECK(close(ht(), all, 1e-12));
}

TEST_CASE("blocks: broadcasting and local reductions, (2,2) and (2,4) meshes", "[shard_map]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x2> m22{devices};
  const ts::device_mesh<mesh_2x4> m24{devices};
  layer_norm_case(m22, 4, 5, 1);
  layer_norm_case(m24, 6, 3, 2);
  sharded_reduction_case(m22, 4, 6, 3);
  sharded_reduction_case(m24, 6, 8, 4);
  sharded_reduction_case(m24, 2, 4, 5);  // one row and one column per device
}

TEST_CASE("blocks: model functions and where, against the same functions on arrays",
          "[shard_map]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m{devices};
  using both = ts::spec<"x", "y">;
  const auto h = random_tensor(ts::shape<2>{4, 8}, 9);
  const auto x = ts::device_put<both>(m, h);
  const auto f = ts::shard_map<mesh_2x4, both, both>([](const auto& b) {
    return ts::sigmoid(b) + ts::softplus(b) + ts::gelu(b) + ts::gelu(b, false) +
           ts::rsqrt(b + 2.0) + ts::pow(b, 2.0) + ts::clip(b, -0.3, 0.3) +
           ts::where(ts::greater_equal(b, 0.0), b, -1.0) + ts::pow(b * b + 1.0, b) +
           (b < 0.5) + ts::not_equal(b, b);
  });
  const auto want = ts::sigmoid(x) + ts::softplus(x) + ts::gelu(x) + ts::gelu(x, false) +
                    ts::rsqrt(x + 2.0) + ts::pow(x, 2.0) + ts::clip(x, -0.3, 0.3) +
                    ts::where(ts::greater_equal(x, 0.0), x, -1.0) + ts::pow(x * x + 1.0, x) +
                    (x < 0.5) + ts::not_equal(x, x);
  CHECK(ts::to_host(f(x)) == ts::to_host(want));
}

TEST_CASE("blocks: argmax and argmin, local to the block (ties: the first)", "[shard_map]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m{devices};
  using both = ts::spec<"x", "y">;
  ts::host_tensor<double, 2> h({4, 8});
  for (std::size_t i = 0; i < h.size(); ++i) h.data()[i] = static_cast<double>((i * 7) % 5);
  const auto f = ts::shard_map<mesh_2x4, both, ts::specs<both, both>>([](const auto& b) {
    return std::make_tuple(ts::argmax<1>(b, ts::keep_dims), ts::argmin<-2>(b, ts::keep_dims));
  });
  const auto [amax, amin] = f(ts::device_put<both>(m, h));
  const auto hx = ts::to_host(amax), hn = ts::to_host(amin);
  REQUIRE(hx.extents() == ts::shape<2>{4, 4});  // [rows, one per block column]
  REQUIRE(hn.extents() == ts::shape<2>{2, 8});  // [one per block row, columns]
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t bj = 0; bj < 4; ++bj) {
      std::int64_t best = 0;
      for (std::size_t k = 1; k < 2; ++k)
        if (h(i, bj * 2 + k) > h(i, bj * 2 + static_cast<std::size_t>(best)))
          best = static_cast<std::int64_t>(k);
      CHECK(hx(i, bj) == best);
    }
  for (std::size_t bi = 0; bi < 2; ++bi)
    for (std::size_t j = 0; j < 8; ++j) {
      std::int64_t best = 0;
      for (std::size_t k = 1; k < 2; ++k)
        if (h(bi * 2 + k, j) < h(bi * 2 + static_cast<std::size_t>(best), j))
          best = static_cast<std::int64_t>(k);
      CHECK(hn(bi, j) == best);
    }
}

TEST_CASE("blocks: shapes that do not broadcast are a shape_error naming both", "[shard_map]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const auto f = ts::shard_map<mesh_2x2, rows, rows>([](const auto& b) {
    return b - ts::sum<0>(b, ts::keep_dims) +
           ts::sum<1>(b, ts::keep_dims) * ts::mean<0>(b, ts::keep_dims) - b(0, 0) +
           ts::max<0, 1>(b, ts::keep_dims) * 0.0 -
           (b * ts::min<1>(b, ts::keep_dims)) * 0.0;
  });
  CHECK_NOTHROW(f(ts::device_put<rows>(m, random_tensor(ts::shape<2>{4, 3}, 1))));
  const auto g = ts::shard_map<mesh_2x2, ts::specs<rows, rows>, rows>(
      [](const auto& a, const auto& b) { return a * b; });
  CHECK_THROWS_WITH(g(ts::device_put<rows>(m, random_tensor(ts::shape<2>{4, 3}, 1)),
                      ts::device_put<rows>(m, random_tensor(ts::shape<2>{4, 2}, 2))),
                    Catch::Contains("operator* of blocks of shapes (2, 3) and (2, 2)") &&
                        Catch::Contains("broadcast as NumPy's"));
}

// ---- traced values: every reduction form ----------------------------------------------------

// h: spec<"x", "y"> or spec<"x", none>; every term reduced to one replicated element.
const auto reductions = [](auto h) {
  using S = ts::spec<"x", ts::none>;
  const auto a = ts::mean<S, 1>(h, ts::keep_dims);        // [r, 1], reduced over y
  const auto b = ts::sum<1>(ts::spec<"x">{}, h);           // [r]
  const auto c = ts::sum<ts::spec<ts::none, "y">, 0>(h * h, ts::keep_dims);  // [1, c]
  const auto d = ts::mean<0>(ts::spec<ts::none, "y">{}, h, ts::keep_dims);
  auto one = [](const auto& v) { return ts::reshard<ts::spec<>>(sin_sum(v)); };
  return one(h * a) + one(b) + one(c) + one(d * h);
};

TEST_CASE("grad: every reduction form on traced values (output spec, keep_dims)", "[grad]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  check_gradients<ts::spec<"x", "y">>("reductions [x, y] 4x4", reductions, m,
                                      random_tensor(ts::shape<2>{4, 4}, 21));
  check_gradients<ts::spec<"x", ts::none>>("reductions [x, -] 3x5", reductions, m,
                                      random_tensor(ts::shape<2>{3, 5}, 22));
}

#if !defined(__clang__)
// g++ deduces void for a loss whose body does not compile, so ops/grad.hpp reports a loss
// that really returns nothing when it runs (clang: a rule-9 compile error).
TEST_CASE("grad: a loss that returns nothing is a usage_error when it runs (g++)", "[grad]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const auto x = ts::device_put<ts::spec<"x", "y">>(m, random_tensor(ts::shape<2>{2, 2}, 1));
  CHECK_THROWS_AS(ts::value_and_grad<0>([](auto w) { (void)w; })(x), ts::usage_error);
  CHECK_THROWS_WITH(ts::grad<0>([](auto w) { (void)w; })(x), Catch::Contains("returns nothing"));
}
#endif

}  // namespace
