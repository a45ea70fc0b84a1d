// ts::zero_sgd_update and ts::zero_adam_update (ZeRO-1, fused: each device reduces its shard
// of the gradient and updates it in one pass, then the parameter is all-gathered) on the
// (2,2) and (2,4) meshes ("data", "model"): three steps of a data-parallel model
// tanh(X W + b) trained with ts::value_and_grad, against the same optimizer written serially
// on the host from the all-reduced gradient (double). Even and uneven extents (rows of W and
// entries of b that do not divide over the shards, some shards empty), the update sharded
// over "data" (the axis the gradient is unreduced over: a psum_scatter) and over "model"
// (an all-reduce over "data", then each device's slice). Value-level: one template per mesh.
#include "grad_check.hpp"

namespace {

using namespace grad_test;
using ts::none;

const auto affine_loss = [](auto w, auto b, auto x, auto y) {
  auto e = ts::tanh(ts::matmul(x, w) + b) - y;
  return ts::mean(e * e);
};

enum class optimizer { sgd, adam };

// The serial optimizers, on the host, in double.
struct serial_adam {
  std::vector<double> m, v;
  void step(std::vector<double>& w, const std::vector<double>& g, int t, const ts::adam_options& o) {
    m.resize(w.size(), 0);
    v.resize(w.size(), 0);
    for (std::size_t k = 0; k < w.size(); ++k) {
      m[k] = o.beta1 * m[k] + (1 - o.beta1) * g[k];
      v[k] = o.beta2 * v[k] + (1 - o.beta2) * g[k] * g[k];
      const double mh = m[k] / (1 - std::pow(o.beta1, t));
      const double vh = v[k] / (1 - std::pow(o.beta2, t));
      w[k] -= o.lr * mh / (std::sqrt(vh) + o.eps);
    }
  }
};

template <class A>
std::vector<double> values(const A& a) {
  const auto h = host_of(a);
  return std::vector<double>(h.data(), h.data() + h.size());
}

template <class A>
void check_equal(const A& a, const std::vector<double>& want) {
  const auto got = values(a);
  REQUIRE(got.size() == want.size());
  for (std::size_t k = 0; k < got.size(); ++k) CHECK(close(got[k], want[k], 1e-12));
}

// Three steps of `opt` with W [rows, 3] and b [3] replicated, the batch over "data", the
// update sharded by WShard / BShard.
template <class Mesh, class WShard, class BShard>
void train(const ts::device_mesh<Mesh>& m, std::size_t rows, optimizer opt) {
  INFO("rows " << rows << (opt == optimizer::sgd ? ", SGD" : ", Adam") << ", W update "
               << WShard::to_string());
  const auto X = ts::device_put<ts::spec<"data", none>>(m, random_tensor(ts::shape<2>{8, rows}, 1));
  const auto Y = ts::device_put<ts::spec<"data", none>>(m, random_tensor(ts::shape<2>{8, 3}, 2));
  const auto wh = random_tensor(ts::shape<2>{rows, 3}, 3);
  const auto bh = random_tensor(ts::shape<1>{3}, 4);
  auto W = ts::device_put<ts::spec<none, none>>(m, wh);
  auto B = ts::device_put<ts::spec<none>>(m, bh);
  std::vector<double> w(wh.data(), wh.data() + wh.size()), b(bh.data(), bh.data() + bh.size());
  auto w_state = ts::zero_adam_init<WShard>(W);
  auto b_state = ts::zero_adam_init<BShard>(B);
  STATIC_REQUIRE(std::is_same_v<typename decltype(w_state.m)::spec, WShard>);
  serial_adam w_serial, b_serial;
  const ts::adam_options o{.lr = 0.05};
  const double lr = 0.5;
  for (int t = 1; t <= 3; ++t) {
    INFO("step " << t);
    auto [gw, gb] = ts::grad<0, 1>(affine_loss)(W, B, X, Y);
    STATIC_REQUIRE(std::is_same_v<typename decltype(gw)::unreduced_type, ts::unreduced<"data">>);
    const auto gw_h = values(ts::reshard<ts::spec<none, none>>(gw));
    const auto gb_h = values(ts::reshard<ts::spec<none>>(gb));
    if (opt == optimizer::sgd) {
      W = ts::zero_sgd_update<WShard>(W, gw, lr);
      B = ts::zero_sgd_update<BShard>(B, gb, lr);
      for (std::size_t k = 0; k < w.size(); ++k) w[k] -= lr * gw_h[k];
      for (std::size_t k = 0; k < b.size(); ++k) b[k] -= lr * gb_h[k];
    } else {
      W = ts::zero_adam_update(W, gw, w_state, o);
      B = ts::zero_adam_update(B, gb, b_state, o);
      w_serial.step(w, gw_h, t, o);
      b_serial.step(b, gb_h, t, o);
      check_equal(ts::reshard<ts::spec<none, none>>(w_state.m), w_serial.m);
      check_equal(ts::reshard<ts::spec<none>>(b_state.v), b_serial.v);
    }
    check_equal(W, w);
    check_equal(B, b);
  }
}

template <class Mesh>
void train_all(std::size_t devices) {
  ts::cpu_devices pool{devices};
  const ts::device_mesh<Mesh> m{pool};
  for (std::size_t rows : {8, 6, 3})  // even on every mesh; uneven; fewer rows than shards
    for (optimizer opt : {optimizer::sgd, optimizer::adam}) {
      train<Mesh, ts::spec<"data", none>, ts::spec<"data">>(m, rows, opt);
      train<Mesh, ts::spec<"model", none>, ts::spec<"model">>(m, rows, opt);
    }
}

TEST_CASE("grad: fused ZeRO-1 SGD and Adam match the serial optimizers on (2,2) and (2,4)",
          "[grad]") {
  train_all<ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>>(4);
  train_all<ts::mesh<ts::axis("data", 2), ts::axis("model", 4)>>(8);
}

TEST_CASE("grad: the ZeRO-1 step's plan: reduce-scatter, local shard, all-gather", "[grad]") {
  using mesh = ts::mesh<ts::axis("data", 2), ts::axis("model", 4)>;
  using W = ts::sharded_array<float, mesh, ts::spec<none, none>, ts::extents<8, 3>>;
  using G = ts::sharded_array<float, mesh, ts::spec<none, none>, ts::extents<8, 3>,
                              ts::unreduced<"data">>;
  using plan = ts::zero_update_plan_for<W, ts::spec<"data", none>, G>;
  STATIC_REQUIRE(plan::valid);
  STATIC_REQUIRE(plan::reduce_scatter::steps.size() == 1);
  STATIC_REQUIRE(plan::reduce_scatter::steps[0].kind == ts::step_kind::psum_scatter);
  STATIC_REQUIRE(!plan::slice::communicates);  // the parameter is replicated: a local slice
  STATIC_REQUIRE(plan::all_gather::steps[0].kind == ts::step_kind::all_gather);
  const std::string d = plan::describe();
  INFO(d);
  CHECK(d.find("psum_scatter") != std::string::npos);
  CHECK(d.find("all_gather") != std::string::npos);
  // sharded over "model" instead: the gradient is all-reduced over "data" (a psum)
  using over_model = ts::zero_update_plan_for<W, ts::spec<"model", none>, G>;
  CHECK(over_model::describe().find("psum") != std::string::npos);
}

}  // namespace
