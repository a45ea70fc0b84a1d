// examples/seed004.cpp: seed 004 ("Parallelism"): a batched matmul with the batch dimension
// sharded over 8 devices, against a serial loop; then the psum normalisation.
//
//   1. numpy baseline: np.matmul(x, x) for x of shape 8 x N x N, as a serial loop of 8 GEMMs
//      on one thread (kernels::gemm, single-threaded as numpy's BLAS would be on one core).
//   2. pmap: each device makes its own N x N block of ones (no host copy: device_put with a
//      per-device callback, like pmap(lambda x: jnp.ones(...))), then pmap(jnp.matmul): every
//      element of yd[0] is N.
//   3. The batched matmul on random data, through ts::matmul (the plan is communication-free:
//      the batch dimension is sharded alike in both operands) and through ts::shard_map; both
//      against the serial loop, and timed against it (median of several runs, printed, not
//      checked: on a machine with fewer cores than devices the speed-up is at most the core
//      count).
//   4. normalize(x) = x / psum(x, 'p') over arange(8): the values sum to 1; and psum of
//      ones(8) is 8 on every device.
//
// Sizes: N = 512 by default; --large runs the seed's 8 x 4096 x 4096 (several minutes on two
// cores: a serial run alone is 1.1 TFLOP). Random data comes from std::mt19937 (seed 4).
// The exit code is 1 if any result differs from its serial computation.
#include <cmath>
#include <cstddef>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <typeshard/typeshard.hpp>

#include "support/print.hpp"

namespace ts = typeshard;
using examples::numpy_str;
using examples::section;

namespace {

examples::checker check;

// The serial baseline: C[b] = A[b] . B[b] for every batch element, one GEMM after the other
// on the calling thread.
ts::host_tensor<float, 3> serial_batched_matmul(const ts::host_tensor<float, 3>& a,
                                                const ts::host_tensor<float, 3>& b) {
  const std::size_t batch = a.extent(0), m = a.extent(1), k = a.extent(2), n = b.extent(2);
  ts::host_tensor<float, 3> c({batch, m, n});
  for (std::size_t i = 0; i < batch; ++i)
    ts::kernels::gemm<float>(m, n, k, a.data() + i * m * k, k, b.data() + i * k * n, n,
                             c.data() + i * m * n, n);
  return c;
}

// One element of a[batch] . b[batch] by the definition, accumulated in double: the reference
// the GEMMs are checked against.
double dot(const ts::host_tensor<float, 3>& a, const ts::host_tensor<float, 3>& b,
           std::size_t batch, std::size_t i, std::size_t j) {
  double acc = 0;
  for (std::size_t k = 0; k < a.extent(2); ++k)
    acc += static_cast<double>(a(batch, i, k)) * static_cast<double>(b(batch, k, j));
  return acc;
}

// Whether `got` is x . x: every element by the definition when the matrices are small, a
// random sample of 4096 elements when they are large (the definition costs N^3 per matrix).
bool is_product(const ts::host_tensor<float, 3>& got, const ts::host_tensor<float, 3>& x) {
  const std::size_t batch = x.extent(0), n = x.extent(1);
  const double tolerance = 1e-5 * static_cast<double>(n);  // float32 GEMM, values in [0, 1)
  auto close = [&](std::size_t b, std::size_t i, std::size_t j) {
    return std::abs(static_cast<double>(got(b, i, j)) - dot(x, x, b, i, j)) <= tolerance;
  };
  if (batch * n * n * n <= (std::size_t{1} << 28)) {
    for (std::size_t b = 0; b < batch; ++b)
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j)
          if (!close(b, i, j)) return false;
    return true;
  }
  std::mt19937 pick(1);
  std::uniform_int_distribution<std::size_t> any_b(0, batch - 1), any_i(0, n - 1);
  for (int s = 0; s < 4096; ++s)
    if (!close(any_b(pick), any_i(pick), any_i(pick))) return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const examples::options opts = examples::parse_options(
      argc, argv, "the seed's 8 x 4096 x 4096 batch (default 8 x 512 x 512)");
  if (opts.exit >= 0) return opts.exit;
  const std::size_t n = opts.large ? 4096 : 512;
  const std::size_t runs = opts.large ? 3 : 5;

  // doc-snippet: mesh
  ts::cpu_devices devices{8};
  using mesh_8 = ts::mesh<ts::axis("p", 8)>;  // pmap's axis_name='p' over the 8 devices
  const ts::device_mesh<mesh_8> mesh{devices};
  using P_batch = ts::spec<"p">;  // the batch dimension over "p", the matrices whole
  // doc-snippet-end
  std::cout << "batch 8 x " << n << " x " << n << " on " << mesh.to_string() << "\n";

  // x: 8 random N x N matrices.
  ts::host_tensor<float, 3> x({8, n, n});
  {
    std::mt19937 rng(4);
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    for (float& v : x.values()) v = uniform(rng);
  }

  section("1", "numpy baseline: a serial loop of 8 GEMMs");
  ts::host_tensor<float, 3> baseline;
  const double serial_ms =
      examples::median_ms(runs, [&] { baseline = serial_batched_matmul(x, x); });
  std::cout << "np.matmul(x, x).shape = " << ts::to_string(baseline.extents()) << "\n";
  std::cout << "serial loop: " << examples::format_ms(serial_ms) << " (median of " << runs
            << " runs)\n";
  check(is_product(baseline, x), "the serial loop is not x . x");

  section("2", "pmap: blocks made on their devices");
  {
    // doc-snippet: pmap
    // xd = pmap(lambda x: jnp.ones((N, N)))(np.arange(8)): each device makes its own block.
    const auto xd = ts::device_put<P_batch>(mesh, ts::shape<3>{8, n, n}, [](const auto& index) {
      return ts::host_tensor<float, 3>({index[0].size(), index[1].size(), index[2].size()}, 1.0f);
    });
    // yd = pmap(jnp.matmul)(xd, xd)
    const auto yd = ts::matmul(xd, xd);
    std::cout << "yd.shape = " << ts::to_string(yd.extents()) << ", sharded "
              << decltype(yd)::spec::to_string() << "\n";
    const ts::host_tensor<float, 3> y = ts::to_host(yd);
    ts::host_tensor<float, 2> yd0({3, 3});  // yd[0][:3, :3]
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t j = 0; j < 3; ++j) yd0(i, j) = y(0, i, j);
    std::cout << "yd[0][:3, :3] =\n" << numpy_str(yd0) << "\n";
    // doc-snippet-end
    bool all_n = true;  // serial: a row of N ones times a column of N ones is N
    for (float v : y.values()) all_n = all_n && v == static_cast<float>(n);
    check(all_n, "pmap(jnp.matmul) of ones: an element differs from N");
    for (const auto& s : xd.addressable_shards())
      check(s.shape == ts::shape<3>{1, n, n}, "pmap: each device holds one N x N matrix");
  }

  section("3", "The batched matmul, batch sharded over 8 devices");
  {
    // doc-snippet: batched
    const auto X = ts::device_put<P_batch>(mesh, x);
    // Global view: the batch dimension is sharded alike in both operands, so every device
    // multiplies its own matrices and nothing moves.
    using plan = ts::matmul_plan_for<decltype(X), decltype(X)>;
    static_assert(ts::communication_free<plan>);
    std::cout << "ts::matmul(X, X): plan " << plan::describe() << "\n";
    auto Y = ts::matmul(X, X);
    static_assert(std::is_same_v<decltype(Y)::spec, ts::spec<"p", ts::none, ts::none>>);

    // Per device, as pmap(jnp.matmul) writes it.
    const auto batched = ts::shard_map<mesh_8, ts::specs<P_batch, P_batch>, P_batch>(
        [](const auto& a, const auto& b) { return ts::matmul(a, b); });

    const double global_ms = examples::median_ms(runs, [&] { Y = ts::matmul(X, X); });
    const double manual_ms = examples::median_ms(runs, [&] { (void)batched(X, X); });
    std::cout << "serial loop:             " << examples::format_ms(serial_ms) << "\n";
    std::cout << "ts::matmul on 8 devices: " << examples::format_ms(global_ms) << " (median of "
              << runs << " runs)\n";
    std::cout << "shard_map on 8 devices:  " << examples::format_ms(manual_ms) << " (median of "
              << runs << " runs)\n";
    // doc-snippet-end
    std::cout << "(" << std::thread::hardware_concurrency()
              << " hardware threads here: 8 devices can be at most that many times faster)\n";
    const ts::host_tensor<float, 3> got = ts::to_host(Y);
    const double err = examples::max_relative_error(got, baseline);
    std::cout << "ts::matmul vs the serial loop: max relative error " << err << "\n";
    check(err <= 1e-5, "ts::matmul differs from the serial loop");
    check(is_product(got, x), "ts::matmul is not x . x");
    check(examples::max_relative_error(ts::to_host(batched(X, X)), baseline) <= 1e-5,
          "shard_map differs from the serial loop");
  }

  section("4", "psum normalisation");
  {
    // doc-snippet: normalize
    // def normalize(x): return x / lax.psum(x, axis_name='p')
    // y_n = pmap(normalize, axis_name='p')(jnp.arange(8))
    const auto normalize = ts::shard_map<mesh_8, ts::spec<"p">, ts::spec<"p">>(
        [](const auto& x_block) { return x_block / ts::psum<"p">(x_block); });
    const ts::host_tensor<float, 1> y_n = ts::to_host(normalize(
        ts::device_put<ts::spec<"p">>(mesh, ts::arange<float>(8))));
    float total = 0;
    for (float v : y_n.values()) total += v;
    std::cout << "y_n.shape = " << ts::to_string(y_n.extents()) << "\n" << numpy_str(y_n) << "\n";
    std::cout << "y_n.sum() = " << total << "\n";

    // pmap(lambda x: jax.lax.psum(x, axis_name='i'), axis_name='i')(np.ones(8))
    const auto psum_all = ts::shard_map<mesh_8, ts::spec<"p">, ts::spec<"p">>(
        [](const auto& x_block) { return ts::psum<"p">(x_block); });
    const ts::host_tensor<float, 1> eights = ts::to_host(
        psum_all(ts::device_put<ts::spec<"p">>(mesh, ts::host_tensor<float, 1>({8}, 1.0f))));
    std::cout << numpy_str(eights) << "\n";
    // doc-snippet-end

    // Serial: x / sum(x), and a sum of ones.
    float sum = 0;
    for (std::size_t i = 0; i < 8; ++i) sum += static_cast<float>(i);
    bool same = true;
    for (std::size_t i = 0; i < 8; ++i)
      same = same && std::abs(y_n(i) - static_cast<float>(i) / sum) <= 1e-7f;
    check(same, "normalize differs from x / sum(x)");
    check(std::abs(total - 1.0f) <= 1e-6f, "the normalised values do not sum to 1");
    for (float v : eights.values()) check(v == 8.0f, "psum of ones(8) is not 8 on every device");
  }

  return check.exit_code("seed004");
}
