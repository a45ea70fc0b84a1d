// benchmarks/compare_support/peak.cpp: the machine's measured single-precision peak, from a
// kernel that does nothing but fused multiply-adds on independent registers (12 chains per
// thread, enough to cover the FMA latency on two pipes), one thread per core, for the widest
// vectors the CPU has (AVX-512, AVX2 + FMA, else SSE multiply + add). Prints
//   peak <GFLOP/s all cores> <GFLOP/s one core> <isa> <threads>
// (the best of 5 runs of about 0.3 s each).
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int chains = 12;
volatile float sink;

__attribute__((target("avx512f"))) double fma512(long iters) {
  __m512 acc[chains];
  for (int j = 0; j < chains; ++j) acc[j] = _mm512_set1_ps(float(j));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
  for (long i = 0; i < iters; ++i)
#pragma GCC unroll 16  // the chains must live in registers, not in memory
    for (int j = 0; j < chains; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  __m512 s = acc[0];
  for (int j = 1; j < chains; ++j) s = _mm512_add_ps(s, acc[j]);
  sink = _mm512_reduce_add_ps(s);
  return double(iters) * chains * 16 * 2;
}

__attribute__((target("avx2,fma"))) double fma256(long iters) {
  __m256 acc[chains];
  for (int j = 0; j < chains; ++j) acc[j] = _mm256_set1_ps(float(j));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
  for (long i = 0; i < iters; ++i)
#pragma GCC unroll 16  // the chains must live in registers, not in memory
    for (int j = 0; j < chains; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  __m256 s = acc[0];
  for (int j = 1; j < chains; ++j) s = _mm256_add_ps(s, acc[j]);
  float out[8];
  _mm256_storeu_ps(out, s);
  sink = out[0];
  return double(iters) * chains * 8 * 2;
}

double mul_add128(long iters) {  // no FMA: a multiply and an add, 2 flops per lane
  __m128 acc[chains];
  for (int j = 0; j < chains; ++j) acc[j] = _mm_set1_ps(float(j));
  const __m128 a = _mm_set1_ps(0.999999f), b = _mm_set1_ps(1e-6f);
  for (long i = 0; i < iters; ++i)
#pragma GCC unroll 16  // the chains must live in registers, not in memory
    for (int j = 0; j < chains; ++j) acc[j] = _mm_add_ps(_mm_mul_ps(acc[j], a), b);
  __m128 s = acc[0];
  for (int j = 1; j < chains; ++j) s = _mm_add_ps(s, acc[j]);
  float out[4];
  _mm_storeu_ps(out, s);
  sink = out[0];
  return double(iters) * chains * 4 * 2;
}

// GFLOP/s of `kernel` on `threads` threads started together.
template <class K>
double measure(K kernel, long iters, unsigned threads) {
  std::atomic<unsigned> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> flops(threads);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load()) {
      }
      flops[t] = kernel(iters);
    });
  while (ready.load() != threads) {
  }
  const auto t0 = std::chrono::steady_clock::now();
  go.store(true);
  for (auto& p : pool) p.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double total = 0;
  for (double f : flops) total += f;
  return total / s / 1e9;
}

}  // namespace

int main() {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  __builtin_cpu_init();
  std::string isa = "sse";
  double (*kernel)(long) = mul_add128;
  if (__builtin_cpu_supports("avx512f")) {
    isa = "avx512";
    kernel = fma512;
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    isa = "avx2+fma";
    kernel = fma256;
  }
  // Calibrate to about 0.3 s a run on one thread.
  long iters = 1 << 20;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    kernel(iters);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0.05) {
      iters = static_cast<long>(double(iters) * 0.3 / s);
      break;
    }
    iters *= 4;
  }
  double all = 0, one = 0;
  for (int r = 0; r < 5; ++r) {
    all = std::max(all, measure(kernel, iters, threads));
    one = std::max(one, measure(kernel, iters, 1));
  }
  // AVX-512 may run at half rate on some CPUs: keep the better of it and AVX2.
  if (isa == "avx512" && __builtin_cpu_supports("fma")) {
    double all2 = 0, one2 = 0;
    for (int r = 0; r < 5; ++r) {
      all2 = std::max(all2, measure(fma256, iters, threads));
      one2 = std::max(one2, measure(fma256, iters, 1));
    }
    if (all2 > all) {
      all = all2;
      one = one2;
      isa = "avx2+fma";
    }
  }
  std::printf("peak %.1f %.1f %s %u\n", all, one, isa.c_str(), threads);
  return 0;
}
