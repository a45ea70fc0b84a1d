// The per-shard GEMM, single-threaded, at every path that can run here, against the
// machine's measured single-core peak.
//
//   bench_gemm --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE bench_gemm --benchmark_filter=cblas
//       (OpenBLAS with its own core detection: the second line unsets the pinned environment
//       for this benchmark only; tests and CI never do)
//
// Shapes: the per-device GEMMs of typeshard's benchmarks (m x n x k): 1024 x 1024 x 2048
// (matmul case 1 of benchmarks/compare --quick on the 2 x 2 mesh), 1024 x 2048 x 2048 and
// 2048 x 2048 x 2048 (one batch element of the batched matmul; case 1 at full size), float and
// double. Rows, each labelled with what ran:
//   typeshard_avx512 / _avx2 / _portable   kernels::gemm_blocked at that SIMD level (only the
//                                          levels this CPU runs; portable at the first shape)
//   kernels_gemm                           kernels::gemm as it dispatches (label: the kernel)
//   cblas                                  cblas_?gemm, one thread, in the environment as it
//                                          is (label: OpenBLAS's core), with typeshard::blas
// Counters: GFLOPs (2 m n k per iteration over CPU time: every row is single-threaded, so CPU
// time stays honest when other processes share the cores) and pct_peak, that rate over the
// single-core peak of the element type measured at start-up by an FMA-chain kernel (the
// approach of benchmarks/compare_support/peak.cpp, timed in CPU time too), printed first.
//
// bfloat16 (kernels::gemm_bf16: bfloat16 operands, float C), at the same shapes:
//   gemm/bf16/typeshard_avx512_bf16        the vdpbf16ps kernel (CPUs with AVX-512 BF16)
//   gemm/bf16/typeshard_avx512 / _avx2     the operands widened, then the float kernel
// and pct_peak over the bfloat16 peak measured by vdpbf16ps chains (64 flops each: 16 lanes
// of 2 multiply-adds), where the CPU has it; else over the float peak.
#include <typeshard/kernels/gemm.hpp>
#include <typeshard/kernels/gemm_bf16.hpp>
#include <typeshard/kernels/gemm_blocked.hpp>
#include <typeshard/kernels/gemm_isa.hpp>

#include <benchmark/benchmark.h>

#include <time.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#if defined(TYPESHARD_GEMM_X86)
#include <immintrin.h>
#endif

namespace {

namespace k = typeshard::kernels;

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

// ---- the single-core peak: independent FMA chains, nothing else ------------------------------
constexpr int chains = 12;  // enough to cover the FMA latency on two pipes
volatile double sink;

#if defined(TYPESHARD_GEMM_X86)
__attribute__((target("avx512f"))) double fma_chains_512(long iters, bool dbl) {
  __m512d acc[chains];
  for (int j = 0; j < chains; ++j) acc[j] = _mm512_set1_pd(double(j));
  const __m512d a = _mm512_set1_pd(0.999999), b = _mm512_set1_pd(1e-6);
  __m512 accf[chains];
  for (int j = 0; j < chains; ++j) accf[j] = _mm512_set1_ps(float(j));
  const __m512 af = _mm512_set1_ps(0.999999f), bf = _mm512_set1_ps(1e-6f);
  if (dbl) {
    for (long i = 0; i < iters; ++i)
#pragma GCC unroll 16  // the chains must live in registers, not in memory
      for (int j = 0; j < chains; ++j) acc[j] = _mm512_fmadd_pd(acc[j], a, b);
  } else {
    for (long i = 0; i < iters; ++i)
#pragma GCC unroll 16
      for (int j = 0; j < chains; ++j) accf[j] = _mm512_fmadd_ps(accf[j], af, bf);
  }
  alignas(64) double d[8];
  alignas(64) float f[16];
  double s = 0;
  for (int j = 0; j < chains; ++j) {  // (not _mm512_reduce_add_*: g++ 12 -O3 warns in them)
    _mm512_store_pd(d, acc[j]);
    _mm512_store_ps(f, accf[j]);
    s += d[0] + f[0];
  }
  sink = s;
  return double(iters) * chains * (dbl ? 8 : 16) * 2;
}

__attribute__((target("avx2,fma"))) double fma_chains_256(long iters, bool dbl) {
  __m256d acc[chains];
  for (int j = 0; j < chains; ++j) acc[j] = _mm256_set1_pd(double(j));
  const __m256d a = _mm256_set1_pd(0.999999), b = _mm256_set1_pd(1e-6);
  __m256 accf[chains];
  for (int j = 0; j < chains; ++j) accf[j] = _mm256_set1_ps(float(j));
  const __m256 af = _mm256_set1_ps(0.999999f), bf = _mm256_set1_ps(1e-6f);
  if (dbl) {
    for (long i = 0; i < iters; ++i)
#pragma GCC unroll 16
      for (int j = 0; j < chains; ++j) acc[j] = _mm256_fmadd_pd(acc[j], a, b);
  } else {
    for (long i = 0; i < iters; ++i)
#pragma GCC unroll 16
      for (int j = 0; j < chains; ++j) accf[j] = _mm256_fmadd_ps(accf[j], af, bf);
  }
  alignas(32) double d[4];
  alignas(32) float f[8];
  double s = 0;
  for (int j = 0; j < chains; ++j) {
    _mm256_store_pd(d, acc[j]);
    _mm256_store_ps(f, accf[j]);
    s += d[0] + f[0];
  }
  sink = s;
  return double(iters) * chains * (dbl ? 4 : 8) * 2;
}
#endif

#if defined(TYPESHARD_GEMM_X86)
// vdpbf16ps chains: each instruction 16 lanes x 2 multiply-adds.
constexpr int bf16_chains = 24;  // covers a longer latency than the FMA's
__attribute__((target("avx512f,avx512bf16"))) double dpbf16_chains_512(long iters, bool) {
  __m512 acc[bf16_chains];
  for (int j = 0; j < bf16_chains; ++j) acc[j] = _mm512_set1_ps(float(j));
  // 0x3a83 is ~0.001 in bfloat16: the sums stay far from overflow and from denormals.
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3a83), b = (__m512bh)_mm512_set1_epi16(0x3a83);
  for (long i = 0; i < iters; ++i)
#pragma GCC unroll 24
    for (int j = 0; j < bf16_chains; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], a, b);
  alignas(64) float f[16];
  double s = 0;
  for (int j = 0; j < bf16_chains; ++j) {
    _mm512_store_ps(f, acc[j]);
    s += f[0];
  }
  sink = s;
  return double(iters) * bf16_chains * 16 * 2 * 2;
}
#endif

// GFLOP/s of one core at its widest SIMD (the best of AVX-512 and AVX2 where both run: some
// CPUs run AVX-512 at half rate), best of 5 runs of ~0.2 s of CPU time. 0 when not x86.
// With bf16: vdpbf16ps chains, where the CPU has them (else 0).
double measured_peak(bool dbl, std::string& isa, bool bf16 = false) {
  double best = 0;
#if defined(TYPESHARD_GEMM_X86)
  const auto run = [&](double (*kernel)(long, bool), const char* name) {
    long iters = 1 << 16;
    for (;;) {  // calibrate
      const double t0 = thread_cpu_seconds();
      kernel(iters, dbl);
      if (thread_cpu_seconds() - t0 > 0.02) break;
      iters *= 4;
    }
    iters *= 10;
    for (int r = 0; r < 5; ++r) {
      const double t0 = thread_cpu_seconds();
      const double flops = kernel(iters, dbl);
      const double rate = flops / (thread_cpu_seconds() - t0) / 1e9;
      if (rate > best) {
        best = rate;
        isa = name;
      }
    }
  };
  if (bf16) {
    if (k::gemm_bf16_detected()) run(dpbf16_chains_512, "avx512_bf16 vdpbf16ps");
    return best;
  }
  if (k::gemm_isa_detected() == k::gemm_isa::avx512) run(fma_chains_512, "avx512");
  if (k::gemm_isa_detected() != k::gemm_isa::portable) run(fma_chains_256, "avx2");
#else
  (void)dbl;
  (void)bf16;
  isa = "not measured";
#endif
  return best;
}

double peak_float = 0, peak_double = 0, peak_bf16 = 0;

// ---- the GEMM rows -----------------------------------------------------------------------------
enum class which { packed, dispatch, cblas };

template <class T>
void bm_gemm(benchmark::State& state, which w, k::gemm_isa isa) {
  const auto m = static_cast<std::size_t>(state.range(0));
  const auto n = static_cast<std::size_t>(state.range(1));
  const auto kk = static_cast<std::size_t>(state.range(2));
  std::vector<T> a(m * kk), b(kk * n), c(m * n);
  std::mt19937 rng(42);
  std::uniform_real_distribution<T> dist(T(-1), T(1));
  for (T& x : a) x = dist(rng);
  for (T& x : b) x = dist(rng);
  for (auto _ : state) {
    switch (w) {
      case which::packed:
        k::detail::gemm_blocked_at<T>(isa, m, n, kk, a.data(), kk, b.data(), n, c.data(), n,
                                      false);
        break;
      case which::dispatch:
        k::gemm<T>(m, n, kk, a.data(), kk, b.data(), n, c.data(), n);
        break;
      case which::cblas:
#if defined(TYPESHARD_HAVE_CBLAS)
        k::detail::gemm_cblas<T>(m, n, kk, a.data(), kk, b.data(), n, c.data(), n, false, {});
#endif
        break;
    }
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * double(m) * double(n) * double(kk);
  state.counters["GFLOPs"] =
      benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  const double peak = sizeof(T) == 4 ? peak_float : peak_double;
  if (peak > 0)
    state.counters["pct_peak"] = benchmark::Counter(
        100 * flops / 1e9 / peak, benchmark::Counter::kIsIterationInvariantRate);
  switch (w) {
    case which::packed: state.SetLabel(std::string("typeshard ") + k::gemm_isa_name(isa)); break;
    case which::dispatch: state.SetLabel(k::gemm_kernel_name()); break;
    case which::cblas:
#if defined(TYPESHARD_HAVE_OPENBLAS)
      state.SetLabel(std::string("OpenBLAS ") + openblas_get_corename());
#else
      state.SetLabel("cblas");
#endif
      break;
  }
}

template <class T>
void register_rows(const char* type) {
  const long shapes[][3] = {{1024, 1024, 2048}, {1024, 2048, 2048}, {2048, 2048, 2048}};
  const auto add = [&](const std::string& name, which w, k::gemm_isa isa, bool all_shapes) {
    const std::string full = "gemm/" + std::string(type) + "/" + name;
    auto* b = benchmark::RegisterBenchmark(
        full.c_str(), [w, isa](benchmark::State& s) { bm_gemm<T>(s, w, isa); });
    for (const auto& s : shapes) {
      b->Args({s[0], s[1], s[2]});
      if (!all_shapes) break;
    }
    b->Unit(benchmark::kMillisecond);
  };
  const int best = static_cast<int>(k::gemm_isa_detected());
  if (best >= static_cast<int>(k::gemm_isa::avx512))
    add("typeshard_avx512", which::packed, k::gemm_isa::avx512, true);
  if (best >= static_cast<int>(k::gemm_isa::avx2))
    add("typeshard_avx2", which::packed, k::gemm_isa::avx2, true);
  add("typeshard_portable", which::packed, k::gemm_isa::portable, false);
  add("kernels_gemm", which::dispatch, k::gemm_isa_active(), true);
#if defined(TYPESHARD_HAVE_CBLAS)
  add("cblas", which::cblas, k::gemm_isa_active(), true);
#endif
}

// kernels::gemm_bf16 at level isa (avx512 on an AVX-512 BF16 CPU: the vdpbf16ps kernel).
void bm_gemm_bf16(benchmark::State& state, k::gemm_isa isa) {
  using bf16 = typeshard::bfloat16;
  const auto m = static_cast<std::size_t>(state.range(0));
  const auto n = static_cast<std::size_t>(state.range(1));
  const auto kk = static_cast<std::size_t>(state.range(2));
  std::vector<bf16> a(m * kk), b(kk * n);
  std::vector<float> c(m * n);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (bf16& x : a) x = bf16(dist(rng));
  for (bf16& x : b) x = bf16(dist(rng));
  for (auto _ : state) {
    k::detail::gemm_bf16_at(isa, m, n, kk, a.data(), kk, b.data(), n, c.data(), n, false, {});
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * double(m) * double(n) * double(kk);
  state.counters["GFLOPs"] =
      benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  const double peak = peak_bf16 > 0 ? peak_bf16 : peak_float;
  if (peak > 0)
    state.counters["pct_peak"] = benchmark::Counter(
        100 * flops / 1e9 / peak, benchmark::Counter::kIsIterationInvariantRate);
}

void register_bf16_rows() {
  const long shapes[][3] = {{1024, 1024, 2048}, {1024, 2048, 2048}, {2048, 2048, 2048}};
  const auto add = [&](const char* name, k::gemm_isa isa, bool all_shapes) {
    auto* b = benchmark::RegisterBenchmark((std::string("gemm/bf16/") + name).c_str(),
                                          [isa](benchmark::State& s) { bm_gemm_bf16(s, isa); });
    for (const auto& s : shapes) {
      b->Args({s[0], s[1], s[2]});
      if (!all_shapes) break;
    }
    b->Unit(benchmark::kMillisecond);
  };
  const k::gemm_isa best = k::gemm_isa_detected();
  if (k::gemm_bf16_detected()) add("typeshard_avx512_bf16", k::gemm_isa::avx512, true);
  else if (best == k::gemm_isa::avx512) add("typeshard_avx512", k::gemm_isa::avx512, true);
  if (best >= k::gemm_isa::avx2) add("typeshard_avx2", k::gemm_isa::avx2, false);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::string isa_f, isa_d;
  peak_float = measured_peak(false, isa_f);
  peak_double = measured_peak(true, isa_d);
  std::printf("measured single-core peak: float %.1f GFLOP/s (%s FMA chains), double %.1f (%s)\n",
              peak_float, isa_f.c_str(), peak_double, isa_d.c_str());
  std::string isa_b;
  peak_bf16 = measured_peak(false, isa_b, true);
  if (peak_bf16 > 0)
    std::printf("measured single-core bfloat16 peak: %.1f GFLOP/s (%s chains)\n", peak_bf16,
                isa_b.c_str());
  std::printf("kernels::gemm runs: %s (detected %s)\n", k::gemm_kernel_name().c_str(),
              k::gemm_isa_name(k::gemm_isa_detected()));
  register_rows<float>("float");
  register_rows<double>("double");
  register_bf16_rows();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
