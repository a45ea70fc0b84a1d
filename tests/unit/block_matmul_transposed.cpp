// Block-level ts::matmul with transposed views, ts::transpose(x), inside ts::shard_map on a
// 2x2 mesh, against serial products of the same data: the backward pass of a linear layer
// (x^T . dz and dz . W^T, then psum), both operands transposed, a batched block times a
// transposed matrix; float and double (kernels::gemm with its trans flags) and int (the
// scalar loop). Also the view itself (extents, element access, eval(), the transpose of a
// transpose, varying axes), k = 0, and the shape errors, whose messages name the transposed
// shapes. Device functions record what they see; Catch2 checks it afterwards on this thread
// (its assertions are not thread-safe).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <exception>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

namespace {

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using rows_x = ts::spec<"x", ts::none>;
using rows_y = ts::spec<"y", ts::none>;
using cols_x = ts::spec<ts::none, "x">;
using cols_y = ts::spec<ts::none, "y">;
using xy = ts::spec<"x", "y">;
using replicated = ts::spec<ts::none, ts::none>;

unsigned seed() {
  static const unsigned s = std::random_device{}();
  return s;
}

template <class T, std::size_t R>
ts::host_tensor<T, R> random(const ts::shape<R>& extents, std::mt19937& rng) {
  ts::host_tensor<T, R> t(extents);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<T> d(T(-1), T(1));
    for (T& v : t.values()) v = d(rng);
  } else {
    std::uniform_int_distribution<int> d(-9, 9);
    for (T& v : t.values()) v = static_cast<T>(d(rng));
  }
  return t;
}

template <class T>
ts::host_tensor<T, 2> transposed_copy(const ts::host_tensor<T, 2>& a) {
  ts::host_tensor<T, 2> t({a.extent(1), a.extent(0)});
  for (std::size_t i = 0; i < a.extent(0); ++i)
    for (std::size_t j = 0; j < a.extent(1); ++j) t(j, i) = a(i, j);
  return t;
}

// The serial reference, accumulated in double (exact for the small ints used here).
template <class T>
ts::host_tensor<T, 2> serial_matmul(const ts::host_tensor<T, 2>& a,
                                    const ts::host_tensor<T, 2>& b) {
  ts::host_tensor<T, 2> c({a.extent(0), b.extent(1)});
  for (std::size_t i = 0; i < a.extent(0); ++i)
    for (std::size_t j = 0; j < b.extent(1); ++j) {
      double acc = 0;
      for (std::size_t p = 0; p < a.extent(1); ++p) acc += double(a(i, p)) * double(b(p, j));
      c(i, j) = static_cast<T>(acc);
    }
  return c;
}

template <class T, std::size_t R>
void require_close(const ts::host_tensor<T, R>& got, const ts::host_tensor<T, R>& want) {
  REQUIRE(got.extents() == want.extents());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": " << got.data()[i] << " vs " << want.data()[i]);
    if constexpr (std::is_floating_point_v<T>)
      REQUIRE(std::abs(got.data()[i] - want.data()[i]) <=
              T(1e-4) * (T(1) + std::abs(want.data()[i])));
    else
      REQUIRE(got.data()[i] == want.data()[i]);
  }
}

// Runs `call` and checks that it fails with a device_error wrapping a shape_error whose
// message is `message`.
template <class F>
void check_shape_error(F call, const std::string& message) {
  try {
    (void)call();
    FAIL("no exception");
  } catch (const ts::device_error& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(message) != std::string::npos);
    CHECK_THROWS_AS(e.rethrow_nested(), ts::shape_error);
  }
}

// A program's own transpose helper, called unqualified on blocks (benchmarks/soak.cpp has
// one): ts::transpose is a function object, so argument-dependent lookup does not pick it
// over this one.
template <class B>
B transpose(const B& b) {
  return ts::transpose(b).eval();
}

}  // namespace

TEMPLATE_TEST_CASE("block matmul: a linear layer's backward pass through transposed views",
                   "[block][matmul][transpose]", float, double, int) {
  using T = TestType;
  INFO("seed " << seed());
  std::mt19937 rng(seed());
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  // x [batch, d_in] split over "x" (data parallel), W [d_in, d_out] over "y" (its columns),
  // dz [batch, d_out] over both: blocks of x are 5 x 3, of W 3 x 7, of dz 5 x 7.
  const auto x_host = random<T>(ts::shape<2>{10, 3}, rng);
  const auto w_host = random<T>(ts::shape<2>{3, 14}, rng);
  const auto dz_host = random<T>(ts::shape<2>{10, 14}, rng);
  const auto x = ts::device_put<rows_x>(m, x_host);
  const auto w = ts::device_put<cols_y>(m, w_host);
  const auto dz = ts::device_put<xy>(m, dz_host);

  SECTION("dW = x^T . dz: each device's partial sum over its batch rows, psum over x") {
    std::vector<ts::shape<2>> seen(4);
    const auto dw = ts::shard_map<mesh_2x2, ts::specs<rows_x, xy>, cols_y>(
        [&](const ts::shard_context<mesh_2x2>& c, const auto& xb, const auto& dzb) {
          const auto xt = ts::transpose(xb);
          seen[c.position()] = xt.extents();
          const auto partial = ts::matmul(xt, dzb);  // [3, 5] . [5, 7]: a sum over the batch
          using P = std::remove_cvref_t<decltype(partial)>;
          static_assert(P::template varies_over<"x"> && P::template varies_over<"y">);
          return ts::psum<"x">(partial);
        })(x, dz);
    for (const auto& s : seen) CHECK(s == ts::shape<2>{3, 5});
    require_close(ts::to_host(dw), serial_matmul(transposed_copy(x_host), dz_host));
  }

  SECTION("dx = dz . W^T: a partial sum over each device's d_out columns, psum over y") {
    const auto dx = ts::shard_map<mesh_2x2, ts::specs<xy, cols_y>, rows_x>(
        [](const auto& dzb, const auto& wb) {
          return ts::psum<"y">(ts::matmul(dzb, ts::transpose(wb)));  // [5, 7] . [7, 3]
        })(dz, w);
    require_close(ts::to_host(dx), serial_matmul(dz_host, transposed_copy(w_host)));
  }

  SECTION("both operands transposed: dz^T . x, with x given as x^T") {
    const auto xt = ts::device_put<cols_x>(m, transposed_copy(x_host));  // blocks [3, 5]
    const auto r = ts::shard_map<mesh_2x2, ts::specs<xy, cols_x>, rows_y>(
        [](const auto& dzb, const auto& xtb) {
          // [7, 5] . [5, 3], a partial sum over the batch rows of this device
          return ts::psum<"x">(ts::matmul(ts::transpose(dzb), ts::transpose(xtb)));
        })(dz, xt);
    require_close(ts::to_host(r), serial_matmul(transposed_copy(dz_host), x_host));
  }

  SECTION("a view and its eval() give the same product") {
    const auto diff = ts::shard_map<mesh_2x2, ts::specs<xy, cols_y>, xy>(
        [](const auto& dzb, const auto& wb) {
          const auto by_view = ts::matmul(dzb, ts::transpose(wb));
          const auto by_copy = ts::matmul(dzb, ts::transpose(wb).eval());
          return by_view - by_copy;  // [5, 3] per device
        })(dz, w);
    require_close(ts::to_host(diff), ts::host_tensor<T, 2>({10, 6}, T(0)));
  }
}

TEMPLATE_TEST_CASE("block matmul: a batched block times a transposed matrix",
                   "[block][matmul][transpose]", float, int) {
  using T = TestType;
  INFO("seed " << seed());
  std::mt19937 rng(seed() + 1);
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto a_host = random<T>(ts::shape<3>{4, 3, 5}, rng);  // blocks [2, 3, 5] over x
  const auto w_host = random<T>(ts::shape<2>{6, 5}, rng);     // replicated, read as [5, 6]
  const auto a = ts::device_put<ts::spec<"x">>(m, a_host);
  const auto w = ts::device_put<replicated>(m, w_host);
  const auto r = ts::shard_map<mesh_2x2, ts::specs<ts::spec<"x">, replicated>, ts::spec<"x">>(
      [](const auto& ab, const auto& wb) { return ts::matmul(ab, ts::transpose(wb)); })(a, w);
  const auto got = ts::to_host(r);
  REQUIRE(got.extents() == ts::shape<3>{4, 3, 6});
  const auto wt = transposed_copy(w_host);
  for (std::size_t b = 0; b < 4; ++b) {
    ts::host_tensor<T, 2> slice({3, 5}), got_slice({3, 6});
    for (std::size_t i = 0; i < 3; ++i) {
      for (std::size_t p = 0; p < 5; ++p) slice(i, p) = a_host(b, i, p);
      for (std::size_t j = 0; j < 6; ++j) got_slice(i, j) = got(b, i, j);
    }
    INFO("batch " << b);
    require_close(got_slice, serial_matmul(slice, wt));
  }
}

TEST_CASE("block transpose: the view's extents, elements, eval(), and transpose of a transpose",
          "[block][transpose]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  ts::host_tensor<int, 2> host({4, 6});
  for (std::size_t i = 0; i < host.size(); ++i) host.data()[i] = static_cast<int>(i);
  const auto a = ts::device_put<rows_x>(m, host);  // blocks [2, 6]
  std::vector<char> ok(4);  // not vector<bool>: devices write their own elements concurrently
  const auto r = ts::shard_map<mesh_2x2, rows_x, cols_x>(
      [&](const ts::shard_context<mesh_2x2>& c, const auto& b) {
        using B = std::remove_cvref_t<decltype(b)>;
        const auto t = ts::transpose(b);
        using V = decltype(t);
        static_assert(std::is_same_v<typename V::base_type, B> && V::rank == 2);
        static_assert(V::varying == B::varying && V::template varies_over<"x"> &&
                      !V::template varies_over<"y">);
        static_assert(ts::transposed_block<V> && !ts::block_like<V>);
        static_assert(std::is_same_v<decltype(ts::transpose(t)), const B&>);
        bool good = t.extents() == ts::shape<2>{6, 2} && t.extent(0) == 6 && t.extent(1) == 2 &&
                    t.size() == 12 && &t.base() == &b && &ts::transpose(t) == &b &&
                    &t.context() == &b.context();
        const B e = t.eval();
        good = good && e.owns() && e.extents() == ts::shape<2>{6, 2};
        for (std::size_t i = 0; i < 6; ++i)
          for (std::size_t j = 0; j < 2; ++j)
            good = good && t(i, j) == b(j, i) && e(i, j) == b(j, i);
        ok[c.position()] = good;
        return e;  // the transposed row blocks, side by side: the global transpose
      })(a);
  for (char g : ok) CHECK(g);
  CHECK(ts::to_host(r) == transposed_copy(host));
}

TEST_CASE("block transpose: eval() of blocks larger than its 32 x 32 tiles, and of empty ones",
          "[block][transpose]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  ts::host_tensor<double, 2> host({2 * 37, 70});
  for (std::size_t i = 0; i < host.size(); ++i) host.data()[i] = double(i);
  const auto a = ts::device_put<rows_x>(m, host);
  const auto r = ts::shard_map<mesh_2x2, rows_x, cols_x>(
      [](const auto& b) { return ts::transpose(b).eval(); })(a);
  CHECK(ts::to_host(r) == transposed_copy(host));

  std::vector<ts::shape<2>> seen(4);
  const auto z = ts::shard_map<mesh_2x2, rows_x, replicated>(
      [&](const ts::shard_context<mesh_2x2>& c, const auto&) {
        const ts::block<float, 2, mesh_2x2> empty(c, {0, 3});
        seen[c.position()] = ts::transpose(empty).eval().extents();
        // k = 0: [3, 0] . [0, 2] is a 3 x 2 block of zeros
        return ts::matmul(ts::transpose(empty), ts::block<float, 2, mesh_2x2>(c, {0, 2}));
      })(a);
  for (const auto& s : seen) CHECK(s == ts::shape<2>{3, 0});
  CHECK(ts::to_host(z) == ts::host_tensor<float, 2>({3, 2}, 0.0f));
}

TEST_CASE("block matmul: a product with views varies over the union of the blocks' axes",
          "[block][matmul][transpose]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto a = ts::device_put<rows_x>(m, ts::host_tensor<float, 2>({4, 3}, 1.0f));  // [2, 3]
  const auto b = ts::device_put<cols_y>(m, ts::host_tensor<float, 2>({3, 4}, 2.0f));  // [3, 2]
  const auto r = ts::shard_map<mesh_2x2, ts::specs<rows_x, cols_y>, xy>(
      [](const auto& ab, const auto& bb) {
        const auto c = ts::matmul(ts::transpose(bb), ts::transpose(ab));  // [2, 3] . [3, 2]
        using C = std::remove_cvref_t<decltype(c)>;
        static_assert(C::varying == ts::vary<mesh_2x2, "x", "y">);
        using D = decltype(ts::matmul(ts::transpose(ab), ab));  // x only
        static_assert(D::varying == ts::vary<mesh_2x2, "x"> && D::rank == 2);
        return c;
      })(a, b);
  CHECK(ts::to_host(r) == ts::host_tensor<float, 2>({4, 4}, 6.0f));
}

TEST_CASE("block matmul: mismatched transposed operands are a shape_error naming the "
          "transposed shapes", "[block][matmul][transpose]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto x = ts::device_put<rows_x>(m, ts::host_tensor<float, 2>({10, 3}, 1.0f));  // [5, 3]
  const auto dz = ts::device_put<xy>(m, ts::host_tensor<float, 2>({10, 14}, 1.0f));    // [5, 7]
  const auto k = ts::device_put<rows_x>(m, ts::host_tensor<int, 2>({10, 3}, 1));       // [5, 3]
  using in = ts::specs<rows_x, xy>;

  check_shape_error(
      [&] {
        return ts::shard_map<mesh_2x2, in, xy>([](const auto& xb, const auto& dzb) {
          return ts::matmul(ts::transpose(dzb), ts::transpose(xb));  // [7, 5] . [3, 5]
        })(x, dz);
      },
      "typeshard: matmul of blocks of shapes (7, 5) (transposed) and (3, 5) (transposed): "
      "contracting extents 5 and 3 differ");
  check_shape_error(
      [&] {
        return ts::shard_map<mesh_2x2, in, xy>([](const auto& xb, const auto& dzb) {
          return ts::matmul(dzb, ts::transpose(xb));  // [5, 7] . [3, 5]
        })(x, dz);
      },
      "typeshard: matmul of blocks of shapes (5, 7) and (3, 5) (transposed): contracting "
      "extents 7 and 3 differ");
  check_shape_error(
      [&] {
        return ts::shard_map<mesh_2x2, in, xy>([](const auto& xb, const auto& dzb) {
          return ts::matmul(ts::transpose(dzb), ts::transpose(xb).eval());  // [7, 5] . [3, 5]
        })(x, dz);
      },
      "typeshard: matmul of blocks of shapes (7, 5) (transposed) and (3, 5): contracting "
      "extents 5 and 3 differ");
  check_shape_error(
      [&] {
        return ts::shard_map<mesh_2x2, ts::specs<rows_x, rows_x>, rows_x>(
            [](const auto& kb, const auto& xb) {
              (void)xb;
              return ts::matmul(ts::transpose(kb), ts::transpose(kb));  // [3, 5] . [3, 5]
            })(k, x);
      },
      "typeshard: matmul of blocks of shapes (3, 5) (transposed) and (3, 5) (transposed): "
      "contracting extents 5 and 3 differ");
}

TEST_CASE("block transpose: a program's own unqualified transpose(block) is still called",
          "[block][transpose]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  ts::host_tensor<float, 2> host({4, 3});
  for (std::size_t i = 0; i < host.size(); ++i) host.data()[i] = float(i);
  const auto a = ts::device_put<rows_x>(m, host);
  const auto r = ts::shard_map<mesh_2x2, rows_x, cols_x>([](const auto& b) {
    using B = std::remove_cvref_t<decltype(b)>;
    static_assert(std::is_same_v<decltype(transpose(b)), B>);  // the helper above, a block
    return transpose(b);
  })(a);
  CHECK(ts::to_host(r) == transposed_copy(host));
}
