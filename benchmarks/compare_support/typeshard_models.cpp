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
//           the parameters replicated: forward in the global view (every matmul names its
//           output spec), hand-written backward pass whose products with a transposed operand
//           are per-block matmuls of ts::transpose views in shard_map (the weight gradients'
//           contraction over the sharded batch is a psum), SGD update of the replicated
//           parameters as global elementwise operations.
#include <cmath>
#include <optional>
#include <tuple>

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

// The backward pass's two products with a transposed operand, per block: ts::transpose is a
// view that the local GEMM reads transposed (BLAS's trans flags), so nothing is copied.
// a.T . dz: a and dz sharded over the batch (rows); the contraction over the sharded batch
// leaves each device a partial sum, which psum adds up (the weight gradient, replicated).
template <class A, class D>
auto weight_gradient(const A& a, const D& dz) {
  return ts::shard_map<mesh_8, ts::specs<P_batch, P_batch>, P_rep>(
      [](const auto& ab, const auto& db) {
        return ts::psum<"batch">(ts::matmul(ts::transpose(ab), db));
      })(a, dz);
}

// dz . W.T: dz sharded over the batch, W replicated: local products, no communication.
template <class D, class W>
auto input_gradient(const D& dz, const W& w) {
  return ts::shard_map<mesh_8, ts::specs<P_batch, P_rep>, P_batch>(
      [](const auto& db, const auto& wb) { return ts::matmul(db, ts::transpose(wb)); })(dz, w);
}

// z + b, b broadcast over the rows (b sharded as z's columns: replicated here).
template <class Z, class B>
auto add_bias(const Z& z, const B& b) {
  using S = typename Z::spec;
  return ts::shard_map<mesh_8, ts::specs<S, typename B::spec>, S>(
      [](const auto& zb, const auto& bb) {
        auto out = zb;
        float* o = out.data();
        const float* bias = bb.data();
        const std::size_t cols = zb.extent(1);
        for (std::size_t i = 0; i < zb.extent(0); ++i)
          for (std::size_t j = 0; j < cols; ++j) o[i * cols + j] += bias[j];
        return out;
      })(z, b);
}

// The sum over the batch (rows, sharded over "batch"): local sums, psum over "batch".
template <class Array>
auto column_sums(const Array& d) {
  return ts::shard_map<mesh_8, P_batch, P_vec>([](const auto& x) {
    using block_t = std::remove_cvref_t<decltype(x)>;
    ts::block<float, 1, mesh_8, block_t::varying> sums(x.context(), {x.extent(1)});
    float* s = sums.data();
    const float* in = x.data();
    const std::size_t cols = x.extent(1);
    for (std::size_t i = 0; i < x.extent(0); ++i)
      for (std::size_t j = 0; j < cols; ++j) s[j] += in[i * cols + j];
    return ts::psum<"batch">(sums);
  })(d);
}

using matrix_rep =
    decltype(ts::device_put<P_rep>(std::declval<const ts::device_mesh<mesh_8>&>(),
                                   std::declval<const ts::host_tensor<float, 2>&>()));
using vector_rep =
    decltype(ts::device_put<P_vec>(std::declval<const ts::device_mesh<mesh_8>&>(),
                                   std::declval<const ts::host_tensor<float, 1>&>()));
using matrix_batch =
    decltype(ts::device_put<P_batch>(std::declval<const ts::device_mesh<mesh_8>&>(),
                                     std::declval<const ts::host_tensor<float, 2>&>()));

struct layer {
  matrix_rep w;
  vector_rep b;
};

class training final : public instance {
 public:
  explicit training(const params& p) : shape_(p) {
    for (std::size_t l = 0; l < shape_.layers(); ++l) {
      ts::host_tensor<float, 1> b({shape_.sizes[l + 1]});
      fill(b.data(), b.size(), 20 + l);
      params_.push_back(
          {ts::device_put<P_rep>(
               mesh_, host_matrix(shape_.sizes[l], shape_.sizes[l + 1], 10 + l, shape_.w_scale(l))),
           ts::device_put<P_vec>(mesh_, b)});
    }
    inputs_.emplace(
        ts::device_put<P_batch>(mesh_, host_matrix(shape_.batch, shape_.sizes.front(), 1)));
    targets_.emplace(
        ts::device_put<P_batch>(mesh_, host_matrix(shape_.batch, shape_.sizes.back(), 2)));
  }

  void run() override {
    std::vector<layer> next = params_;  // shares the shards; step() replaces every layer
    step<0>(*inputs_, next);
    params_ = std::move(next);
    sampled_ = true;
  }

  std::vector<double> check() override {  // the warm-up's (the first step's) dW samples
    std::vector<double> out;
    for (std::size_t l : checked_layers)
      out.insert(out.end(), dw_samples_[l].begin(), dw_samples_[l].end());
    return out;
  }
  std::string info() override {
    return gemm_info() + "forward: global matmul<P(batch, None)>; backward: shard_map with "
           "psum<batch>(matmul(transpose(a), dz)) and matmul(dz, transpose(W))";
  }

 private:
  // Layer I forward and backward; returns d loss / d (layer I's input) for I > 0.
  template <std::size_t I>
  matrix_batch step(const matrix_batch& in, std::vector<layer>& next) {
    const layer& L = params_[I];
    const auto z = add_bias(ts::matmul<P_batch>(in, L.w), L.b);
    const matrix_batch dz = [&] {
      if constexpr (I == 3) {
        return (z - *targets_) * (2.0f / static_cast<float>(shape_.batch));
      } else {
        const matrix_batch da = step<I + 1>(ts::relu(z), next);
        return ts::zip(da, z, [](float g, float v) { return v > 0.0f ? g : 0.0f; });
      }
    }();
    const auto dW = weight_gradient(in, dz);  // psum over "batch"
    if (!sampled_) dw_samples_[I] = sample_array(dW);      // the warm-up only: not timed
    const auto db = column_sums(dz);
    next[I] = layer{L.w - dW * shape_.step, L.b - db * shape_.step};
    if constexpr (I > 0)
      return input_gradient(dz, L.w);
    else
      return dz;  // unused: the inputs need no gradient
  }

  mlp_shape shape_;
  ts::device_mesh<mesh_8> mesh_{devices()};
  std::vector<layer> params_;
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
