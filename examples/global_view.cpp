// examples/global_view.cpp: two programs written in the typed global view only: no
// ts::shard_map, no loops over elements on the device side. Each op's plan, chosen at compile
// time from the operands' specs, is printed for the steps where collectives run, and each
// result is compared with a plain serial computation on the same data (max relative error;
// exit code 1 above the tolerance).
//   1. One data-parallel training step of a two-layer MLP on a 2x2 ("data", "model") mesh: the
//      batch sharded over "data", the parameters replicated. Bias adds broadcast, the loss is
//      ts::mean of the squared error, the gradients are einsum products written out by hand.
//      Contracting the batch leaves every weight gradient unreduced over "data" (its type says
//      so); ts::reshard all-reduces it, and nothing else communicates.
//   2. A Megatron MLP forward: W1's columns and W2's rows (the hidden dimension) sharded over
//      "model"; the second einsum is unreduced over "model" and ts::reshard psums it.
// The batch (9 rows over 2 "data" devices) makes the shards uneven: 5 and 4 rows.
#include <cmath>
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

using host2 = ts::host_tensor<float, 2>;
using host1 = ts::host_tensor<float, 1>;

examples::checker check;
constexpr double tolerance = 1e-4;  // relative; float sums of a few dozen terms

host2 normal2(std::size_t rows, std::size_t cols, std::mt19937& rng) {
  std::normal_distribution<float> n(0.0f, 0.5f);
  host2 t({rows, cols});
  for (float& v : t.values()) v = n(rng);
  return t;
}

template <class Host>
void verify(const std::string& what, const Host& got, const Host& serial) {
  const double err = examples::max_relative_error(got, serial);
  std::cout << "  " << what << ": max relative error " << err << " (tolerance " << tolerance
            << ")\n";
  check(err <= tolerance, what);
}

// ---- the serial reference: plain loops on host tensors, double accumulation ----------------
// a @ b, or a.T @ b (trans_a), or a @ b.T (trans_b).
host2 product(const host2& a, const host2& b, bool trans_a = false, bool trans_b = false) {
  const std::size_t n = trans_a ? a.extent(1) : a.extent(0);
  const std::size_t k = trans_a ? a.extent(0) : a.extent(1);
  const std::size_t m = trans_b ? b.extent(0) : b.extent(1);
  host2 c({n, m});
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < m; ++j) {
      double s = 0;
      for (std::size_t l = 0; l < k; ++l)
        s += double(trans_a ? a(l, i) : a(i, l)) * double(trans_b ? b(j, l) : b(l, j));
      c(i, j) = float(s);
    }
  return c;
}
host2 plus_bias(host2 z, const host1& b) {
  for (std::size_t i = 0; i < z.extent(0); ++i)
    for (std::size_t j = 0; j < z.extent(1); ++j) z(i, j) += b(j);
  return z;
}
host2 relu(host2 z) {
  for (float& v : z.values()) v = v > 0.0f ? v : 0.0f;
  return z;
}
host1 column_sums(const host2& d) {
  host1 s({d.extent(1)});
  for (std::size_t j = 0; j < d.extent(1); ++j) {
    double acc = 0;
    for (std::size_t i = 0; i < d.extent(0); ++i) acc += d(i, j);
    s(j) = float(acc);
  }
  return s;
}
template <class Host>
Host sgd(Host w, const Host& g, float lr) {
  for (std::size_t i = 0; i < w.size(); ++i) w.values()[i] -= lr * g.values()[i];
  return w;
}

}  // namespace

int main() {
  ts::cpu_devices devices{4};
  using mesh_2x2 = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
  const ts::device_mesh<mesh_2x2> mesh{devices};
  using rows_over_data = ts::spec<"data", ts::none>;
  using replicated2 = ts::spec<ts::none, ts::none>;
  using replicated1 = ts::spec<ts::none>;

  constexpr std::size_t B = 9, D = 6, H = 10, O = 3;  // batch, input, hidden, output
  std::mt19937 rng(0);  // the data
  const host2 x_h = normal2(B, D, rng), y_h = normal2(B, O, rng);
  // The parameters are drawn on the mesh (ts::random: each device draws its own shard), with
  // the subkeys of key(0); times 0.5: N(0, 0.25), as the data.
  const auto keys = ts::random::split<6>(ts::random::key(0));
  const float lr = 0.1f;

  section("1", "a data-parallel training step: the batch over data, gradients all-reduced");
  {
    // doc-snippet: data_parallel_step
    const auto X = ts::device_put<rows_over_data>(mesh, x_h);
    const auto Y = ts::device_put<rows_over_data>(mesh, y_h);
    const auto W1 = ts::random::normal<replicated2>(keys[0], mesh, ts::shape<2>{D, H}) * 0.5f;
    const auto W2 = ts::random::normal<replicated2>(keys[1], mesh, ts::shape<2>{H, O}) * 0.5f;
    const auto b1 = ts::random::normal<replicated1>(keys[2], mesh, ts::shape<1>{H}) * 0.5f;
    const auto b2 = ts::random::normal<replicated1>(keys[3], mesh, ts::shape<1>{O}) * 0.5f;

    // Forward: the bias adds broadcast [H] and [O] over the rows; nothing communicates.
    const auto z1 = ts::einsum<"bd,dh->bh">(X, W1) + b1;
    const auto a1 = ts::relu(z1);
    const auto p = ts::einsum<"bh,ho->bo">(a1, W2) + b2;
    const auto err = p - Y;
    const auto loss = ts::mean<ts::spec<>>(err * err);  // rank 0: the psum of the local means

    // Backward, by hand: d loss / d p = 2 (p - y) / (B * O).
    const auto dp = err * (2.0f / float(B * O));
    const auto dW2_partial = ts::einsum<"bh,bo->ho">(a1, dp);  // contracts the batch
    static_assert(
        std::is_same_v<decltype(dW2_partial)::unreduced_type, ts::unreduced<"data">>,
        "the data-parallel gradient is a partial sum over data until it is reduced");
    const auto dW2 = ts::reshard<replicated2>(dW2_partial);        // all-reduce over data
    const auto db2 = ts::reshard<replicated1>(ts::sum<0>(dp));     // likewise
    const auto dz1 = ts::zip(ts::einsum<"bo,ho->bh">(dp, W2), z1,  // relu'
                             [](float g, float z) { return z > 0.0f ? g : 0.0f; });
    const auto dW1 = ts::reshard<replicated2>(ts::einsum<"bd,bh->dh">(X, dz1));
    const auto db1 = ts::reshard<replicated1>(ts::sum<0>(dz1));
    const auto W1_next = W1 - dW1 * lr, W2_next = W2 - dW2 * lr;
    const auto b1_next = b1 - db1 * lr, b2_next = b2 - db2 * lr;
    // doc-snippet-end

    using dp_t = std::remove_cvref_t<decltype(dp)>;
    using a1_t = std::remove_cvref_t<decltype(a1)>;
    std::cout << "z1 = einsum<\"bd,dh->bh\">(X, W1): "
              << ts::einsum_plan_for<"bd,dh->bh", decltype(X), decltype(W1)>::describe() << "\n"
              << "loss = mean<P()>(err * err): "
              << ts::reduce_plan_with<ts::reduction::mean, std::remove_cvref_t<decltype(err)>,
                                      ts::spec<>, false>::describe()
              << "\n"
              << "dW2 = einsum<\"bh,bo->ho\">(a1, dp): "
              << ts::einsum_plan_for<"bh,bo->ho", a1_t, dp_t>::describe() << ", result "
              << decltype(dW2_partial)::spec::to_string() << " unreduced "
              << decltype(dW2_partial)::unreduced_type::to_string() << "\n"
              << "reshard<P(None, None)>(dW2): "
              << ts::reshard_plan_for<std::remove_cvref_t<decltype(dW2_partial)>,
                                      replicated2>::describe()  // ends in a newline
              << "dh = einsum<\"bo,ho->bh\">(dp, W2): "
              << ts::einsum_plan_for<"bo,ho->bh", dp_t, decltype(W2)>::describe() << "\n";

    // The same step, serially, from the same parameters.
    const host2 w1_h = ts::to_host(W1), w2_h = ts::to_host(W2);
    const host1 b1_h = ts::to_host(b1), b2_h = ts::to_host(b2);
    const host2 z1_s = plus_bias(product(x_h, w1_h), b1_h);
    const host2 a1_s = relu(z1_s);
    const host2 p_s = plus_bias(product(a1_s, w2_h), b2_h);
    host2 dp_s({B, O});
    double loss_s = 0;
    for (std::size_t i = 0; i < B; ++i)
      for (std::size_t j = 0; j < O; ++j) {
        const double e = double(p_s(i, j)) - double(y_h(i, j));
        loss_s += e * e;
        dp_s(i, j) = float(2.0 * e / double(B * O));
      }
    loss_s /= double(B * O);
    host2 dz1_s = product(dp_s, w2_h, false, true);
    for (std::size_t i = 0; i < B; ++i)
      for (std::size_t j = 0; j < H; ++j)
        if (z1_s(i, j) <= 0.0f) dz1_s(i, j) = 0.0f;

    std::cout << "loss " << loss.item() << " (serial " << loss_s << ")\n";
    verify("loss", ts::to_host(loss), ts::host_tensor<float, 0>({}, float(loss_s)));
    verify("W1 after the step", ts::to_host(W1_next), sgd(w1_h, product(x_h, dz1_s, true), lr));
    verify("b1 after the step", ts::to_host(b1_next), sgd(b1_h, column_sums(dz1_s), lr));
    verify("W2 after the step", ts::to_host(W2_next), sgd(w2_h, product(a1_s, dp_s, true), lr));
    verify("b2 after the step", ts::to_host(b2_next), sgd(b2_h, column_sums(dp_s), lr));
  }

  section("2", "a Megatron MLP forward: the hidden dimension over model");
  {
    constexpr std::size_t F = 14;  // the hidden dimension: 7 per "model" shard
    using columns = ts::spec<ts::none, "model">;
    using rows = ts::spec<"model", ts::none>;
    // doc-snippet: megatron_forward
    const auto X = ts::device_put<rows_over_data>(mesh, x_h);
    const auto V1 = ts::random::normal<columns>(keys[4], mesh, ts::shape<2>{D, F}) * 0.5f;
    const auto V2 = ts::random::normal<rows>(keys[5], mesh, ts::shape<2>{F, D}) * 0.5f;
    const auto Hd = ts::relu(ts::einsum<"bd,df->bf">(X, V1));  // P("data", "model"): no comm
    const auto U = ts::einsum<"bf,fd->bd">(Hd, V2);            // a partial sum over model
    static_assert(std::is_same_v<decltype(U)::unreduced_type, ts::unreduced<"model">>);
    const auto out = ts::reshard<rows_over_data>(U);            // psum over model
    // doc-snippet-end

    using h_t = std::remove_cvref_t<decltype(Hd)>;
    std::cout << "H = einsum<\"bd,df->bf\">(X, V1): "
              << ts::einsum_plan_for<"bd,df->bf", decltype(X), decltype(V1)>::describe()
              << ", H " << h_t::spec::to_string() << "\n"
              << "U = einsum<\"bf,fd->bd\">(H, V2): "
              << ts::einsum_plan_for<"bf,fd->bd", h_t, decltype(V2)>::describe() << ", unreduced "
              << decltype(U)::unreduced_type::to_string() << "\n"
              << "reshard<P('data', None)>(U): "
              << ts::reshard_plan_for<std::remove_cvref_t<decltype(U)>, rows_over_data>::describe();
    const host2 v1_h = ts::to_host(V1), v2_h = ts::to_host(V2);  // the serial run's copies
    verify("Megatron MLP output", ts::to_host(out), product(relu(product(x_h, v1_h)), v2_h));
  }

  return check.exit_code("global_view");
}
