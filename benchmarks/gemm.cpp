// The per-shard GEMM: typeshard's portable blocked kernel against single-threaded CBLAS.
//
//   bench_gemm --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Square N x N x N products, float and double, N = 256, 512, 1024. Counter GFLOPs is
// 2 N^3 per iteration over CPU time (every row is single-threaded, so CPU time is the
// honest measure and stays so when other processes share the cores). The bar: gemm_blocked at least 30% of single-thread
// OpenBLAS at N = 1024. Rows:
//   blocked    kernels::gemm_blocked: AVX2+FMA micro-kernel when the CPU has it
//   portable   the same blocking with the portable (16-byte vector) micro-kernel
//   cblas      cblas_?gemm, one thread (only when built with typeshard::blas)
#include <typeshard/kernels/gemm.hpp>
#include <typeshard/kernels/gemm_blocked.hpp>

#include <benchmark/benchmark.h>

#include <cstddef>
#include <random>
#include <vector>

namespace {

namespace k = typeshard::kernels;

enum class which { blocked, portable, cblas };

template <class T, which W>
void bm_gemm(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<T> a(n * n), b(n * n), c(n * n);
  std::mt19937 rng(42);
  std::uniform_real_distribution<T> dist(T(-1), T(1));
  for (T& x : a) x = dist(rng);
  for (T& x : b) x = dist(rng);
  for (auto _ : state) {
    if constexpr (W == which::blocked) {
      k::gemm_blocked<T>(n, n, n, a.data(), n, b.data(), n, c.data(), n);
    } else if constexpr (W == which::portable) {
      k::detail::gemm_blocked_with<T>(k::detail::micro_kernel_choice::portable, n, n, n, a.data(),
                                      n, b.data(), n, c.data(), n, false);
    } else {
      // kernels::gemm dispatches to CBLAS in this build and keeps OpenBLAS single-threaded.
      k::gemm<T>(n, n, n, a.data(), n, b.data(), n, c.data(), n);
    }
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n) / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

#define TYPESHARD_GEMM_BENCH(T, W, label) \
  BENCHMARK(bm_gemm<T, which::W>)->Name(label)->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond)

TYPESHARD_GEMM_BENCH(float, blocked, "gemm/float/blocked");
TYPESHARD_GEMM_BENCH(float, portable, "gemm/float/portable");
TYPESHARD_GEMM_BENCH(double, blocked, "gemm/double/blocked");
TYPESHARD_GEMM_BENCH(double, portable, "gemm/double/portable");
#if defined(TYPESHARD_HAVE_CBLAS)
TYPESHARD_GEMM_BENCH(float, cblas, "gemm/float/cblas_1thread");
TYPESHARD_GEMM_BENCH(double, cblas, "gemm/double/cblas_1thread");
#endif

}  // namespace
