// Collectives on the thread-pool backend: all_gather, psum (all-reduce) and psum_scatter
// (reduce-scatter) on 2, 4 and 8 devices, each beside a 2-thread memcpy of the same bytes
// in the same run, so the numbers read against what the machine's memory can do; and, at
// small sizes ("small/..."), what one collective costs where the bytes are nothing: the
// handoffs between the devices' threads, beside an empty multi-device run.
//
//   bench_collectives                         # 1, 16 and 256 MiB, and 4 B to 64 KiB (short)
//   bench_collectives --sizes=all             # every power of two from 1 to 256 MiB
//   bench_collectives --benchmark_filter=psum # any Google Benchmark flag works too
//
// Size S is the array each device ends with (all_gather) or starts from (psum,
// psum_scatter): float32, S / 4 elements. "bytes_per_second" counts n * S bytes per
// collective on n devices: what every collective here must read (all_gather: the n
// outputs it writes; psum and psum_scatter: the n inputs they reduce), and what the
// memcpy baseline copies. Memory: up to about 2 n S bytes at once (8 GiB at n = 8 and
// S = 256 MiB: run smaller sizes on small machines with --benchmark_filter).
//
// Buffers are allocated and first touched by the devices that own them, once per
// benchmark; the timed loop is one multi-device run per collective (the dispatch cost is
// in the numbers: it is what a user pays).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

ts::cpu_devices& pool() {
  static ts::cpu_devices devices{8};
  return devices;
}

enum class kind { all_gather, psum, psum_scatter };

// Per device: an input and an output buffer of the right sizes, first touched by it.
struct buffers {
  std::vector<ts::detail::buffer<float>> in, out;
};

buffers allocate(std::size_t n, std::size_t in_elements, std::size_t out_elements) {
  buffers b{std::vector<ts::detail::buffer<float>>(n), std::vector<ts::detail::buffer<float>>(n)};
  std::vector<std::size_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = i;
  pool().run(ids, [&](std::size_t i) {
    b.in[i] = ts::detail::buffer<float>(in_elements);
    b.out[i] = ts::detail::buffer<float>(out_elements);
    for (std::size_t k = 0; k < in_elements; ++k) b.in[i].data()[k] = static_cast<float>(k % 7);
    std::memset(b.out[i].data(), 0, out_elements * sizeof(float));
  });
  return b;
}

// Size S = range(1) * Unit bytes (Unit: MiB for the bandwidth rows, 1 for the small ones).
template <kind K, std::size_t Unit>
void collective(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto bytes = static_cast<std::size_t>(state.range(1)) * Unit;
  const std::size_t elements = std::max(bytes / sizeof(float), n);  // at least one per device
  const std::size_t in_elements = K == kind::all_gather ? elements / n : elements;
  const std::size_t out_elements = K == kind::psum_scatter ? elements / n : elements;
  buffers b = allocate(n, in_elements, out_elements);
  std::vector<std::size_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = i;
  const std::vector<std::size_t> counts(n, elements / n);
  ts::backend& backend = pool();
  for (auto _ : state) {
    pool().run(ids, [&](std::size_t i) {
      const ts::collective_group g{ids, i};
      if constexpr (K == kind::all_gather)
        backend.all_gather(g, ts::element_type_of<float>, b.in[i].data(), b.out[i].data(), 1, counts);
      else if constexpr (K == kind::psum)
        backend.all_reduce(g, ts::element_type_of<float>, ts::reduce_op::sum, b.in[i].data(),
                           b.out[i].data(), elements);
      else
        backend.reduce_scatter(g, ts::element_type_of<float>, ts::reduce_op::sum, b.in[i].data(),
                               b.out[i].data(), 1, counts);
    });
    benchmark::ClobberMemory();
  }
  const std::size_t per_device = elements * sizeof(float);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * per_device));
}

// The floor of the small rows: one multi-device run whose devices do nothing.
void empty_run(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<std::size_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = i;
  for (auto _ : state) pool().run(ids, [](std::size_t) {});
}

// The baseline: n * S bytes copied by two devices of the same pool, half each.
void memcpy_2_threads(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto bytes = static_cast<std::size_t>(state.range(1)) * MiB;
  const std::size_t half = n * bytes / sizeof(float) / 2;
  buffers b = allocate(2, half, half);
  const std::vector<std::size_t> ids{0, 1};
  for (auto _ : state) {
    pool().run(ids, [&](std::size_t i) {
      std::memcpy(b.out[i].data(), b.in[i].data(), half * sizeof(float));
    });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * bytes));
}

void register_all(const std::vector<std::int64_t>& sizes_mib) {
  for (std::int64_t s : sizes_mib)
    for (std::int64_t n : {2, 4, 8}) {
      auto configure = [&](benchmark::internal::Benchmark* b) {
        b->Args({n, s})->ArgNames({"devices", "MiB"})->UseRealTime()->Unit(benchmark::kMillisecond);
        b->MinTime(0.1);
      };
      configure(benchmark::RegisterBenchmark("all_gather", collective<kind::all_gather, MiB>));
      configure(benchmark::RegisterBenchmark("psum", collective<kind::psum, MiB>));
      configure(benchmark::RegisterBenchmark("psum_scatter", collective<kind::psum_scatter, MiB>));
      configure(benchmark::RegisterBenchmark("memcpy_2_threads", memcpy_2_threads));
    }
  // Small, in microseconds: 4 KiB, 64 KiB, and "4 bytes", which is one float per device (n
  // floats: psum_scatter and all_gather need one each).
  for (std::int64_t n : {2, 4, 8}) {
    auto configure = [&](benchmark::internal::Benchmark* b, std::int64_t bytes) {
      b->Args({n, bytes})->ArgNames({"devices", "bytes"})->UseRealTime();
      b->Unit(benchmark::kMicrosecond)->MinTime(0.1);
    };
    configure(benchmark::RegisterBenchmark("small/empty_run", empty_run), 0);
    for (std::int64_t bytes : {4, 4096, 65536}) {
      using benchmark::RegisterBenchmark;
      configure(RegisterBenchmark("small/all_gather", collective<kind::all_gather, 1>), bytes);
      configure(RegisterBenchmark("small/psum", collective<kind::psum, 1>), bytes);
      configure(RegisterBenchmark("small/psum_scatter", collective<kind::psum_scatter, 1>), bytes);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::int64_t> sizes{1, 16, 256};
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--sizes=all")
      sizes = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    else
      args.push_back(argv[i]);
  }
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  register_all(sizes);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
