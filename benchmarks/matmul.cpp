// Sharded matmul on a 2-device mesh against OpenBLAS with 2 threads, and the collective
// cases against the sum of their parts, all measured in one run (float, N = 2048, 4096).
//
//   bench_matmul --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Rows (wall-clock time; GFLOPs = 2 N^3 per iteration, the whole product):
//   baseline/openblas_2threads/N   cblas_sgemm on the whole N x N x N, OpenBLAS with 2 threads
//   matmul/no_comm/N               ts::matmul, A[x, None] . B[None, None] -> C[x, None]:
//                                  each device one N/2 x N x N GEMM, no collective
//   matmul/all_gather/N            A[x, None] . B[x, None] -> C[x, None] (FSDP-style: the
//                                  weight's J sharded): all_gather(rhs, dim 0, over x); local gemm
//   matmul/all_reduce/N            A[None, x] . B[x, None] -> C[None, None]: local gemm (N x N/2
//                                  x N each); psum(out, over x)
//   matmul/read_slice/N            A[None, None] . B[x, None] -> C[x, None]: slice(lhs, dim 1),
//                                  read in place (lda = N); local gemm; psum_scatter(out)
//   part/local_gemm_reduce/N       the all_reduce case's local GEMMs alone (ts::matmul without
//                                  an output spec: the unreduced product)
//   part/memcpy/<case>/N           on both devices at once, a memcpy of the bytes the plan
//                                  moves per device (matmul_plan::bytes_per_device)
//   matmul/8_devices/kernel_slots/N  A[data, None] . B[None, model] on a 2 x 4 mesh of 8 devices
//                                  on cpu_devices{8}: as many GEMMs at once as cores, the long
//                                  ones pinned (backend/threads.hpp); N = 128, 512, 1024
//   matmul/8_devices/no_slots/N    the same on cpu_devices{8, 8}: every device's GEMM at once
// The all_gather case's local GEMMs are exactly matmul/no_comm (same block sizes), so its
// parts are no_comm + part/memcpy/all_gather. After the run a summary prints the medians'
// ratios: no_comm / baseline throughput (target >= 0.9) and case / (local gemm + memcpy)
// time (target <= 1.25).
//
// One process, two BLAS configurations: every device must run a single-threaded GEMM (the
// mesh is the parallelism), while the baseline needs OpenBLAS with 2 threads. Switching the
// process-wide thread count around the baseline only works with the pthread build and
// leaves a window where device GEMMs could see 2 threads. Instead the baseline loads the
// pthread OpenBLAS a second time with dlmopen into its own link namespace: its own thread
// count and thread pool, nothing shared with the OpenBLAS (preferably the serial build)
// that typeshard::blas links for the devices. The library is looked up at
// $TYPESHARD_BASELINE_OPENBLAS, then Debian's and common install paths; if none loads, the
// baseline rows are skipped with a message.
#include <typeshard/typeshard.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#if defined(__linux__) && defined(__GLIBC__)
#include <dlfcn.h>
#define TYPESHARD_BENCH_DLMOPEN 1
#endif

namespace {

namespace ts = typeshard;
using ts::none;
using mesh_2 = ts::mesh<ts::axis("x", 2)>;

// ---- the baseline: a private pthread OpenBLAS --------------------------------------------

struct baseline_blas {
  using sgemm_fn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                            int, float, float*, int);
  using set_threads_fn = void (*)(int);
  sgemm_fn sgemm = nullptr;
  set_threads_fn set_threads = nullptr;
  std::string path, error;

  baseline_blas() {
#if defined(TYPESHARD_BENCH_DLMOPEN)
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("TYPESHARD_BASELINE_OPENBLAS")) candidates.emplace_back(env);
    for (const char* p : {"/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
                          "/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas.so.0",
                          "/usr/lib64/libopenblasp.so.0", "/usr/lib/libopenblas.so.0"})
      candidates.emplace_back(p);
    for (const std::string& c : candidates) {
      void* h = dlmopen(LM_ID_NEWLM, c.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        error += std::string(dlerror()) + "; ";
        continue;
      }
      sgemm = reinterpret_cast<sgemm_fn>(dlsym(h, "cblas_sgemm"));
      set_threads = reinterpret_cast<set_threads_fn>(dlsym(h, "openblas_set_num_threads"));
      if (sgemm && set_threads) {
        path = c;
        set_threads(2);
        return;
      }
      error += c + " lacks cblas_sgemm or openblas_set_num_threads; ";
      sgemm = nullptr;
    }
#else
    error = "dlmopen needs glibc";
#endif
  }
};

baseline_blas& baseline() {
  static baseline_blas b;
  return b;
}

// CBLAS enum values (cblas.h): row-major 101, no-transpose 111.
constexpr int cblas_row_major = 101, cblas_no_trans = 111;

// ---- the arrays, made once per N ---------------------------------------------------------

ts::cpu_devices& devices() {
  static ts::cpu_devices d{2};
  return d;
}

ts::host_tensor<float, 2> random_matrix(std::size_t n, unsigned seed) {
  ts::host_tensor<float, 2> t({n, n});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (float& v : t.values()) v = d(rng);
  return t;
}

struct problem {
  ts::device_mesh<mesh_2> mesh{devices()};
  ts::host_tensor<float, 2> a, b;
  explicit problem(std::size_t n) : a(random_matrix(n, 1)), b(random_matrix(n, 2)) {}
};

problem& problem_for(std::size_t n) {
  static std::map<std::size_t, std::unique_ptr<problem>> cache;
  auto& p = cache[n];
  if (!p) p = std::make_unique<problem>(n);
  return *p;
}

void set_counters(benchmark::State& state, std::size_t n) {
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n) / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

// ---- the rows ----------------------------------------------------------------------------

void baseline_openblas_2threads(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  baseline_blas& blas = baseline();
  if (!blas.sgemm) {
    state.SkipWithError(("no pthread OpenBLAS to dlmopen: " + blas.error).c_str());
    return;
  }
  problem& p = problem_for(n);
  std::vector<float> c(n * n);
  const int in = static_cast<int>(n);
  for (auto _ : state) {
    blas.sgemm(cblas_row_major, cblas_no_trans, cblas_no_trans, in, in, in, 1.0f, p.a.data(), in,
               p.b.data(), in, 0.0f, c.data(), in);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, n);
  state.SetLabel(blas.path);
}

// Runs ts::matmul<Out>(A, B) with A, B put on the mesh with the given specs.
template <class LhsSpec, class RhsSpec, class Out>
void sharded(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  problem& p = problem_for(n);
  auto A = ts::device_put<LhsSpec>(p.mesh, p.a);
  auto B = ts::device_put<RhsSpec>(p.mesh, p.b);
  using plan = ts::matmul_plan_for<decltype(A), decltype(B), Out>;
  for (auto _ : state) {
    auto C = ts::matmul<Out>(A, B);
    benchmark::DoNotOptimize(C.local_data(0).data());
  }
  set_counters(state, n);
  state.SetLabel(plan::describe());
}

// On both devices at once, a memcpy of the bytes the plan of (LhsSpec, RhsSpec, Out) moves
// per device, into a fresh buffer (a collective's output is fresh memory too).
template <class LhsSpec, class RhsSpec, class Out>
void memcpy_part(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  using plan = ts::matmul_plan<mesh_2, LhsSpec, RhsSpec, Out>;
  const std::size_t bytes = static_cast<std::size_t>(plan::bytes_moved({n, n}, {n, n}));
  std::vector<std::vector<char>> src(2, std::vector<char>(bytes, 1));
  const std::vector<ts::device_id> ids{0, 1};
  for (auto _ : state) {
    devices().run(ids, [&](std::size_t i) {
      std::unique_ptr<char[]> dst(new char[bytes]);
      std::memcpy(dst.get(), src[i].data(), bytes);
      benchmark::DoNotOptimize(dst.get());
    });
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes * 2));
}

using rows_x = ts::spec<"x", none>;
using cols_x = ts::spec<none, "x">;
using replicated = ts::spec<none, none>;

void configure(benchmark::internal::Benchmark* b) {
  b->Arg(2048)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(baseline_openblas_2threads)->Name("baseline/openblas_2threads")->Apply(configure);
BENCHMARK(sharded<rows_x, replicated, rows_x>)->Name("matmul/no_comm")->Apply(configure);
BENCHMARK(sharded<rows_x, rows_x, rows_x>)->Name("matmul/all_gather")->Apply(configure);
BENCHMARK(memcpy_part<rows_x, rows_x, rows_x>)->Name("part/memcpy/all_gather")->Apply(configure);
BENCHMARK(sharded<cols_x, rows_x, replicated>)->Name("matmul/all_reduce")->Apply(configure);
BENCHMARK(sharded<replicated, rows_x, rows_x>)->Name("matmul/read_slice")->Apply(configure);
BENCHMARK(sharded<cols_x, rows_x, ts::auto_out>)->Name("part/local_gemm_reduce")->Apply(configure);
BENCHMARK(memcpy_part<cols_x, rows_x, replicated>)->Name("part/memcpy/all_reduce")->Apply(configure);

// ---- 8 devices on the machine's cores: what the kernel slots cost or save ----------------

using mesh_2x4 = ts::mesh<ts::axis("data", 2), ts::axis("model", 4)>;

ts::cpu_devices& eight_devices(bool kernel_slots) {
  static ts::cpu_devices with_slots{8};        // at most one GEMM per core at once
  static ts::cpu_devices without_slots{8, 8};  // every device's GEMM at once
  return kernel_slots ? with_slots : without_slots;
}

template <bool KernelSlots>
void eight_device_matmul(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  ts::cpu_devices& pool = eight_devices(KernelSlots);
  const ts::device_mesh<mesh_2x4> mesh{pool};
  const problem& p = problem_for(n);
  const auto A = ts::device_put<ts::spec<"data", none>>(mesh, p.a);
  const auto B = ts::device_put<ts::spec<none, "model">>(mesh, p.b);
  for (auto _ : state) {
    auto C = ts::matmul(A, B);
    benchmark::DoNotOptimize(C.local_data(0).data());
  }
  set_counters(state, n);
  state.SetLabel(std::to_string(pool.concurrent_kernels()) + " kernel slots");
}

void configure_eight(benchmark::internal::Benchmark* b) {
  b->Arg(128)->Arg(512)->Arg(1024)->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK(eight_device_matmul<true>)->Name("matmul/8_devices/kernel_slots")->Apply(configure_eight);
BENCHMARK(eight_device_matmul<false>)->Name("matmul/8_devices/no_slots")->Apply(configure_eight);

// ---- the summary: ratios of the medians (or of the single runs) ---------------------------

class summary_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (!median && r.run_type == Run::RT_Aggregate) continue;
      std::string name = r.run_name.function_name + "/" + r.run_name.args;
      // Prefer the median; keep a plain run only until a median arrives.
      if (median || !medians_.count(name) || !have_median_[name]) {
        medians_[name] = r.GetAdjustedRealTime();
        have_median_[name] = median;
      }
    }
  }

  void print_summary() const {
    std::printf("\nsummary (medians when --benchmark_repetitions > 1):\n");
    for (const char* n : {"2048", "4096"}) {
      const std::string N = n;
      auto t = [&](const std::string& row) {
        const auto it = medians_.find(row + "/" + N);
        return it == medians_.end() ? -1.0 : it->second;
      };
      const double base = t("baseline/openblas_2threads"), local = t("matmul/no_comm");
      if (base > 0 && local > 0)
        std::printf("  N=%s  no_comm throughput / OpenBLAS 2 threads     = %.3f  (target >= 0.9)\n",
                    n, base / local);
      const double gather = t("matmul/all_gather"), gather_copy = t("part/memcpy/all_gather");
      if (gather > 0 && local > 0 && gather_copy > 0)
        std::printf("  N=%s  all_gather / (local gemm %.1f + memcpy %.1f)  = %.3f  (target <= 1.25)\n",
                    n, local, gather_copy, gather / (local + gather_copy));
      const double reduce = t("matmul/all_reduce"), reduce_local = t("part/local_gemm_reduce"),
                   reduce_copy = t("part/memcpy/all_reduce");
      if (reduce > 0 && reduce_local > 0 && reduce_copy > 0)
        std::printf("  N=%s  all_reduce / (local gemm %.1f + memcpy %.1f)  = %.3f  (target <= 1.25)\n",
                    n, reduce_local, reduce_copy, reduce / (reduce_local + reduce_copy));
    }
  }

 private:
  std::map<std::string, double> medians_;
  std::map<std::string, bool> have_median_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  summary_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_summary();
  benchmark::Shutdown();
  return 0;
}
