// Parameter trees (ops/tree.hpp): ts::value_and_grad over a Hana struct template, a std::tuple
// and a std::array of arrays, nested, with has_aux, and the optimizers over trees (SGD, Adam,
// AdamW, plain and ZeRO). A two-layer MLP with LayerNorm on the 2x2 mesh ("data" 2, "model" 2; the
// batch over "data", W2's rows over "model"), trained with AdamW through trees, against the
// same model written with one argnum per parameter and one optimizer call per array: the
// gradient types are the same (static_assert), the losses and parameters equal step by step.
// AdamW's step against the formula on the host. tree_map's order; ZeRO Adam over a tree of
// shard specs (ts::zero_adam_init(params, specs)) against the per-array states.
#include "grad_check.hpp"

namespace {

using namespace grad_test;
using ts::none;

using mesh = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
using spec_b = ts::spec<"data", none>;

template <class W1, class B1, class G, class Be, class W2, class B2>
struct mlp_params {
  BOOST_HANA_DEFINE_STRUCT(mlp_params, (W1, w1), (B1, b1), (G, gamma), (Be, beta), (W2, w2),
                           (B2, b2));
};

// tanh(LayerNorm(x W1 + b1)) W2 + b2 - y, one parameter per argument (arrays or traced).
const auto mlp_error = [](const auto& w1, const auto& b1, const auto& gamma, const auto& beta,
                          const auto& w2, const auto& b2, const auto& x, const auto& y) {
  auto h = ts::matmul(x, w1) + b1;
  auto d = h - ts::mean<1>(h, ts::keep_dims);
  auto n = d * ts::rsqrt(ts::mean<1>(d * d, ts::keep_dims) + 1e-5f);
  auto a = ts::tanh(n * gamma + beta);
  return ts::reshard<spec_b>(ts::matmul(a, w2)) + b2 - y;
};

const auto flat_loss = [](auto w1, auto b1, auto gamma, auto beta, auto w2, auto b2, auto x,
                          auto y) {
  auto e = mlp_error(w1, b1, gamma, beta, w2, b2, x, y);
  return ts::mean(e * e);
};

// The same loss over the struct, returning (loss, the error: aux).
const auto tree_loss = [](const auto& p, const auto& x, const auto& y) {
  auto e = mlp_error(p.w1, p.b1, p.gamma, p.beta, p.w2, p.b2, x, y);
  return std::make_pair(ts::mean(e * e), e);
};

template <std::size_t Rank>
ts::host_tensor<float, Rank> random_float(const ts::shape<Rank>& s, unsigned seed,
                                          double offset = 0) {
  const auto d = random_tensor(s, seed, offset);
  ts::host_tensor<float, Rank> f(s);
  for (std::size_t k = 0; k < d.size(); ++k) f.data()[k] = float(d.data()[k]);
  return f;
}

template <class A, class B>
void check_equal(const A& a, const B& b, const char* what) {
  INFO(what);
  const auto ha = host_of(a), hb = host_of(b);
  REQUIRE(ha.size() == hb.size());
  for (std::size_t k = 0; k < ha.size(); ++k) CHECK(close(ha.data()[k], hb.data()[k], 1e-6));
}

TEST_CASE("tree: MLP with LayerNorm, AdamW over a struct equals the per-argument step",
          "[grad][tree]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh> m{devices};
  const std::size_t B = 7, D = 5, H = 6, O = 3;  // uneven batch over "data"
  const auto X = ts::device_put<spec_b>(m, random_float(ts::shape<2>{B, D}, 1));
  const auto Y = ts::device_put<spec_b>(m, random_float(ts::shape<2>{B, O}, 2));
  auto W1 = ts::device_put<ts::spec<none, none>>(m, random_float(ts::shape<2>{D, H}, 3));
  auto B1 = ts::device_put<ts::spec<none>>(m, random_float(ts::shape<1>{H}, 4));
  auto G = ts::device_put<ts::spec<none>>(m, random_float(ts::shape<1>{H}, 5, 1.0));
  auto Be = ts::device_put<ts::spec<none>>(m, random_float(ts::shape<1>{H}, 6));
  auto W2 = ts::device_put<ts::spec<"model", none>>(m, random_float(ts::shape<2>{H, O}, 7));
  auto B2 = ts::device_put<ts::spec<none>>(m, random_float(ts::shape<1>{O}, 8));
  using params = mlp_params<decltype(W1), decltype(B1), decltype(G), decltype(Be), decltype(W2),
                            decltype(B2)>;
  params p{W1, B1, G, Be, W2, B2};

  // The per-array states, sharded as zero_over<"data"> shards each leaf: dimension 0 over
  // "data" where it is unsharded, W2 (dimension 0 over "model") in its own spec.
  auto s1 = ts::zero_adam_init<ts::spec<"data", none>>(W1);
  auto sb1 = ts::zero_adam_init<ts::spec<"data">>(B1);
  auto sg = ts::zero_adam_init<ts::spec<"data">>(G);
  auto sbe = ts::zero_adam_init<ts::spec<"data">>(Be);
  auto s2 = ts::zero_adam_init<ts::spec<"model", none>>(W2);
  auto sb2 = ts::zero_adam_init<ts::spec<"data">>(B2);
  auto state = ts::zero_adam_init<"data">(p);
  static_assert(std::is_same_v<decltype(state), mlp_params<decltype(s1), decltype(sb1),
                                                           decltype(sg), decltype(sbe),
                                                           decltype(s2), decltype(sb2)>>);
  const ts::adamw_options o{.lr = 0.05, .weight_decay = 0.1};

  const double initial = host_of(flat_loss(W1, B1, G, Be, W2, B2, X, Y)).data()[0];
  for (int step = 0; step < 4; ++step) {
    INFO("step " << step);
    auto [la, g] = ts::value_and_grad(tree_loss, ts::has_aux)(p, X, Y);
    auto& [loss, err] = la;
    auto [flat_l, fg] = ts::value_and_grad<0, 1, 2, 3, 4, 5>(flat_loss)(W1, B1, G, Be, W2, B2,
                                                                         X, Y);
    // The gradient tree: the struct over the per-argument gradients' types (rule 9: the
    // batch is over "data", so every gradient is unreduced over it).
    using FG = decltype(fg);
    static_assert(std::is_same_v<
                  decltype(g),
                  mlp_params<std::tuple_element_t<0, FG>, std::tuple_element_t<1, FG>,
                             std::tuple_element_t<2, FG>, std::tuple_element_t<3, FG>,
                             std::tuple_element_t<4, FG>, std::tuple_element_t<5, FG>>>);
    static_assert(std::is_same_v<decltype(g.w1)::unreduced_type, ts::unreduced<"data">>);
    static_assert(std::is_same_v<decltype(g.w2)::spec, ts::spec<"model", none>>);
    static_assert(std::is_same_v<decltype(g.w2)::unreduced_type, ts::unreduced<"data">>);
    static_assert(
        std::is_same_v<decltype(err), decltype(mlp_error(W1, B1, G, Be, W2, B2, X, Y))>);
    check_equal(loss, flat_l, "loss");
    check_equal(err, mlp_error(W1, B1, G, Be, W2, B2, X, Y), "aux: the error");
    check_equal(g.w1, std::get<0>(fg), "dW1");
    check_equal(g.b1, std::get<1>(fg), "db1");
    check_equal(g.gamma, std::get<2>(fg), "dgamma");
    check_equal(g.beta, std::get<3>(fg), "dbeta");
    check_equal(g.w2, std::get<4>(fg), "dW2");
    check_equal(g.b2, std::get<5>(fg), "db2");

    p = ts::adamw_update(p, g, state, o);
    W1 = ts::zero_adamw_update(W1, std::get<0>(fg), s1, o);
    B1 = ts::zero_adamw_update(B1, std::get<1>(fg), sb1, o);
    G = ts::zero_adamw_update(G, std::get<2>(fg), sg, o);
    Be = ts::zero_adamw_update(Be, std::get<3>(fg), sbe, o);
    W2 = ts::zero_adamw_update(W2, std::get<4>(fg), s2, o);
    B2 = ts::zero_adamw_update(B2, std::get<5>(fg), sb2, o);
    check_equal(p.w1, W1, "W1");
    check_equal(p.b1, B1, "b1");
    check_equal(p.gamma, G, "gamma");
    check_equal(p.beta, Be, "beta");
    check_equal(p.w2, W2, "W2");
    check_equal(p.b2, B2, "b2");
  }
  // trained: the loss went down, the same on both paths
  const double last = host_of(flat_loss(W1, B1, G, Be, W2, B2, X, Y)).data()[0];
  CHECK(last < initial);
  const auto [lt, aux] = ts::value_and_grad(tree_loss, ts::has_aux)(p, X, Y).first;
  (void)aux;
  CHECK(close(host_of(lt).data()[0], last, 1e-6));
}

TEST_CASE("tree: tuples and arrays of arrays; SGD and Adam over trees", "[grad][tree]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh> m{devices};
  const auto X = ts::device_put<spec_b>(m, random_float(ts::shape<2>{6, 4}, 11));
  auto A = ts::device_put<ts::spec<none, none>>(m, random_float(ts::shape<2>{4, 4}, 12));
  auto C = ts::device_put<ts::spec<none, none>>(m, random_float(ts::shape<2>{4, 4}, 13));
  const auto two = [](const auto& a, const auto& c, const auto& x) {
    auto h = ts::tanh(ts::matmul(x, a));
    return ts::sum(ts::matmul(h, c) * ts::matmul(h, c));
  };
  auto [lf, fg] = ts::value_and_grad<0, 1>(two)(A, C, X);

  // has_aux without trees: ts::grad gives (gradients, aux), the aux untouched.
  const auto with_aux = [&](const auto& a, const auto& c, const auto& x) {
    return std::make_tuple(two(a, c, x), std::string("aux"));
  };
  auto [ga_aux, note] = ts::grad<0, 1>(with_aux, ts::has_aux)(A, C, X);
  static_assert(std::is_same_v<decltype(ga_aux), std::remove_cvref_t<decltype(fg)>>);
  CHECK(note == "aux");
  check_equal(std::get<1>(ga_aux), std::get<1>(fg), "has_aux dC");

  // A tuple tree, beside a plain argument, and the loss taking it as a tuple.
  const auto tuple_loss = [&](const auto& t, const auto& x) {
    return two(std::get<0>(t), std::get<1>(t), x);
  };
  std::tuple<decltype(A), decltype(C)> t{A, C};
  auto [lt, gt] = ts::value_and_grad(tuple_loss)(t, X);
  static_assert(std::is_same_v<decltype(gt), std::remove_cvref_t<decltype(fg)>>);
  check_equal(lt, lf, "tuple loss");
  check_equal(std::get<0>(gt), std::get<0>(fg), "tuple dA");
  check_equal(std::get<1>(gt), std::get<1>(fg), "tuple dC");

  // A std::array tree: inside the loss a tuple of traced leaves; its gradients of one type,
  // so a std::array again. With a second argnum (a plain array) the result is a tuple.
  std::array<decltype(A), 2> arr{A, C};
  const auto array_loss = [&](const auto& ac, const auto& x) {
    return two(std::get<0>(ac), std::get<1>(ac), x);
  };
  auto ga = ts::grad(array_loss)(arr, X);
  using GA = std::tuple_element_t<0, std::remove_cvref_t<decltype(fg)>>;
  static_assert(std::is_same_v<decltype(ga), std::array<GA, 2>>);
  check_equal(ga[0], std::get<0>(fg), "array dA");
  check_equal(ga[1], std::get<1>(fg), "array dC");
  const auto mixed = [&](const auto& ac, const auto& c) { return array_loss(ac, ts::tanh(c)); };
  auto gm = ts::grad<0, 1>(mixed)(arr, X);
  static_assert(std::tuple_size_v<decltype(gm)> == 2);
  static_assert(std::is_same_v<std::tuple_element_t<0, decltype(gm)>, std::array<GA, 2>>);

  // A nested tree (a tuple of a tuple and an array): gradients of the same shape; AdamW
  // (ZeRO) over it equals the per-array step.
  std::tuple<std::tuple<decltype(A)>, std::array<decltype(C), 1>> nested{{A}, {C}};
  static_assert(ts::tree_size<decltype(nested)> == 2);
  const auto nested_loss = [&](const auto& p, const auto& x) {
    return two(std::get<0>(std::get<0>(p)), std::get<0>(std::get<1>(p)), x);
  };
  auto gn = ts::grad(nested_loss)(nested, X);
  using GC = std::tuple_element_t<1, std::remove_cvref_t<decltype(fg)>>;
  static_assert(std::is_same_v<decltype(gn), std::tuple<std::tuple<GA>, std::array<GC, 1>>>);
  check_equal(std::get<0>(std::get<0>(gn)), std::get<0>(fg), "nested dA");
  check_equal(std::get<1>(gn)[0], std::get<1>(fg), "nested dC");
  auto sn = ts::zero_adam_init<"data">(nested);
  const auto nested1 = ts::adamw_update(nested, gn, sn, {.lr = 0.01});
  auto sna = ts::zero_adam_init<ts::spec<"data", none>>(A);
  check_equal(std::get<0>(std::get<0>(nested1)),
              ts::zero_adamw_update(A, std::get<0>(fg), sna, {.lr = 0.01}), "nested AdamW A");

  // SGD over the tuple (plain and ZeRO) equals the per-array step.
  const auto sgd = ts::sgd_update(t, gt, 0.1);
  const auto zsgd = ts::zero_sgd_update<"data">(t, gt, 0.1);
  const auto A1 = ts::zero_sgd_update<ts::spec<none, none>>(A, std::get<0>(fg), 0.1f);
  const auto A1z = ts::zero_sgd_update<ts::spec<"data", none>>(A, std::get<0>(fg), 0.1f);
  check_equal(std::get<0>(sgd), A1, "sgd A");
  check_equal(std::get<0>(zsgd), A1z, "zero sgd A");
  check_equal(std::get<0>(sgd), std::get<0>(zsgd), "sgd: plain = ZeRO");
  // Adam over the array tree (plain states) equals the per-array step.
  auto st = ts::adam_init(arr);
  static_assert(std::is_same_v<decltype(st), std::array<ts::zero_adam_state<decltype(A),
                                                                            ts::spec<none, none>>,
                                                        2>>);
  auto sc = ts::zero_adam_init<ts::spec<none, none>>(C);
  const auto arr1 = ts::adam_update(arr, ga, st, {.lr = 0.01});
  check_equal(arr1[1], ts::zero_adam_update(C, std::get<1>(fg), sc, {.lr = 0.01}), "adam C");
}

TEST_CASE("tree: leaves visited in order; ZeRO Adam with a tree of shard specs",
          "[grad][tree]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh> m{devices};
  const auto X = ts::device_put<spec_b>(m, random_float(ts::shape<2>{6, 4}, 31));
  auto A = ts::device_put<ts::spec<none, none>>(m, random_float(ts::shape<2>{4, 6}, 32));
  auto R = ts::device_put<ts::spec<"model", none>>(m, random_float(ts::shape<2>{6, 3}, 33));
  using params = mlp_params<decltype(A), decltype(A), decltype(R), decltype(A), decltype(R),
                            decltype(A)>;
  params p{A, A, R, A, R, A};

  // tree_map calls f on the leaves in the tree's order (nested trees depth first), whatever
  // order the compiler evaluates function arguments in.
  std::vector<int> seen;
  const auto nested = std::make_tuple(std::make_tuple(1, 2), std::array<int, 2>{3, 4}, 5);
  (void)ts::tree_map([&](int v) { return seen.push_back(v), v; }, nested);
  CHECK(seen == std::vector<int>{1, 2, 3, 4, 5});
  std::vector<std::size_t> rows_seen;
  (void)ts::tree_map([&](const auto& w) { return rows_seen.push_back(w.extent(0)), 0; }, p);
  CHECK(rows_seen == std::vector<std::size_t>{4, 4, 6, 4, 6, 4});

  // A tree of specs, one per leaf: R (dimension 0 over "model") updated over "data" along
  // dimension 1, which zero_over<"data"> cannot say (it would update R in its own spec).
  using rows = ts::spec<"data", none>;
  using cols = ts::spec<"model", "data">;
  const mlp_params<rows, rows, cols, rows, ts::spec<"model", none>, rows> shard_specs{};
  auto state = ts::zero_adam_init(p, shard_specs);
  auto sr = ts::zero_adam_init<cols>(R);
  auto sr_own = ts::zero_adam_init<ts::spec<"model", none>>(R);
  static_assert(std::is_same_v<decltype(state.gamma), decltype(sr)>);
  static_assert(std::is_same_v<decltype(state.w2), decltype(sr_own)>);
  static_assert(std::is_same_v<decltype(state.w1),
                               decltype(ts::zero_adam_init<"data">(p).w1)>);

  const auto loss = [](const auto& q, const auto& x) {
    auto h = ts::tanh(ts::matmul(x, q.w1) + ts::matmul(x, q.b1));
    auto y = ts::reshard<spec_b>(ts::matmul(h, q.gamma)) +
             ts::reshard<spec_b>(ts::matmul(ts::tanh(ts::matmul(x, q.beta)), q.w2));
    return ts::mean(y * y) + ts::mean(ts::matmul(x, q.b2));
  };
  auto [l, g] = ts::value_and_grad(loss)(p, X);
  (void)l;
  ts::communication_report r;
  params p1 = p;
  {
    ts::communication_recorder rec;
    p1 = ts::adam_update(p, g, state, {.lr = 0.01});
    r = rec.report();
  }
  // Each leaf: a reduce-scatter over "data" and an all-gather, but w2 (its own spec: the
  // gradient all-reduced over "data").
  CHECK(r.count(ts::step_kind::psum_scatter, "data") == 5);
  CHECK(r.count(ts::step_kind::all_gather, "data") == 5);
  CHECK(r.count(ts::step_kind::psum, "data") == 1);
  check_equal(p1.gamma, ts::zero_adam_update(R, g.gamma, sr, {.lr = 0.01}), "R over cols");
  check_equal(p1.w2, ts::zero_adam_update(R, g.w2, sr_own, {.lr = 0.01}), "R in its spec");
  CHECK(state.gamma.step == 1);
}

TEST_CASE("tree: one AdamW step against the formula", "[grad][tree]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh> m{devices};
  const auto wh = random_float(ts::shape<2>{5, 3}, 21);
  const auto gh = random_float(ts::shape<2>{5, 3}, 22);
  const auto W = ts::device_put<ts::spec<none, "model">>(m, wh);
  const auto Gr = ts::device_put<ts::spec<none, "model">>(m, gh);
  auto s = ts::zero_adam_init<ts::spec<"data", "model">>(W);
  const ts::adamw_options o{.lr = 0.01, .eps = 1e-6, .weight_decay = 0.5};
  const auto W1 = ts::to_host(ts::zero_adamw_update(W, Gr, s, o));
  // step 1 from zero moments: m_hat = g, v_hat = g^2
  for (std::size_t k = 0; k < wh.size(); ++k) {
    const double w = wh.data()[k], g = gh.data()[k];
    const double want = w - o.lr * (g / (std::abs(g) + o.eps) + o.weight_decay * w);
    CHECK(close(W1.data()[k], want, 1e-5));
  }
  // Without decay, AdamW is Adam.
  auto sa = ts::zero_adam_init<ts::spec<"data", "model">>(W);
  auto sw = ts::zero_adam_init<ts::spec<"data", "model">>(W);
  check_equal(ts::zero_adam_update(W, Gr, sa, {.lr = 0.01}),
              ts::zero_adamw_update(W, Gr, sw, {.lr = 0.01, .weight_decay = 0}), "wd 0");
}

}  // namespace
