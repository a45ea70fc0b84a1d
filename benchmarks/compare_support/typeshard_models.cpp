// benchmarks/compare_support/typeshard_models.cpp: seed 000's Megatron MLP forward and one
// training step of seed 002's 8-way data-parallel MLP, in typeshard.
//
// megatron  the seed's shard_map program on the 2 x 2 mesh ("data", "model"), as
//           examples/seed000.cpp writes it: x [B, D] P(None, model), W1 [D, F] P(None, model),
//           W2 [F, D] P(model, None); all_gather x over model, x @ W1, @ W2 (partial sums over
//           model), psum_scatter over model -> [B, D] P(None, model). The seed's specs do not
//           use "data": the two rows of the mesh compute the same blocks.
// training  one SGD step of seed 002's MLP ([784, H, H, H, 10], relu, loss = mean over the
//           batch of the summed squared error) with the batch over 8 devices ("batch") and
//           the parameters replicated: the loss written in the global view (every matmul
//           names its output spec), its gradients by ts::value_and_grad (typed unreduced
//           over "batch"), the SGD update by ts::zero_sgd_update (ZeRO-1: each device reduces
//           and updates its 1/8 of every parameter, then the parameter is all-gathered).
#include <cmath>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "typeshard_contender.hpp"

namespace compare {
namespace {

using ts::none;

// ---- megatron ------------------------------------------------------------------------------

using mesh_dm = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
using P_cols = ts::spec<none, "model">;
using P_rows = ts::spec<"model", none>;

auto megatron_program() {
  return ts::shard_map<mesh_dm, ts::specs<P_cols, P_cols, P_rows>, P_cols>(
      [](const auto& x_block, const auto& w1, const auto& w2) {
        const auto x_full = ts::all_gather<"model">(x_block, 1);  // [B, D_y] -> [B, D]
        const auto temp = ts::matmul(x_full, w1);                 // [B, D] . [D, F_y] -> [B, F_y]
        const auto partial = ts::matmul(temp, w2);                // [B, F_y] . [F_y, D] {U_y}
        return ts::psum_scatter<"model">(partial, 1);             // -> [B, D_y]
      });
}

ts::host_tensor<float, 2> host_matrix(std::size_t rows, std::size_t cols, std::uint64_t seed,
                                      float scale = 1.0f) {
  ts::host_tensor<float, 2> t({rows, cols});
  fill(t.data(), t.size(), seed, 0, scale);
  return t;
}

class megatron final : public instance {
 public:
  explicit megatron(const params& p) : b_(p.get("batch")), d_(p.get("d")), f_(p.get("f")) {
    x_.emplace(ts::device_put<P_cols>(mesh_, host_matrix(b_, d_, 1)));
    w1_.emplace(ts::device_put<P_cols>(mesh_, host_matrix(d_, f_, 2, 1.0f / std::sqrt(float(d_)))));
    w2_.emplace(ts::device_put<P_rows>(mesh_, host_matrix(f_, d_, 3, 1.0f / std::sqrt(float(f_)))));
  }
  void run() override {
    out_.reset();
    out_.emplace(program_(*x_, *w1_, *w2_));
  }
  std::vector<double> check() override { return sample_array(*out_); }
  std::string info() override {
    return gemm_info() +
           "shard_map: all_gather<model>(x, 1); matmul; matmul; psum_scatter<model>(., 1)";
  }

 private:
  using program_t = decltype(megatron_program());
  using arr_cols =
      decltype(ts::device_put<P_cols>(std::declval<const ts::device_mesh<mesh_dm>&>(),
                                      std::declval<const ts::host_tensor<float, 2>&>()));
  using arr_rows =
      decltype(ts::device_put<P_rows>(std::declval<const ts::device_mesh<mesh_dm>&>(),
                                      std::declval<const ts::host_tensor<float, 2>&>()));
  using out_t = decltype(std::declval<const program_t&>()(std::declval<const arr_cols&>(),
                                                          std::declval<const arr_cols&>(),
                                                          std::declval<const arr_rows&>()));
  std::size_t b_, d_, f_;
  ts::device_mesh<mesh_dm> mesh_{devices()};
  program_t program_ = megatron_program();
  std::optional<arr_cols> x_, w1_;
  std::optional<arr_rows> w2_;
  std::optional<out_t> out_;
};

// ---- training step ---------------------------------------------------------------------------

using mesh_8 = ts::mesh<ts::axis("batch", 8)>;
using P_batch = ts::spec<"batch", none>;
using P_rep = ts::spec<none, none>;
using P_vec = ts::spec<none>;
// ZeRO-1: device r updates rows [r n/8, (r+1) n/8) of every parameter (the threads program
// updates the same slices of the flattened parameter; rows of a row-major matrix are those).
using P_wshard = ts::spec<"batch", none>;
using P_bshard = ts::spec<"batch">;

// The loss of seed 002's MLP in the global view: every matmul names its output spec (the
// batch rows over "batch"), the bias broadcasts over the rows, relu between the layers,
// loss = (sum over the batch of the squared error) / batch.
struct mlp_loss {
  float inv_batch;
  template <class W0, class B0, class W1, class B1, class W2, class B2, class W3, class B3,
            class X, class Y>
  auto operator()(const W0& w0, const B0& b0, const W1& w1, const B1& b1, const W2& w2,
                  const B2& b2, const W3& w3, const B3& b3, const X& x, const Y& y) const {
    const auto h1 = ts::relu(ts::matmul<P_batch>(x, w0) + b0);
    const auto h2 = ts::relu(ts::matmul<P_batch>(h1, w1) + b1);
    const auto h3 = ts::relu(ts::matmul<P_batch>(h2, w2) + b2);
    const auto e = (ts::matmul<P_batch>(h3, w3) + b3) - y;
    return ts::sum(e * e) * inv_batch;
  }
};

using matrix_rep =
    decltype(ts::device_put<P_rep>(std::declval<const ts::device_mesh<mesh_8>&>(),
                                   std::declval<const ts::host_tensor<float, 2>&>()));
using vector_rep =
    decltype(ts::device_put<P_vec>(std::declval<const ts::device_mesh<mesh_8>&>(),
                                   std::declval<const ts::host_tensor<float, 1>&>()));
using matrix_batch =
    decltype(ts::device_put<P_batch>(std::declval<const ts::device_mesh<mesh_8>&>(),
                                     std::declval<const ts::host_tensor<float, 2>&>()));

// One step: the gradients of the 8 parameters by ts::value_and_grad (each typed unreduced
// over "batch": the batch is sharded, the parameters are not), then ZeRO-1 SGD: each
// device reduces its shard of every gradient and updates it, and the parameter is
// all-gathered back to every device.
class training final : public instance {
 public:
  explicit training(const params& p) : shape_(p), loss_{1.0f / static_cast<float>(shape_.batch)} {
    for (std::size_t l = 0; l < shape_.layers(); ++l) {
      ts::host_tensor<float, 1> b({shape_.sizes[l + 1]});
      fill(b.data(), b.size(), 20 + l);
      w_.push_back(ts::device_put<P_rep>(
          mesh_, host_matrix(shape_.sizes[l], shape_.sizes[l + 1], 10 + l, shape_.w_scale(l))));
      b_.push_back(ts::device_put<P_vec>(mesh_, b));
    }
    inputs_.emplace(
        ts::device_put<P_batch>(mesh_, host_matrix(shape_.batch, shape_.sizes.front(), 1)));
    targets_.emplace(
        ts::device_put<P_batch>(mesh_, host_matrix(shape_.batch, shape_.sizes.back(), 2)));
  }

  void run() override {
    auto [loss, g] = ts::value_and_grad<0, 1, 2, 3, 4, 5, 6, 7>(loss_)(
        w_[0], b_[0], w_[1], b_[1], w_[2], b_[2], w_[3], b_[3], *inputs_, *targets_);
    (void)loss;
    if (!sampled_) {  // the warm-up only (not timed): the first step's dW, all-reduced
      dw_samples_[0] = sample_array(ts::reshard<P_rep>(std::get<0>(g)));
      dw_samples_[3] = sample_array(ts::reshard<P_rep>(std::get<6>(g)));
      sampled_ = true;
    }
    update(std::make_index_sequence<4>{}, g);
  }

  std::vector<double> check() override {  // the warm-up's (the first step's) dW samples
    std::vector<double> out;
    for (std::size_t l : checked_layers)
      out.insert(out.end(), dw_samples_[l].begin(), dw_samples_[l].end());
    return out;
  }
  std::string info() override {
    return gemm_info() + "ts::value_and_grad of the global-view loss (matmul<P(batch, None)>, "
           "+ bias, relu); ts::zero_sgd_update<P(batch, ...)> (ZeRO-1: fused reduce-scatter + "
           "update, all-gather)";
  }

 private:
  template <std::size_t... L, class Grads>
  void update(std::index_sequence<L...>, const Grads& g) {
    ((w_[L] = ts::zero_sgd_update<P_wshard>(w_[L], std::get<2 * L>(g), shape_.step),
      b_[L] = ts::zero_sgd_update<P_bshard>(b_[L], std::get<2 * L + 1>(g), shape_.step)),
     ...);
  }

  mlp_shape shape_;
  mlp_loss loss_;
  ts::device_mesh<mesh_8> mesh_{devices()};
  std::vector<matrix_rep> w_;
  std::vector<vector_rep> b_;
  std::optional<matrix_batch> inputs_, targets_;
  std::vector<double> dw_samples_[4];
  bool sampled_ = false;
};

template <class T>
factory make() {
  return [](const params& p) -> std::unique_ptr<instance> { return std::make_unique<T>(p); };
}

}  // namespace

void add_model_workloads(registry& r) {
  r["megatron"] = make<megatron>();
  r["training"] = make<training>();
}

}  // namespace compare
