// examples/seed003_solves.cpp: seed 003 (Cophy2024) exercise 2, "Batching linear solvers
// across devices": 8 systems A_i x_i = b_i, stacked and sharded over a 1-D mesh of 8 so that
// each device solves its own with a per-shard kernel (ts::shard_map), no communication.
//
//   As = [normal(PRNGKey(i), (16, 16)) for i in range(8)]; bs = [normal(PRNGKey(i + 8), (16,))]
//   mesh = make_mesh((8,), ('x',)); sharding = NamedSharding(mesh, P('x'))
//   @partial(shard_map, mesh=mesh, in_specs=(P('x'), P('x')), out_specs=P('x'))
//   def batch_solvers(A, b): return jnp.linalg.solve(A, b)     # per device: [1, 16, 16], [1, 16]
//
// jnp.linalg.solve is an LU factorisation with partial pivoting; this program writes one
// (lu_solve below) and runs it inside the shard_map. The checks are the notebook's
// (A_i . x_i == b_i with rtol = atol = 1e-4) plus a serial run of the same solver over the
// 8 systems, one after the other on the host, which the distributed result must equal bit for
// bit (each device runs the same float operations on the same data).
//
// The layouts of the rest of exercise 1 (the 1-D mesh, half mesh, transposed, 2-D, partial
// and "mysterious" meshes) are in examples/layouts.cpp.
//
// Data: std::mt19937 seeded with i for A_i and i + 8 for b_i (as the notebook's PRNGKey(i)),
// std::normal_distribution<float>; the values differ from JAX's, the checks do not depend on
// them. The seed's sizes (8 systems of 16) are the default, so --large changes nothing.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <typeshard/typeshard.hpp>

#include "support/print.hpp"

namespace ts = typeshard;
using examples::section;

namespace {

examples::checker check;

// Solves A x = b for one n x n system (row-major A) by LU factorisation with partial pivoting
// (the algorithm behind jnp.linalg.solve), in place on copies: Gaussian elimination on the
// augmented rows, then back substitution. float throughout, as JAX's float32. Throws if A is
// singular to working precision, so a failure reaches the caller as a device_error.
// noinline: the devices and the serial loop then run one copy of the machine code, so the
// bit-for-bit comparison below cannot trip over two inlined copies contracted differently.
template <class T>
[[gnu::noinline]] void lu_solve(std::size_t n, const T* a_in, const T* b_in, T* x) {
  std::vector<T> a(a_in, a_in + n * n), b(b_in, b_in + n);
  for (std::size_t k = 0; k < n; ++k) {
    // The largest |a_ik| below the diagonal becomes the pivot: it bounds the multipliers by 1,
    // which is what keeps elimination stable.
    std::size_t p = k;
    for (std::size_t i = k + 1; i < n; ++i)
      if (std::abs(a[i * n + k]) > std::abs(a[p * n + k])) p = i;
    if (a[p * n + k] == T{}) throw std::runtime_error("lu_solve: the matrix is singular");
    if (p != k) {
      for (std::size_t j = 0; j < n; ++j) std::swap(a[k * n + j], a[p * n + j]);
      std::swap(b[k], b[p]);
    }
    for (std::size_t i = k + 1; i < n; ++i) {
      const T l = a[i * n + k] / a[k * n + k];
      for (std::size_t j = k + 1; j < n; ++j) a[i * n + j] -= l * a[k * n + j];
      b[i] -= l * b[k];
    }
  }
  for (std::size_t k = n; k-- > 0;) {
    T s = b[k];
    for (std::size_t j = k + 1; j < n; ++j) s -= a[k * n + j] * x[j];
    x[k] = s / a[k * n + k];
  }
}

}  // namespace

int main(int argc, char** argv) {
  const examples::options opts = examples::parse_options(
      argc, argv,
      "accepted for symmetry with the other examples: the seed's sizes (8 systems of "
      "16 unknowns) are the default already");
  if (opts.exit >= 0) return opts.exit;

  constexpr std::size_t systems = 8, n = 16;
  ts::cpu_devices devices{8};  // XLA_FLAGS=--xla_force_host_platform_device_count=8

  section("2", "Batching linear solvers across devices");
  // As = [jax.random.normal(jax.random.PRNGKey(i), (16, 16)) for i in range(8)], stacked.
  ts::host_tensor<float, 3> As({systems, n, n});
  ts::host_tensor<float, 2> bs({systems, n});
  for (std::size_t i = 0; i < systems; ++i) {
    std::mt19937 rng_a(static_cast<unsigned>(i)), rng_b(static_cast<unsigned>(i + systems));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (std::size_t e = 0; e < n * n; ++e) As.data()[i * n * n + e] = normal(rng_a);
    normal.reset();
    for (std::size_t e = 0; e < n; ++e) bs(i, e) = normal(rng_b);
  }

  // doc-snippet: batch_solvers
  using mesh_8 = ts::mesh<ts::axis("x", 8)>;
  const ts::device_mesh<mesh_8> mesh{devices};  // jax.make_mesh((8,), ('x',))
  using P_x = ts::spec<"x">;                    // P('x'): the batch dimension over x

  const auto As_sharded = ts::device_put<P_x>(mesh, As);  // [8, 16, 16], one matrix per device
  const auto bs_sharded = ts::device_put<P_x>(mesh, bs);  // [8, 16], one right-hand side each

  // Each device receives its [1, 16, 16] and [1, 16] blocks and solves its own systems (a
  // block may hold several if the batch is larger than the mesh); nothing is communicated.
  const auto batch_solvers =
      ts::shard_map<mesh_8, ts::specs<P_x, P_x>, P_x>([](const auto& A, const auto& b) {
        std::remove_cvref_t<decltype(b)> x(b.context(), b.extents());  // zeros, varies over x
        for (std::size_t s = 0; s < b.extent(0); ++s)
          lu_solve(n, A.data() + s * n * n, b.data() + s * n, x.data() + s * n);
        return x;
      });
  const auto x_sharded = batch_solvers(As_sharded, bs_sharded);
  // doc-snippet-end
  static_assert(std::is_same_v<decltype(x_sharded)::spec, ts::spec<"x", ts::none>>);
  std::cout << "x_sharded: " << ts::to_string(x_sharded.extents()) << ", "
            << x_sharded.sharding_string() << "\n";
  ts::visualize(x_sharded);
  for (const auto& s : x_sharded.addressable_shards())
    check(s.index[0].start == s.mesh_position && s.shape[0] == 1,
          "device " + std::to_string(s.device.id) + " holds system " +
              std::to_string(s.index[0].start) + " (expected its own one)");

  // x_s = process_allgather(x_sharded); b_hat = [A @ x for A, x in zip(As, x_s)]
  const ts::host_tensor<float, 2> x_s = ts::to_host(x_sharded);
  double worst_residual = 0;
  for (std::size_t i = 0; i < systems; ++i) {
    bool close = true;
    for (std::size_t r = 0; r < n; ++r) {
      double b_hat = 0;  // (A_i . x_i)[r], accumulated in double
      for (std::size_t c = 0; c < n; ++c) b_hat += double(As(i, r, c)) * double(x_s(i, c));
      const double diff = std::abs(b_hat - double(bs(i, r)));
      worst_residual = std::max(worst_residual, diff);
      close = close &&
              diff <= 1e-4 + 1e-4 * std::abs(double(bs(i, r)));  // jnp.allclose(rtol, atol = 1e-4)
    }
    check(close, "system " + std::to_string(i) + ": A x differs from b");
  }
  std::cout << "all(allclose(A_i @ x_i, b_i, rtol=1e-4, atol=1e-4)): "
            << (worst_residual <= 1e-4 ? "True" : "see the checks") << " (largest |A x - b| "
            << worst_residual << ")\n";

  // The serial computation: the same solver over the 8 systems, one after the other.
  ts::host_tensor<float, 2> x_serial({systems, n});
  for (std::size_t i = 0; i < systems; ++i)
    lu_solve(n, As.data() + i * n * n, bs.data() + i * n, x_serial.data() + i * n);
  const bool same = x_s == x_serial;
  std::cout << "the distributed solutions equal the serial loop's bit for bit: "
            << (same ? "yes" : "NO") << "\n";
  check(same, "the batched solve differs from the serial loop");

  return check.exit_code("seed003_solves");
}
