// examples/seed000.cpp: seed 000's three shard_map programs on a 2x2 ("data", "model") mesh,
// each written twice: per device with ts::shard_map and explicit collectives, as the notebook
// writes it, and in the global view with ts::matmul, where the compiler picks the same
// collectives (their plans are printed and static_asserted).
//   1. FSDP-style matmul: x and A sharded by rows over "data"; all_gather A over "data".
//   2. TP-style matmul: x and A sharded by columns over "model"; all_gather x over "model".
//   3. Megatron MLP: all_gather x over "model", x @ W1 (columns over "model"), @ W2 (rows
//      over "model") gives partial sums over "model", psum_scatter them.
// Every result is compared with a serial matmul (triple loop, double accumulation) of the same
// data; the exit code is 1 on a mismatch.
//
// Data: the notebook draws jax.random.normal(PRNGKey(0), ...) for every matrix. This program
// draws from std::normal_distribution over std::mt19937 seeded with 0, one stream for all
// matrices, so the values differ from JAX's; the checks do not depend on them. The sizes are
// the notebook's (x: 4 x 10, A: 10 x 10, W1: 10 x 40, W2: 40 x 10), so --large changes nothing.
#include <cstddef>
#include <iostream>
#include <random>
#include <string>
#include <type_traits>

#include <typeshard/typeshard.hpp>

#include "support/print.hpp"

namespace ts = typeshard;
using examples::section;

namespace {

examples::checker check;

ts::host_tensor<float, 2> normal(std::size_t rows, std::size_t cols, std::mt19937& rng) {
  std::normal_distribution<float> n(0.0f, 1.0f);
  ts::host_tensor<float, 2> t({rows, cols});
  for (float& v : t.values()) v = n(rng);
  return t;
}

// Compares a result with its serial computation and says so.
template <class Array>
void verify(const std::string& what, const Array& result, const ts::host_tensor<float, 2>& serial) {
  const double err = examples::max_relative_error(ts::to_host(result), serial);
  const bool ok = err <= 1e-5;
  std::cout << what << ": " << (ok ? "matches" : "DIFFERS FROM")
            << " the serial product (max relative error " << err << ")\n";
  check(ok, what);
}

}  // namespace

int main(int argc, char** argv) {
  const examples::options opts = examples::parse_options(
      argc, argv, "accepted for symmetry with the other examples: seed 000's sizes are the "
                  "notebook's already");
  if (opts.exit >= 0) return opts.exit;

  // doc-snippet: mesh
  ts::cpu_devices devices{4};
  // Mesh(np.array(jax.devices()).reshape(2, 2), axis_names=("data", "model"))
  using mesh_2x2 = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
  const ts::device_mesh<mesh_2x2> mesh{devices};
  using P_data = ts::spec<"data", ts::none>;          // PartitionSpec("data", None)
  using P_model_cols = ts::spec<ts::none, "model">;   // PartitionSpec(None, "model")
  using P_model_rows = ts::spec<"model", ts::none>;   // PartitionSpec("model", None)
  // doc-snippet-end

  std::mt19937 rng(0);
  const ts::host_tensor<float, 2> x_host = normal(4, 10, rng);
  const ts::host_tensor<float, 2> a_host = normal(10, 10, rng);
  const ts::host_tensor<float, 2> w1_host = normal(10, 40, rng);
  const ts::host_tensor<float, 2> w2_host = normal(40, 10, rng);
  std::cout << mesh_2x2::to_string() << " on devices 0..3; x: " << ts::to_string(x_host.extents())
            << ", A: " << ts::to_string(a_host.extents()) << ", W1: "
            << ts::to_string(w1_host.extents()) << ", W2: " << ts::to_string(w2_host.extents())
            << "\n";

  section("1", "FSDP-style matmul: the weight gathered over data");
  {
    // doc-snippet: fsdp
    const auto x = ts::device_put<P_data>(mesh, x_host);
    const auto A = ts::device_put<P_data>(mesh, a_host);

    // Per device: each holds half of A's rows (the same half on both devices of a "data"
    // coordinate); gathering over "data" gives every device all of A.
    const auto sharded_matmul = ts::shard_map<mesh_2x2, ts::specs<P_data, P_data>, P_data>(
        [](const auto& x_block, const auto& a_block) {
          const auto a_full = ts::all_gather<"data">(a_block, 0);  // [5, 10] -> [10, 10]
          return ts::matmul(x_block, a_full);                       // [2, 10] . [10, 10]
        });
    const auto B = sharded_matmul(x, A);
    ts::visualize(B);

    // Global view: J is sharded over "data" in A only, so the plan gathers A.
    const auto B_global = ts::matmul(x, A);
    using plan = ts::matmul_plan_for<decltype(x), decltype(A)>;
    static_assert(plan::steps[0].kind == ts::step_kind::all_gather &&
                  plan::steps[0].operand == ts::step_operand::rhs);
    static_assert(std::is_same_v<decltype(B_global)::spec, P_data>);
    std::cout << "ts::matmul(x, A): plan " << plan::describe() << ", result "
              << decltype(B_global)::spec::to_string() << "\n";
    // doc-snippet-end
    const auto serial = examples::serial_matmul(x_host, a_host);
    verify("shard_map", B, serial);
    verify("ts::matmul", B_global, serial);
  }

  section("2", "TP-style matmul: x gathered over model");
  {
    // doc-snippet: tp
    const auto x = ts::device_put<P_model_cols>(mesh, x_host);
    const auto A = ts::device_put<P_model_cols>(mesh, a_host);

    const auto sharded_matmul =
        ts::shard_map<mesh_2x2, ts::specs<P_model_cols, P_model_cols>, P_model_cols>(
            [](const auto& x_block, const auto& a_block) {
              const auto x_full = ts::all_gather<"model">(x_block, 1);  // [4, 5] -> [4, 10]
              return ts::matmul(x_full, a_block);  // [4, 10] . [10, 5]: varies over "model"
            });
    const auto B = sharded_matmul(x, A);
    ts::visualize(B);

    // Global view: J is sharded over "model" in x only, so the plan gathers x.
    const auto B_global = ts::matmul(x, A);
    using plan = ts::matmul_plan_for<decltype(x), decltype(A)>;
    static_assert(plan::steps[0].kind == ts::step_kind::all_gather &&
                  plan::steps[0].operand == ts::step_operand::lhs);
    static_assert(std::is_same_v<decltype(B_global)::spec, P_model_cols>);
    std::cout << "ts::matmul(x, A): plan " << plan::describe() << ", result "
              << decltype(B_global)::spec::to_string() << "\n";
    // doc-snippet-end
    const auto serial = examples::serial_matmul(x_host, a_host);
    verify("shard_map", B, serial);
    verify("ts::matmul", B_global, serial);
  }

  section("3", "Megatron MLP: all_gather x, x @ W1, @ W2, psum_scatter");
  {
    // doc-snippet: megatron
    const auto x = ts::device_put<P_model_cols>(mesh, x_host);
    const auto W1 = ts::device_put<P_model_cols>(mesh, w1_host);
    const auto W2 = ts::device_put<P_model_rows>(mesh, w2_host);

    const auto mlp =
        ts::shard_map<mesh_2x2, ts::specs<P_model_cols, P_model_cols, P_model_rows>, P_model_cols>(
            [](const auto& x_block, const auto& w1, const auto& w2) {
              const auto x_full = ts::all_gather<"model">(x_block, 1);  // [B, D_y] -> [B, D]
              const auto temp = ts::matmul(x_full, w1);      // [B, D] . [D, F_y] -> [B, F_y]
              const auto partial = ts::matmul(temp, w2);     // [B, F_y] . [F_y, D] -> [B, D] {U_y}
              return ts::psum_scatter<"model">(partial, 1);  // -> [B, D_y]
            });
    const auto B = mlp(x, W1, W2);
    ts::visualize(B);

    // Global view: the first product gathers x (J over "model" in x only); the second has
    // J = F over "model" in both operands, a partial sum, and the output spec P(None,
    // "model") asks for it to be reduce-scattered along D.
    const auto H = ts::matmul(x, W1);
    const auto B_global = ts::matmul<P_model_cols>(H, W2);
    using plan1 = ts::matmul_plan_for<decltype(x), decltype(W1)>;
    using plan2 = ts::matmul_plan_for<decltype(H), decltype(W2), P_model_cols>;
    static_assert(plan1::steps[0].kind == ts::step_kind::all_gather);
    static_assert(plan2::steps.back().kind == ts::step_kind::psum_scatter);
    std::cout << "H = ts::matmul(x, W1): plan " << plan1::describe() << ", H "
              << decltype(H)::spec::to_string() << "\n";
    std::cout << "ts::matmul<P(None, 'model')>(H, W2): plan " << plan2::describe() << "\n";
    // Without the output spec the product stays a partial sum, and its type says so.
    using partial = decltype(ts::matmul(H, W2));
    static_assert(std::is_same_v<partial::unreduced_type, ts::unreduced<"model">>);
    std::cout << "ts::matmul(H, W2) without an output spec: unreduced "
              << partial::unreduced_type::to_string() << "\n";
    // doc-snippet-end
    const auto serial = examples::serial_matmul(examples::serial_matmul(x_host, w1_host), w2_host);
    verify("shard_map", B, serial);
    verify("ts::matmul", B_global, serial);
  }

  return check.exit_code("seed000");
}
