// ts::value_and_grad through ts::sum and ts::mean (over sharded and unsharded dimensions,
// keep_dims, every dimension), ts::softmax and ts::log_softmax (along a sharded dimension:
// their backward's row sum is a psum), ts::layer_norm (its fused backward, along sharded and
// unsharded dimensions), ts::reshard (the reverse reshard: all_gather <-> slice,
// all_to_all <-> all_to_all back), ts::psum (the identity) and the dimension moves
// (ts::permute, ts::transpose, ts::split_dim, ts::merge_dims) on the (2,2) mesh: gradients
// against central finite differences (double) and the replicated (serial) run, even and
// uneven extents.
#include "grad_check.hpp"

namespace {

using namespace grad_test;
using ts::none;

using xy = ts::spec<"x", "y">;

TEST_CASE("grad: sum and mean", "[grad]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  for (const ts::shape<2> s : {ts::shape<2>{4, 4}, ts::shape<2>{3, 5}}) {
    const auto x = random_tensor(s, 1);
    check_gradients<xy>("sum<1>", [](auto v) { return sin_sum(ts::sum<1>(v)); }, m, x);
    check_gradients<xy>("mean<0> keep_dims", [](auto v) {
      auto s = ts::mean<0>(v, ts::keep_dims);  // unreduced over "x": reduce, then broadcast
      return sin_sum(ts::reshard<typename decltype(s)::spec>(s) * v);
    }, m, x);
    check_gradients<ts::spec<ts::axes("y", "x")>>(
        "mean of everything", [](auto v) { return ts::mean(ts::exp(v)); }, m, x);
    check_gradients<xy>("sum<-1> with an output spec",
                        [](auto v) { return sin_sum(ts::sum<ts::spec<"x">, -1>(v)); }, m, x);
  }
  const auto x3 = random_tensor(ts::shape<3>{2, 3, 5}, 2);
  check_gradients<ts::spec<none, "x", "y">>(
      "sum<0, 2>", [](auto v) { return sin_sum(ts::sum<0, 2>(v)); }, m, x3);
}

TEST_CASE("grad: layer_norm along sharded and unsharded dimensions", "[grad]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  for (const ts::shape<2> s : {ts::shape<2>{4, 4}, ts::shape<2>{3, 5}}) {
    const auto x = random_tensor(s, 5);
    check_gradients<xy>("layer_norm<-1> (a psum over y)",
                        [](auto v) { return sin_sum(ts::layer_norm<-1>(v, 1e-5) * 3.0); }, m, x);
    check_gradients<ts::spec<"x">>("layer_norm<1> (local)",
                                   [](auto v) { return sin_sum(ts::layer_norm<1>(v) * 3.0); }, m,
                                   x);
  }
  const auto x3 = random_tensor(ts::shape<3>{3, 5, 2}, 6);
  check_gradients<ts::spec<none, ts::axes("x", "y")>>(
      "rank 3: layer_norm<1> over x and y", [](auto v) { return sin_sum(ts::layer_norm<1>(v)); },
      m, x3);
  check_gradients<ts::spec<"y", none, "x">>(
      "rank 3: layer_norm<2> over x", [](auto v) { return sin_sum(ts::layer_norm<2>(v) * v); }, m,
      x3);
}

TEST_CASE("grad: softmax and log_softmax along a sharded dimension", "[grad]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  for (const ts::shape<2> s : {ts::shape<2>{4, 4}, ts::shape<2>{3, 5}}) {
    const auto x = random_tensor(s, 3);
    check_gradients<xy>("softmax", [](auto v) { return sin_sum(ts::softmax(v)); }, m, x);
    check_gradients<xy>("log_softmax<0>", [](auto v) { return sin_sum(ts::log_softmax<0>(v)); },
                        m, x);
  }
}

TEST_CASE("grad: reshard and psum", "[grad]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  for (const ts::shape<2> s : {ts::shape<2>{4, 4}, ts::shape<2>{3, 5}}) {
    const auto x = random_tensor(s, 4);
    check_gradients<ts::spec<"x", none>>(
        "all_to_all", [](auto v) { return sin_sum(ts::reshard<ts::spec<none, "x">>(v)); }, m, x);
    check_gradients<xy>("all_gather",
                        [](auto v) { return sin_sum(ts::reshard<ts::spec<>>(v) * v); }, m, x);
    check_gradients<ts::spec<>>("slice", [](auto v) { return sin_sum(ts::reshard<xy>(v)); }, m, x);
    // psum's backward is the identity: the same gradient as the reshard that reduces alike
    // (checked against finite differences above: "sum<1>").
    const auto with_psum = [](auto v) { return sin_sum(ts::psum<"y">(ts::sum<1>(v))); };
    const auto with_reshard = [](auto v) { return sin_sum(ts::reshard<ts::spec<"x">>(ts::sum<1>(v))); };
    const auto X = ts::device_put<xy>(m, x);
    const auto g1 = host_of(ts::grad(with_psum)(X));
    const auto g2 = host_of(ts::grad(with_reshard)(X));
    for (std::size_t k = 0; k < g1.size(); ++k) CHECK(close(g1.data()[k], g2.data()[k], 1e-12));
  }
}

TEST_CASE("grad: permute, split_dim, merge_dims", "[grad]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  for (std::size_t n : {4, 5}) {
    const auto x3 = random_tensor(ts::shape<3>{2, n, 4}, 5);
    check_gradients<ts::spec<"x", none, "y">>(
        "permute<2, 0, 1>",
        [](auto v) { return sin_sum(ts::permute<2, 0, 1>(v) * ts::permute<2, 0, 1>(ts::exp(v))); },
        m, x3);
    check_gradients<ts::spec<"x", none, none>>(
        "merge_dims<1>", [](auto v) { return sin_sum(ts::merge_dims<1>(ts::exp(v))); }, m, x3);
  }
  const auto x2 = random_tensor(ts::shape<2>{4, 6}, 6);
  check_gradients<ts::spec<none, "x">>(
      "split_dim<1, 2>", [](auto v) { return sin_sum(ts::split_dim<1, 2>(ts::exp(v))); }, m, x2);
  // ts::transpose of a traced value: permute<1, 0> (it did not compile before: issue 17).
  check_gradients<ts::spec<"x", "y">>(
      "transpose", [](auto v) { return sin_sum(ts::transpose(ts::exp(v)) * ts::transpose(v)); }, m,
      x2);
}

}  // namespace

TEST_CASE("grad: max, min, maximum, minimum; ties share the cotangent equally", "[grad]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  for (const ts::shape<2> s : {ts::shape<2>{4, 4}, ts::shape<2>{3, 5}}) {
    const auto x = random_tensor(s, 3);
    const auto y = random_tensor(s, 4);
    check_gradients<xy>("max<1>", [](auto v) { return sin_sum(ts::max<1>(v)); }, m, x);
    check_gradients<xy>("min<0> keep_dims, times v", [](auto v) {
      return sin_sum(ts::min<0>(v, ts::keep_dims) * v);
    }, m, x);
    check_gradients<ts::spec<ts::axes("y", "x")>>(
        "max of everything", [](auto v) { return ts::max(ts::exp(v)); }, m, x);
    check_gradients<xy>("min<-1> with an output spec",
                        [](auto v) { return sin_sum(ts::min<ts::spec<"x">, -1>(v)); }, m, x);
    check_gradients<xy, ts::spec<none, "y">>(
        "maximum and minimum, broadcast", [](auto a, auto b) {
          return sin_sum(ts::maximum(a, ts::sum<0>(ts::reshard<ts::spec<none, "y">>(b),
                                                   ts::keep_dims)) +
                         ts::minimum(a, b) * 2.0);
        }, m, x, y);
  }
  // ties: a row of three equal maxima gets a third each; maximum's tie half to each side
  const ts::host_tensor<double, 2> h({2, 3}, {1, 3, 3, 2, 2, 2});
  const auto x = ts::device_put<xy>(m, h);
  const auto g = host_of(ts::grad<0>([](auto v) { return ts::sum(ts::max<1>(v)); })(x));
  const double want[] = {0, 0.5, 0.5, 1.0 / 3, 1.0 / 3, 1.0 / 3};
  for (std::size_t i = 0; i < 6; ++i) CHECK(close(g.data()[i], want[i], 1e-15));
  const auto c = ts::device_put<xy>(m, ts::host_tensor<double, 2>({2, 3}, {0, 3, 4, 2, 2, 2}));
  const auto gm = host_of(ts::grad<0>([&](auto v) { return ts::sum(ts::maximum(v, c)); })(x));
  const double want_m[] = {1, 0.5, 0, 0.5, 0.5, 0.5};
  for (std::size_t i = 0; i < 6; ++i) CHECK(close(gm.data()[i], want_m[i], 1e-15));
}
