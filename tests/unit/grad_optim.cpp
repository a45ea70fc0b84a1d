// ts::zero_sgd_update and ts::zero_adam_update (ZeRO-1: the gradient reduce-scattered over
// "data", the update and Adam's moments on each device's shard, the parameter all-gathered
// back) on the 4x2 mesh, three steps of a data-parallel linear model trained with
// ts::value_and_grad, against the same optimizer written serially on the host from the
// all-reduced gradient (double). Uneven shards: 6 rows over 4 devices.
#include "grad_check.hpp"

namespace {

using namespace grad_test;
using ts::none;

using mesh_4x2 = ts::mesh<ts::axis("data", 4), ts::axis("model", 2)>;

const auto linear_loss = [](auto w, auto x, auto y) {
  auto e = ts::tanh(ts::matmul(x, w)) - y;
  return ts::mean(e * e);
};

TEST_CASE("grad: ZeRO-1 SGD and Adam match the serial optimizers", "[grad]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_4x2> m{devices};
  const auto X = ts::device_put<ts::spec<"data", none>>(m, random_tensor(ts::shape<2>{8, 6}, 1));
  const auto Y = ts::device_put<ts::spec<"data", none>>(m, random_tensor(ts::shape<2>{8, 3}, 2));
  using shard = ts::spec<"data", none>;  // the update's sharding: rows over "data"
  using replicated2 = ts::spec<none, none>;
  auto w_host = random_tensor(ts::shape<2>{6, 3}, 3);

  SECTION("SGD") {
    auto W = ts::device_put<replicated2>(m, w_host);
    for (int step = 0; step < 3; ++step) {
      const auto g = ts::grad(linear_loss)(W, X, Y);
      STATIC_REQUIRE(std::is_same_v<decltype(g)::unreduced_type, ts::unreduced<"data">>);
      const auto gh = host_of(g);
      W = ts::zero_sgd_update<shard>(W, g, 0.5);
      for (std::size_t k = 0; k < w_host.size(); ++k) w_host.data()[k] -= 0.5 * gh.data()[k];
      const auto wh = ts::to_host(W);
      for (std::size_t k = 0; k < w_host.size(); ++k) CHECK(close(wh.data()[k], w_host.data()[k], 1e-12));
    }
  }
  SECTION("Adam") {
    auto W = ts::device_put<replicated2>(m, w_host);
    auto state = ts::zero_adam_init<shard>(W);
    STATIC_REQUIRE(std::is_same_v<decltype(state.m)::spec, ts::spec<"data", none>>);
    const ts::adam_options o{.lr = 0.05};
    std::vector<double> mm(w_host.size(), 0), vv(w_host.size(), 0);
    for (int step = 1; step <= 3; ++step) {
      const auto g = ts::grad(linear_loss)(W, X, Y);
      const auto gh = host_of(g);
      W = ts::zero_adam_update(W, g, state, o);
      for (std::size_t k = 0; k < w_host.size(); ++k) {
        mm[k] = o.beta1 * mm[k] + (1 - o.beta1) * gh.data()[k];
        vv[k] = o.beta2 * vv[k] + (1 - o.beta2) * gh.data()[k] * gh.data()[k];
        const double mh = mm[k] / (1 - std::pow(o.beta1, step));
        const double vh = vv[k] / (1 - std::pow(o.beta2, step));
        w_host.data()[k] -= o.lr * mh / (std::sqrt(vh) + o.eps);
      }
      const auto wh = ts::to_host(W);
      for (std::size_t k = 0; k < w_host.size(); ++k) CHECK(close(wh.data()[k], w_host.data()[k], 1e-12));
    }
  }
}

}  // namespace
