// The transformer of examples/transformer.cpp (issue 17 item 2) against its serial run: the
// same model code (examples/support/transformer_model.hpp) on a 1 x 1 mesh ("data", "model")
// is the reference. From the same initial parameters and the same batches, the sharded runs
// give the same loss and the same 11 gradients (reduced: ts::reshard to the parameter's
// spec) for 3 training steps of ZeRO-1 Adam, within a relative 2e-4 (max |a - b| / (1 + |b|):
// float sums in another order: over shards, blocked GEMMs). Meshes: 2 x 4 with the example's
// sizes (even extents), 2 x 2 with uneven ones (batch 3 over "data", MLP hidden 30 over
// "model", vocabulary 7 and sequence 5 split unevenly by the ZeRO update shards). Plus a
// central finite-difference spot check of a few gradient entries on the 1 x 1 mesh.
// (Compiled at -O0 like the other grad_ tests: three mesh types of the whole model.)
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <tuple>
#include <utility>

#include <typeshard/typeshard.hpp>

#include "../../examples/support/transformer_model.hpp"

namespace {

namespace ts = typeshard;
namespace tr = examples::transformer;

using mesh_1x1 = ts::mesh<ts::axis("data", 1), ts::axis("model", 1)>;
using mesh_2x2 = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
using mesh_2x4 = ts::mesh<ts::axis("data", 2), ts::axis("model", 4)>;

constexpr double tolerance = 2e-4;

template <class T, std::size_t R>
double relative_error(const ts::host_tensor<T, R>& got, const ts::host_tensor<T, R>& want) {
  REQUIRE(got.extents() == want.extents());
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(double(got.data()[i]) - double(want.data()[i])) /
                                (1.0 + std::abs(double(want.data()[i]))));
  return worst;
}

// The gradients as host tensors (a tree of the parameters' shape, tr::model_params), each
// reduced to its parameter's spec first (the all-reduce).
template <class Params, class Grads>
auto host_gradients(const Params& p, const Grads& g) {
  return ts::tree_map(
      [](const auto& w, const auto& gw) {
        return ts::to_host(ts::reshard<typename std::remove_cvref_t<decltype(w)>::spec>(gw));
      },
      p, g);
}

// Runs `steps` Adam steps on Mesh and on the 1 x 1 mesh from the same start; checks the loss
// and every gradient at each step.
template <class Mesh>
void compare_with_serial(const ts::device_mesh<Mesh>& mesh,
                         const ts::device_mesh<mesh_1x1>& one, const tr::config& c,
                         std::size_t steps) {
  const tr::host_params start = tr::init_params(c, 3);
  auto p = tr::put_params(mesh, start);
  auto q = tr::put_params(one, start);
  tr::optimizer<Mesh> adam_p(p, {.lr = 1e-2});
  tr::optimizer<mesh_1x1> adam_q(q, {.lr = 1e-2});
  std::mt19937 rng(11);
  for (std::size_t s = 0; s < steps; ++s) {
    const tr::host_batch batch = tr::make_batch(c, rng);
    const auto [loss_p, grads_p] = tr::value_and_grads(p, tr::put_inputs(mesh, c, batch));
    const auto [loss_q, grads_q] = tr::value_and_grads(q, tr::put_inputs(one, c, batch));
    const double lp = ts::to_host(loss_p)(), lq = ts::to_host(loss_q)();
    INFO("step " << s << ": loss " << lp << " (serial " << lq << ")");
    CHECK(std::abs(lp - lq) / std::abs(lq) <= tolerance);
    const auto hp = host_gradients(p, grads_p);
    const auto hq = host_gradients(q, grads_q);
    std::size_t i = 0;  // the leaves in the tree's order
    (void)ts::tree_map(
        [&](const auto& got, const auto& want) {
          const double error = relative_error(got, want);
          INFO("gradient of parameter " << i++ << ": relative error " << error);
          CHECK(error <= tolerance);
          return 0;
        },
        hp, hq);
    CHECK(i == tr::param_count);
    adam_p.update(p, grads_p);
    adam_q.update(q, grads_q);
  }
}

TEST_CASE("transformer: the 2 x 4 mesh (the example's sizes) gives the serial loss and gradients") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> mesh{devices};
  const ts::device_mesh<mesh_1x1> one{devices, {0}};
  compare_with_serial(mesh, one, tr::config{}, 3);
}

tr::config uneven() {
  tr::config c;
  c.batch = 3;    // over "data" 2: 2 + 1
  c.seq = 5;      // P [5, D], the ZeRO shard over "data": 3 + 2
  c.vocab = 7;    // E [7, D]: 4 + 3
  c.d_model = 12;  // 4 heads of 3
  c.hidden = 30;  // over "model" 2 in W1, W2; over "model" x "data" in their update shards
  return c;
}

TEST_CASE("transformer: the 2 x 2 mesh with uneven extents gives the serial loss and gradients") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> mesh{devices};
  const ts::device_mesh<mesh_1x1> one{devices, {0}};
  compare_with_serial(mesh, one, uneven(), 3);
}

// The Megatron budget of one training step on the 2 x 4 mesh: per block, two all-reduces
// (psum) over "model" of the [B, S, D] activations forward (attention's and the MLP's output
// projections) and their transposes backward (dX of the fused QKV product and of W1's);
// the loss's sum over "data"; per parameter one reduce-scatter of its gradient over "data"
// and one all-gather of the updated parameter (ZeRO-1 Adam). Nothing else.
TEST_CASE("transformer: one training step runs exactly the Megatron + ZeRO-1 collectives") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> mesh{devices};
  const tr::config c;
  auto p = tr::put_params(mesh, tr::init_params(c, 3));
  tr::optimizer<mesh_2x4> adam(p, {.lr = 1e-2});
  std::mt19937 rng(11);
  const auto in = tr::put_inputs(mesh, c, tr::make_batch(c, rng));
  ts::communication_report r;
  {
    ts::communication_recorder rec;
    const auto [loss, grads] = tr::value_and_grads(p, in);
    adam.update(p, grads);
    r = rec.report();
  }
  INFO(r);
  const std::size_t activation_block = (c.batch / 2) * c.seq * c.d_model * sizeof(float);
  CHECK(tr::within_budget(r));  // the example's own check, then each part of it
  CHECK(r.count(ts::step_kind::psum, "model") == tr::model_psums_per_step);
  for (const auto& rec : r.collectives())
    if (rec.axes == "model") CHECK(rec.block_bytes == activation_block);
  CHECK(r.count(ts::step_kind::psum, "data") == 1);  // the loss
  CHECK(r.count(ts::step_kind::psum_scatter, "data") == tr::param_count);
  CHECK(r.count(ts::step_kind::all_gather, "data") == tr::param_count);
  CHECK(r.size() == tr::collectives_per_step);
}

// One entry of a parameter, nudged by +-h, for the finite difference.
double loss_at(const ts::device_mesh<mesh_1x1>& one, const tr::config& c, tr::host_params h,
               std::size_t which, std::size_t index, float delta, const tr::host_batch& batch) {
  // host_params.mats holds E, P, (Wo, W1, W2) per block, Wout: leaf place -> index there.
  constexpr std::size_t mats_index[] = {0, 1, 99, 2, 3, 4, 99, 5, 6, 7, 8};
  if (which == 2)
    h.qkv[0].data()[index] += delta;
  else
    h.mats[mats_index[which]].data()[index] += delta;
  const auto p = tr::put_params(one, h);
  return ts::to_host(tr::value_and_grads(p, tr::put_inputs(one, c, batch)).first)();
}

TEST_CASE("transformer: gradients match central finite differences (1 x 1 mesh, spot check)") {
  ts::cpu_devices devices{1};
  const ts::device_mesh<mesh_1x1> one{devices};
  const tr::config c = uneven();
  const tr::host_params h = tr::init_params(c, 5);
  std::mt19937 rng(13);
  const tr::host_batch batch = tr::make_batch(c, rng);
  const auto p = tr::put_params(one, h);
  const auto g = host_gradients(p, tr::value_and_grads(p, tr::put_inputs(one, c, batch)).second);
  // (parameter's place among the tree's leaves, flat index): E, P, block 0's Wqkv, Wo, W1, W2,
  // and Wout.
  const auto check = [&](std::size_t which, std::size_t index, float analytic) {
    const float step = 1e-2f;  // float losses: a larger step than double's, error O(step^2)
    const double fd = (loss_at(one, c, h, which, index, step, batch) -
                       loss_at(one, c, h, which, index, -step, batch)) /
                      (2.0 * step);
    INFO("parameter " << which << ", entry " << index << ": analytic " << analytic
                      << ", finite difference " << fd);
    CHECK(std::abs(fd - analytic) <= 2e-3 + 2e-2 * std::abs(fd));
  };
  check(0, 5, g.embed.data()[5]);
  check(1, 13, g.pos.data()[13]);
  check(2, 40, g.layers[0].qkv.data()[40]);
  check(3, 7, g.layers[0].o.data()[7]);
  check(4, 29, g.layers[0].w1.data()[29]);
  check(5, 50, g.layers[0].w2.data()[50]);
  check(10, 3, g.out.data()[3]);
}

}  // namespace
