// Seed 000's three shard_map programs on a 2x2 ("data", "model") mesh, each checked against
// a serial matmul of the same random data: FSDP-style (all_gather the weight over "data"),
// TP-style (all_gather x over "model"), and the Megatron MLP (all_gather x, x @ W1, @ W2,
// psum_scatter over "model").
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

namespace {

using mesh_2x2 = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
using P_data = ts::spec<"data", ts::none>;
using P_model_cols = ts::spec<ts::none, "model">;
using P_model_rows = ts::spec<"model", ts::none>;

unsigned seed() {
  static const unsigned s = std::random_device{}();
  return s;
}

ts::host_tensor<float, 2> normal(std::size_t rows, std::size_t cols, std::mt19937& rng) {
  ts::host_tensor<float, 2> t({rows, cols});
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (float& v : t.values()) v = n(rng);
  return t;
}

// The serial reference, accumulated in double.
ts::host_tensor<float, 2> matmul(const ts::host_tensor<float, 2>& a, const ts::host_tensor<float, 2>& b) {
  ts::host_tensor<float, 2> c({a.extent(0), b.extent(1)});
  for (std::size_t i = 0; i < a.extent(0); ++i)
    for (std::size_t j = 0; j < b.extent(1); ++j) {
      double acc = 0;
      for (std::size_t k = 0; k < a.extent(1); ++k) acc += double(a(i, k)) * double(b(k, j));
      c(i, j) = static_cast<float>(acc);
    }
  return c;
}

void require_close(const ts::host_tensor<float, 2>& got, const ts::host_tensor<float, 2>& want) {
  REQUIRE(got.extents() == want.extents());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(std::abs(got.data()[i] - want.data()[i]) <= 1e-4f * (1.0f + std::abs(want.data()[i])));
  }
}

}  // namespace

TEST_CASE("seed 000: FSDP-style matmul, the weight gathered over data", "[shard_map][seed]") {
  INFO("seed " << seed());
  std::mt19937 rng(seed());
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> mesh{devices};
  const auto x_host = normal(4, 10, rng);
  const auto a_host = normal(10, 10, rng);
  const auto x = ts::device_put<P_data>(mesh, x_host);
  const auto A = ts::device_put<P_data>(mesh, a_host);

  const auto sharded_matmul = ts::shard_map<mesh_2x2, ts::specs<P_data, P_data>, P_data>(
      [](const auto& x_block, const auto& a_block) {
        const auto a_full = ts::all_gather<"data">(a_block, 0);
        static_assert(!std::remove_cvref_t<decltype(a_full)>::template varies_over<"data">);
        return ts::matmul(x_block, a_full);
      });
  const auto B = sharded_matmul(x, A);
  static_assert(std::is_same_v<decltype(B)::spec, P_data>);
  require_close(ts::to_host(B), matmul(x_host, a_host));
}

TEST_CASE("seed 000: TP-style matmul, x gathered over model", "[shard_map][seed]") {
  INFO("seed " << seed());
  std::mt19937 rng(seed() + 1);
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> mesh{devices};
  const auto x_host = normal(4, 10, rng);
  const auto a_host = normal(10, 10, rng);
  const auto x = ts::device_put<P_model_cols>(mesh, x_host);
  const auto A = ts::device_put<P_model_cols>(mesh, a_host);

  const auto sharded_matmul =
      ts::shard_map<mesh_2x2, ts::specs<P_model_cols, P_model_cols>, P_model_cols>(
          [](const auto& x_block, const auto& a_block) {
            const auto x_full = ts::all_gather<"model">(x_block, 1);
            const auto temp = ts::matmul(x_full, a_block);
            static_assert(std::remove_cvref_t<decltype(temp)>::template varies_over<"model">);
            return temp;
          });
  const auto B = sharded_matmul(x, A);
  require_close(ts::to_host(B), matmul(x_host, a_host));
}

TEST_CASE("seed 000: Megatron MLP with psum_scatter", "[shard_map][seed]") {
  INFO("seed " << seed());
  std::mt19937 rng(seed() + 2);
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> mesh{devices};
  const auto x_host = normal(4, 10, rng);
  const auto w1_host = normal(10, 40, rng);
  const auto w2_host = normal(40, 10, rng);
  const auto x = ts::device_put<P_model_cols>(mesh, x_host);
  const auto W1 = ts::device_put<P_model_cols>(mesh, w1_host);
  const auto W2 = ts::device_put<P_model_rows>(mesh, w2_host);

  const auto mlp = ts::shard_map<mesh_2x2, ts::specs<P_model_cols, P_model_cols, P_model_rows>,
                                 P_model_cols>([](const auto& x_block, const auto& w1, const auto& w2) {
    const auto x_full = ts::all_gather<"model">(x_block, 1);  // [B, D_y] -> [B, D]
    const auto temp = ts::matmul(x_full, w1);                 // [B, D] . [D, F_y] -> [B, F_y]
    const auto partial = ts::matmul(temp, w2);                // [B, F_y] . [F_y, D] -> [B, D] {U_y}
    return ts::psum_scatter<"model">(partial, 1);             // [B, D_y]
  });
  const auto B = mlp(x, W1, W2);
  require_close(ts::to_host(B), matmul(matmul(x_host, w1_host), w2_host));

  SECTION("with a relu between the layers, and psum for a replicated output") {
    const auto mlp_relu = ts::shard_map<mesh_2x2, ts::specs<P_model_cols, P_model_cols, P_model_rows>,
                                        ts::spec<ts::none, ts::none>>(
        [](const auto& x_block, const auto& w1, const auto& w2) {
          const auto h = ts::relu(ts::matmul(ts::all_gather<"model">(x_block, 1), w1));
          return ts::psum<"model">(ts::matmul(h, w2));
        });
    auto hidden = matmul(x_host, w1_host);
    for (float& v : hidden.values()) v = v < 0 ? 0 : v;
    require_close(ts::to_host(mlp_relu(x, W1, W2)), matmul(hidden, w2_host));
  }
}
