// benchmarks/soak.cpp: a long run of seed 002's data-parallel MLP training loop (forward, a
// hand-written backward, SGD) on 8 simulated devices, checking that nothing accumulates:
// resident memory stays flat after a warm-up and the number of threads never changes. The
// parameters are compared with a serial double-precision run of the same loop as it goes,
// and the loss must go down.
//
//   scripts/soak                      # builds this (Release) and runs 10000 steps
//   build/soak/benchmarks/bench_soak [steps] [--rss-bound-kib N] [--check-every N]
//
// Not a test scripts/test runs (it takes a while); exit code 0 means every check held.
//
// The model: layer sizes 16 -> 32 -> 32 -> 4, relu between layers, loss
// mean_b(sum_k (pred - y)^2) as in seed 002, a batch of 64 sharded over a mesh axis "batch"
// of 8 (8 rows per device), the parameters replicated. One step is one shard_map (every
// device runs forward and backward on its rows; psum<"batch"> adds the gradients) and the SGD
// update as global elementwise operations on the replicated parameters (W - dW * lr).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

// Under AddressSanitizer resident memory includes the allocator's quarantine of freed blocks,
// which fills up over the run: the memory bound is reported but not enforced there (leaks are
// LeakSanitizer's to find, at exit).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TYPESHARD_SOAK_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TYPESHARD_SOAK_SANITIZED 1
#endif
#endif
#ifdef TYPESHARD_SOAK_SANITIZED
constexpr bool rss_is_meaningful = false;
#else
constexpr bool rss_is_meaningful = true;
#endif

namespace {

using mesh_dp = ts::mesh<ts::axis("batch", 8)>;
using rows = ts::spec<"batch", ts::none>;
using replicated = ts::spec<ts::none, ts::none>;

constexpr std::size_t batch = 64;
constexpr std::size_t sizes[] = {16, 32, 32, 4};
constexpr double step_size = 0.01;

using host = ts::host_tensor<double, 2>;

long proc_status(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(in, line))
    if (line.compare(0, key.size(), key) == 0) return std::strtol(line.c_str() + key.size(), nullptr, 10);
  return -1;
}

int failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what.c_str());
    ++failures;
  }
}

// ---- the serial reference ------------------------------------------------------------------

struct model {
  host w[3], b[3];  // w[l]: sizes[l] x sizes[l + 1]; b[l]: 1 x sizes[l + 1]
};

host matmul(const host& a, const host& b, bool ta = false, bool tb = false) {
  const std::size_t m = ta ? a.extent(1) : a.extent(0), k = ta ? a.extent(0) : a.extent(1);
  const std::size_t n = tb ? b.extent(0) : b.extent(1);
  host c({m, n});
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < k; ++j) {
      const double x = ta ? a(j, i) : a(i, j);
      for (std::size_t l = 0; l < n; ++l) c(i, l) += x * (tb ? b(l, j) : b(j, l));
    }
  return c;
}

// One SGD step of the reference; returns the loss before the step.
double reference_step(model& p, const host& x, const host& y) {
  host z[3], a[4];
  a[0] = x;
  for (int l = 0; l < 3; ++l) {
    z[l] = matmul(a[l], p.w[l]);
    for (std::size_t i = 0; i < z[l].extent(0); ++i)
      for (std::size_t j = 0; j < z[l].extent(1); ++j) z[l](i, j) += p.b[l](0, j);
    a[l + 1] = z[l];
    if (l < 2)
      for (double& v : a[l + 1].values()) v = v < 0 ? 0 : v;
  }
  double loss = 0;
  host d = z[2];
  for (std::size_t i = 0; i < d.size(); ++i) {
    const double e = z[2].data()[i] - y.data()[i];
    loss += e * e;
    d.data()[i] = 2 * e / batch;
  }
  for (int l = 2; l >= 0; --l) {
    const host dw = matmul(a[l], d, true, false);
    host db({1, d.extent(1)});
    for (std::size_t i = 0; i < d.extent(0); ++i)
      for (std::size_t j = 0; j < d.extent(1); ++j) db(0, j) += d(i, j);
    if (l > 0) {
      host dh = matmul(d, p.w[l], false, true);
      for (std::size_t i = 0; i < dh.size(); ++i)
        if (z[l - 1].data()[i] <= 0) dh.data()[i] = 0;
      d = dh;
    }
    for (std::size_t i = 0; i < dw.size(); ++i) p.w[l].data()[i] -= step_size * dw.data()[i];
    for (std::size_t i = 0; i < db.size(); ++i) p.b[l].data()[i] -= step_size * db.data()[i];
  }
  return loss / batch;
}

// ---- the per-device program ----------------------------------------------------------------

// A new block like `like` (same type, context) with the given extents.
template <class B>
B fresh(const B& like, std::size_t r, std::size_t c) {
  return B(like.context(), ts::shape<2>{r, c});
}

// b's transpose, same type.
template <class B>
B transpose(const B& b) {
  B t = fresh(b, b.extent(1), b.extent(0));
  double* o = t.data();
  for (std::size_t i = 0; i < b.extent(0); ++i)
    for (std::size_t j = 0; j < b.extent(1); ++j) o[j * b.extent(0) + i] = b(i, j);
  return t;
}

// z + bias broadcast over the rows.
template <class Z, class Bias>
Z add_rows(const Z& z, const Bias& bias) {
  Z out = fresh(z, z.extent(0), z.extent(1));
  double* o = out.data();
  for (std::size_t i = 0; i < z.extent(0); ++i)
    for (std::size_t j = 0; j < z.extent(1); ++j) o[i * z.extent(1) + j] = z(i, j) + bias(0, j);
  return out;
}

// The column sums, as a 1 x n block.
template <class D>
D column_sums(const D& d) {
  D out = fresh(d, 1, d.extent(1));
  double* o = out.data();
  for (std::size_t i = 0; i < d.extent(0); ++i)
    for (std::size_t j = 0; j < d.extent(1); ++j) o[j] += d(i, j);
  return out;
}

// dh, zeroed where the pre-activation z was not positive (relu's derivative).
template <class D, class Z>
D relu_grad(const D& dh, const Z& z) {
  D out = dh;
  double* o = out.data();
  for (std::size_t i = 0; i < out.size(); ++i)
    if (z.data()[i] <= 0) o[i] = 0;
  return out;
}

auto train_step() {
  return ts::shard_map<mesh_dp,
                       ts::specs<rows, rows, replicated, replicated, replicated, replicated,
                                 replicated, replicated>,
                       ts::specs<replicated, replicated, replicated, replicated, replicated,
                                 replicated, replicated>>(
      [](const auto& x, const auto& y, const auto& w1, const auto& b1, const auto& w2,
         const auto& b2, const auto& w3, const auto& b3) {
        // forward
        const auto z1 = add_rows(ts::matmul(x, w1), b1);
        const auto a1 = ts::relu(z1);
        const auto z2 = add_rows(ts::matmul(a1, w2), b2);
        const auto a2 = ts::relu(z2);
        const auto z3 = add_rows(ts::matmul(a2, w3), b3);
        // loss and its gradient
        const auto e = z3 - y;
        auto sq = fresh(e, 1, 1);
        for (double v : e.values()) sq.data()[0] += v * v;
        const auto d3 = e * (2.0 / batch);
        // backward
        const auto dw3 = ts::matmul(transpose(a2), d3);
        const auto db3 = column_sums(d3);
        const auto d2 = relu_grad(ts::matmul(d3, transpose(w3)), z2);
        const auto dw2 = ts::matmul(transpose(a1), d2);
        const auto db2 = column_sums(d2);
        const auto d1 = relu_grad(ts::matmul(d2, transpose(w2)), z1);
        const auto dw1 = ts::matmul(transpose(x), d1);
        const auto db1 = column_sums(d1);
        return std::make_tuple(ts::psum<"batch">(dw1), ts::psum<"batch">(db1),
                               ts::psum<"batch">(dw2), ts::psum<"batch">(db2),
                               ts::psum<"batch">(dw3), ts::psum<"batch">(db3),
                               ts::psum<"batch">(sq) * (1.0 / batch));
      });
}

host random_host(std::size_t r, std::size_t c, double scale, std::mt19937_64& rng) {
  std::normal_distribution<double> n(0.0, 1.0);
  host h({r, c});
  for (double& v : h.values()) v = n(rng) * scale;
  return h;
}

double max_relative_difference(const host& a, const host& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(a.data()[i] - b.data()[i]) / std::max(1.0, std::abs(b.data()[i])));
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t steps = 10000, check_every = 100;
  long rss_bound_kib = 2048;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--rss-bound-kib" && i + 1 < argc) rss_bound_kib = std::atol(argv[++i]);
    else if (arg == "--check-every" && i + 1 < argc) check_every = std::strtoull(argv[++i], nullptr, 10);
    else steps = std::strtoull(argv[i], nullptr, 10);
  }
  const std::size_t warm_up = std::min<std::size_t>(1000, steps / 10);
  const std::size_t sample_every = std::max<std::size_t>(1, steps / 40);

  std::mt19937_64 rng(2);
  model ref;
  for (int l = 0; l < 3; ++l) {
    ref.w[l] = random_host(sizes[l], sizes[l + 1], 1.0 / std::sqrt(double(sizes[l])), rng);
    ref.b[l] = random_host(1, sizes[l + 1], 1.0, rng);
  }
  const host hx = random_host(batch, sizes[0], 1.0, rng);
  const host hy = random_host(batch, sizes[3], 1.0, rng);

  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_dp> m{devices};
  const auto x = ts::device_put<rows>(m, hx);
  const auto y = ts::device_put<rows>(m, hy);
  auto w1 = ts::device_put<replicated>(m, ref.w[0]), b1 = ts::device_put<replicated>(m, ref.b[0]);
  auto w2 = ts::device_put<replicated>(m, ref.w[1]), b2 = ts::device_put<replicated>(m, ref.b[1]);
  auto w3 = ts::device_put<replicated>(m, ref.w[2]), b3 = ts::device_put<replicated>(m, ref.b[2]);
  const auto step = train_step();

  const long threads = proc_status("Threads");
  long rss_at_warm_up = -1, rss_max = -1, rss_first = proc_status("VmRSS");
  double first_loss = 0, last_loss = 0, worst_difference = 0;
  std::printf("soak: %zu steps of the 8-way data-parallel MLP (16-32-32-4, batch 64), %ld threads\n",
              steps, threads);
  std::printf("%8s %12s %10s %8s %14s\n", "step", "loss", "VmRSS KiB", "Threads", "max rel diff");
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t s = 1; s <= steps; ++s) {
    const auto [dw1, db1, dw2, db2, dw3, db3, loss] = step(x, y, w1, b1, w2, b2, w3, b3);
    w1 = w1 - dw1 * step_size;
    b1 = b1 - db1 * step_size;
    w2 = w2 - dw2 * step_size;
    b2 = b2 - db2 * step_size;
    w3 = w3 - dw3 * step_size;
    b3 = b3 - db3 * step_size;
    const double ref_loss = reference_step(ref, hx, hy);
    const double got_loss = loss.local_data(0)[0];
    if (s == 1) first_loss = got_loss;
    last_loss = got_loss;

    if (s % check_every == 0 || s == steps) {
      check(std::abs(got_loss - ref_loss) <= 1e-9 * std::max(1.0, ref_loss),
            "loss at step " + std::to_string(s) + ": " + std::to_string(got_loss) + ", reference " +
                std::to_string(ref_loss));
      const host got[6] = {ts::to_host(w1), ts::to_host(b1), ts::to_host(w2),
                           ts::to_host(b2), ts::to_host(w3), ts::to_host(b3)};
      const host* want[6] = {&ref.w[0], &ref.b[0], &ref.w[1], &ref.b[1], &ref.w[2], &ref.b[2]};
      for (int i = 0; i < 6; ++i) {
        const double d = max_relative_difference(got[i], *want[i]);
        worst_difference = std::max(worst_difference, d);
        check(d <= 1e-9, "parameter " + std::to_string(i) + " at step " + std::to_string(s) +
                             " differs from the reference by " + std::to_string(d));
      }
    }
    if (s % sample_every == 0 || s == warm_up || s == steps) {
      const long rss = proc_status("VmRSS"), now_threads = proc_status("Threads");
      check(now_threads == threads, "thread count " + std::to_string(now_threads) + " at step " +
                                        std::to_string(s) + ", " + std::to_string(threads) + " at the start");
      if (s == warm_up) rss_at_warm_up = rss;
      if (s > warm_up) rss_max = std::max(rss_max, rss);
      std::printf("%8zu %12.4g %10ld %8ld %14.3g\n", s, got_loss, rss, now_threads, worst_difference);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const long growth = rss_max - rss_at_warm_up;
  std::printf("soak: %.1f s (%.0f us per step); loss %.4g -> %.4g; VmRSS %ld KiB at start, %ld KiB "
              "after warm-up (step %zu), at most %ld KiB after (growth %ld KiB, bound %ld KiB)\n",
              seconds, 1e6 * seconds / double(steps), first_loss, last_loss, rss_first, rss_at_warm_up,
              warm_up, rss_max, growth, rss_bound_kib);
  check(last_loss < first_loss, "the loss did not go down");
  if (steps > warm_up && rss_is_meaningful)
    check(growth <= rss_bound_kib, "resident memory grew by " + std::to_string(growth) + " KiB");
  if (!rss_is_meaningful) std::printf("soak: sanitizer build: the memory bound is not enforced\n");
  std::printf("soak: %s\n", failures == 0 ? "passed" : "FAILED");
  return failures == 0 ? 0 : 1;
}
