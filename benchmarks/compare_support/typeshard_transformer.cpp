// benchmarks/compare_support/typeshard_transformer.cpp: the transformer training step of
// benchmarks/compare in typeshard: examples/transformer.cpp's model itself
// (examples/support/transformer_model.hpp) on the 2 x 4 mesh (data, model), one step being
// ts::value_and_grad of the loss and the ZeRO-1 Adam update of its 11 parameters, every
// collective chosen at compile time. jax_contender.py's Transformer runs the same model with
// the same shardings and the same data.
//
// Data (protocol.hpp's values): E seed 30, P seed 31 (x 0.5), block b's fused QKV seed
// 40 + 10b (/ sqrt(D)), Wo 41 + 10b (x 0.5 / sqrt(D)), W1 42 + 10b (/ sqrt(D)), W2 43 + 10b
// (x 0.5 / sqrt(F)), Wout seed 60 (/ sqrt(D)); token i of the flattened batch is
// (i * 40503 + 11) mod V and its target the previous token (0 first). The check: the first
// step's gradients of Wout, block 0's W1 and E, sampled.
//
// transformer_bf16: the same step in mixed precision (the model's Bf16 = true: float master
// weights, bf16 products accumulated in float, bf16 attention probabilities; the model's
// header says what stays float), beside jax_contender.py's TransformerBf16.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "../../examples/support/transformer_model.hpp"
#include "typeshard_contender.hpp"

namespace compare {

namespace {

namespace model = examples::transformer;
using mesh_2x4 = ts::mesh<ts::axis("data", 2), ts::axis("model", 4)>;

ts::host_tensor<float, 2> host2(std::size_t r, std::size_t c, std::uint64_t seed, float scale) {
  ts::host_tensor<float, 2> t({r, c});
  fill(t.data(), t.size(), seed, 0, scale);
  return t;
}

model::host_params transformer_params(const model::config& c) {
  const std::size_t D = c.d_model, F = c.hidden;
  const float d = std::sqrt(static_cast<float>(D)), f = std::sqrt(static_cast<float>(F));
  model::host_params p;
  p.mats.push_back(host2(c.vocab, D, 30, 1.0f));
  p.mats.push_back(host2(c.seq, D, 31, 0.5f));
  for (std::uint64_t b = 0; b < model::blocks; ++b) {
    ts::host_tensor<float, 3> qkv({D, 3, D});
    fill(qkv.data(), qkv.size(), 40 + 10 * b, 0, 1.0f / d);
    p.qkv.push_back(std::move(qkv));
    p.mats.push_back(host2(D, D, 41 + 10 * b, 0.5f / d));
    p.mats.push_back(host2(D, F, 42 + 10 * b, 1.0f / d));
    p.mats.push_back(host2(F, D, 43 + 10 * b, 0.5f / f));
  }
  p.mats.push_back(host2(D, c.vocab, 60, 1.0f / d));
  return p;
}

model::host_batch transformer_batch(const model::config& c) {
  model::host_batch b{ts::host_tensor<float, 3>({c.batch, c.seq, c.vocab}),
                      ts::host_tensor<float, 3>({c.batch, c.seq, c.vocab}),
                      ts::host_tensor<std::int32_t, 2>({c.batch, c.seq})};
  for (std::size_t i = 0; i < c.batch; ++i) {
    std::size_t previous = 0;
    for (std::size_t s = 0; s < c.seq; ++s) {
      const std::size_t t = ((i * c.seq + s) * 40503u + 11u) % c.vocab;
      b.inputs(i, s, t) = 1.0f;
      b.ids(i, s) = static_cast<std::int32_t>(t);  // the embedding's lookup (ts::take)
      b.targets(i, s, previous) = 1.0f;
      previous = t;
    }
  }
  return b;
}

template <bool Bf16>
class transformer_step final : public instance {
 public:
  explicit transformer_step(const model::config& c)
      : params_(model::put_params(mesh_, transformer_params(c))),
        inputs_(model::put_inputs(mesh_, c, transformer_batch(c))),
        optimizer_(params_, ts::adam_options{}) {}

  void run() override {
    auto [loss, grads, next, state] = step_(params_, optimizer_.state, inputs_);
    if (check_.empty()) {  // the warm-up: sample the first step's gradients (reduced)
      using namespace model;
      append(sample_array(ts::reshard<rep2>(grads.out)));  // grads: the parameters' tree
      append(sample_array(ts::reshard<W1_spec>(grads.layers[0].w1)));
      append(sample_array(ts::reshard<rep2>(grads.embed)));
      first_loss_ = loss.item();
    }
    params_ = std::move(next);
    optimizer_.state = std::move(state);
  }

  std::vector<double> check() override { return check_; }

  std::string info() override {
    return gemm_info() + "first loss " + std::to_string(first_loss_) +
           "; value_and_grad of the global-view loss, ZeRO-1 Adam (ts::zero_adam_update), "
           "the step through ts::jit (one program per device)" +
           (Bf16 ? "; mixed precision: bf16 products accumulated in float" : "");
  }

 private:
  void append(const std::vector<double>& v) { check_.insert(check_.end(), v.begin(), v.end()); }

  ts::device_mesh<mesh_2x4> mesh_{devices()};
  model::params_t<mesh_2x4> params_;
  model::inputs<mesh_2x4> inputs_;
  model::optimizer<mesh_2x4> optimizer_;
  // One step as examples/transformer.cpp trains by default: the loss, its gradients and the
  // Adam update of a copy of the state, run by ts::jit as one program per device.
  static constexpr auto step_fn = [](const auto& p, const auto& st, const auto& in) {
    auto [loss, grads] = model::value_and_grads<Bf16>(p, in);
    auto state = st;
    auto next = ts::adam_update(p, grads, state, ts::adam_options{});
    return std::tuple(loss, grads, next, state);
  };
  decltype(ts::jit(step_fn)) step_ = ts::jit(step_fn);
  std::vector<double> check_;
  double first_loss_ = 0;
};

template <bool Bf16>
std::unique_ptr<instance> make_transformer(const params& p) {
  model::config c;
  c.batch = p.get("batch");
  c.seq = p.get("seq");
  c.vocab = p.get("vocab");
  c.d_model = p.get("d");
  c.hidden = p.get("f");
  if (p.get("heads") != model::heads)
    throw std::runtime_error("the model is built for " + std::to_string(model::heads) +
                             " heads (examples/support/transformer_model.hpp)");
  return std::make_unique<transformer_step<Bf16>>(c);
}

}  // namespace

void add_transformer_workload(registry& r) {
  r["transformer"] = &make_transformer<false>;
  r["transformer_bf16"] = &make_transformer<true>;
}

}  // namespace compare
