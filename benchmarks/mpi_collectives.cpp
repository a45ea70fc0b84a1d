// benchmarks/mpi_collectives.cpp: typeshard's collectives on the MPI backend against the raw
// MPI calls on the same buffers, in one run (goal: within 5% of raw MPI).
//
//   mpirun -np 2 build/gcc/benchmarks/bench_mpi_collectives
//   mpirun -np 4 --oversubscribe build/gcc/benchmarks/bench_mpi_collectives
//
// For each collective and message size (bytes per device), three rows:
//   raw/...        the MPI call alone on a duplicate of MPI_COMM_WORLD (MPI_Allreduce,
//                  MPI_Allgather, MPI_Reduce_scatter_block, MPI_Alltoall, MPI_Sendrecv);
//   backend/...    one multi-device operation per iteration (mpi_devices::run) calling the
//                  backend primitive on the same buffers: what typeshard adds to MPI
//                  (communicator lookup, datatype choice, checks, dispatch);
//   shard_map/...  (psum and all_gather) the public API: ts::shard_map over a sharded array
//                  with ts::psum / ts::all_gather, which also allocates its result each time.
//
// Google Benchmark under mpirun: every rank runs every benchmark with the same fixed
// iteration counts (collectives need every rank in every call, so the counts cannot adapt
// per rank); only rank 0 prints. Repetitions report the median.
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <typeshard/backend/mpi.hpp>
#include <typeshard/typeshard.hpp>

namespace {

namespace ts = typeshard;

ts::mpi_devices* g_devices = nullptr;
MPI_Comm g_raw = MPI_COMM_NULL;  // the raw calls' own communicator
int g_rank = 0, g_size = 1;

// A group of every rank, for the backend primitives (run index = rank).
struct whole_job {
  std::vector<ts::device_id> devices;
  std::vector<std::size_t> members;
  whole_job() {
    for (int r = 0; r < g_size; ++r) {
      devices.push_back(static_cast<ts::device_id>(r));
      members.push_back(static_cast<std::size_t>(r));
    }
  }
  ts::collective_group group() const { return {members, static_cast<std::size_t>(g_rank)}; }
};

// Iterations for a message of `bytes`: about the same data moved per benchmark.
std::int64_t iterations_for(std::size_t bytes) {
  const std::int64_t n = static_cast<std::int64_t>((std::size_t{64} << 20) / (bytes + 4096));
  return n < 20 ? 20 : (n > 5000 ? 5000 : n);
}

enum class op { all_reduce, all_gather, reduce_scatter, all_to_all, permute };

const char* name_of(op o) {
  switch (o) {
    case op::all_reduce: return "psum";
    case op::all_gather: return "all_gather";
    case op::reduce_scatter: return "psum_scatter";
    case op::all_to_all: return "all_to_all";
    case op::permute: return "ppermute";
  }
  return "?";
}

// Buffers for one collective on `n` floats per device (the send side).
struct buffers {
  std::vector<float> send, recv;
  buffers(op o, std::size_t n) : send(n, 1.0f) {
    const std::size_t p = static_cast<std::size_t>(g_size);
    switch (o) {
      case op::all_reduce: recv.resize(n); break;
      case op::all_gather: recv.resize(n * p); break;
      case op::reduce_scatter: recv.resize(n / p); break;
      case op::all_to_all: recv.resize(n); break;
      case op::permute: recv.resize(n); break;
    }
  }
};

void raw(benchmark::State& state, op o) {
  const std::size_t n = static_cast<std::size_t>(state.range(0)) / sizeof(float);
  buffers b(o, n);
  const int k = static_cast<int>(n), p = g_size;
  const int next = (g_rank + 1) % p, prev = (g_rank + p - 1) % p;
  for (auto _ : state) {
    switch (o) {
      case op::all_reduce:
        MPI_Allreduce(b.send.data(), b.recv.data(), k, MPI_FLOAT, MPI_SUM, g_raw);
        break;
      case op::all_gather:
        MPI_Allgather(b.send.data(), k, MPI_FLOAT, b.recv.data(), k, MPI_FLOAT, g_raw);
        break;
      case op::reduce_scatter:
        MPI_Reduce_scatter_block(b.send.data(), b.recv.data(), k / p, MPI_FLOAT, MPI_SUM, g_raw);
        break;
      case op::all_to_all:
        MPI_Alltoall(b.send.data(), k / p, MPI_FLOAT, b.recv.data(), k / p, MPI_FLOAT, g_raw);
        break;
      case op::permute:
        MPI_Sendrecv(b.send.data(), k, MPI_FLOAT, next, 0, b.recv.data(), k, MPI_FLOAT, prev, 0,
                     g_raw, MPI_STATUS_IGNORE);
        break;
    }
    benchmark::DoNotOptimize(b.recv.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n * sizeof(float)));
}

void backend(benchmark::State& state, op o) {
  const std::size_t n = static_cast<std::size_t>(state.range(0)) / sizeof(float);
  buffers b(o, n);
  const std::size_t p = static_cast<std::size_t>(g_size);
  const whole_job job;
  const ts::collective_group g = job.group();
  const std::vector<std::size_t> counts(p, o == op::all_gather ? n : n / p);
  const ts::strided_pieces pieces{1, n / p, n / p, n / p};
  ts::backend& bk = *g_devices;
  const ts::element_type t = ts::element_type_of<float>;
  for (auto _ : state) {
    g_devices->run(job.devices, [&](std::size_t) {
      switch (o) {
        case op::all_reduce:
          bk.all_reduce(g, t, ts::reduce_op::sum, b.send.data(), b.recv.data(), n);
          break;
        case op::all_gather: bk.all_gather(g, t, b.send.data(), b.recv.data(), 1, counts); break;
        case op::reduce_scatter:
          bk.reduce_scatter(g, t, ts::reduce_op::sum, b.send.data(), b.recv.data(), 1, counts);
          break;
        case op::all_to_all: bk.all_to_all(g, t, b.send.data(), b.recv.data(), pieces, pieces); break;
        case op::permute:
          bk.permute(g, t, b.send.data(), n, (g.rank + 1) % p, b.recv.data(), n,
                     (g.rank + p - 1) % p);
          break;
      }
    });
    benchmark::DoNotOptimize(b.recv.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n * sizeof(float)));
}

// The public API on a 1-D mesh of every rank. The mesh's size is a compile-time constant,
// so the benchmark is instantiated for 2 and 4 ranks.
template <std::size_t P>
void shard_map_api(benchmark::State& state, op o) {
  using mesh = ts::mesh<ts::axis("x", P)>;
  const std::size_t n = static_cast<std::size_t>(state.range(0)) / sizeof(float);
  ts::device_mesh<mesh> m{*g_devices};
  const auto x = ts::device_put<ts::spec<"x">>(
      m, ts::shape<1>{n * P}, [&](const ts::index_slices<1>& ix) {
        return ts::host_tensor<float, 1>({ix[0].size()}, 1.0f);
      });
  const auto psum = ts::shard_map<mesh, ts::spec<"x">, ts::spec<ts::none>>(
      [](const auto& b) { return ts::psum<"x">(b); });
  const auto gather = ts::shard_map<mesh, ts::spec<"x">, ts::spec<ts::none>>(
      [](const auto& b) { return ts::all_gather<"x">(b, 0); });
  for (auto _ : state) {
    if (o == op::all_reduce) {
      auto y = psum(x);
      benchmark::DoNotOptimize(y);
    } else {
      auto y = gather(x);
      benchmark::DoNotOptimize(y);
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n * sizeof(float)));
}

void register_all() {
  const std::vector<std::size_t> sizes{std::size_t{1} << 10, std::size_t{64} << 10,
                                       std::size_t{1} << 20, std::size_t{8} << 20};
  for (op o : {op::all_reduce, op::all_gather, op::reduce_scatter, op::all_to_all, op::permute})
    for (std::size_t bytes : sizes) {
      const auto size = static_cast<std::int64_t>(bytes);
      auto tune = [&](benchmark::internal::Benchmark* b) {
        b->Arg(size)
            ->Iterations(iterations_for(bytes))
            ->Repetitions(7)
            ->ReportAggregatesOnly(true)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      };
      const std::string suffix = std::string(name_of(o)) + "/np" + std::to_string(g_size);
      tune(benchmark::RegisterBenchmark(("raw/" + suffix).c_str(), raw, o));
      tune(benchmark::RegisterBenchmark(("backend/" + suffix).c_str(), backend, o));
      if (o == op::all_reduce || o == op::all_gather) {
        const std::string api = "shard_map/" + suffix;
        if (g_size == 2) tune(benchmark::RegisterBenchmark(api.c_str(), shard_map_api<2>, o));
        if (g_size == 4) tune(benchmark::RegisterBenchmark(api.c_str(), shard_map_api<4>, o));
      }
    }
}

// Ranks other than 0 run every benchmark but report nothing.
class silent_reporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  ts::mpi_devices devices{argc, argv};
  g_devices = &devices;
  g_rank = static_cast<int>(devices.process_index());
  g_size = static_cast<int>(devices.process_count());
  MPI_Comm_dup(MPI_COMM_WORLD, &g_raw);
  bool file_output = false;  // --benchmark_out: only rank 0 writes the file
  for (int i = 1; i < argc; ++i)
    file_output = file_output || std::string(argv[i]).rfind("--benchmark_out=", 0) == 0;
  benchmark::Initialize(&argc, argv);
  register_all();
  if (g_rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    silent_reporter quiet;
    if (file_output)
      benchmark::RunSpecifiedBenchmarks(&quiet, &quiet);
    else
      benchmark::RunSpecifiedBenchmarks(&quiet);
  }
  benchmark::Shutdown();
  MPI_Comm_free(&g_raw);
  return 0;
}
