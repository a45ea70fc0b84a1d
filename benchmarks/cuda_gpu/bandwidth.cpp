// benchmarks/cuda_gpu/bandwidth.cpp: the CUDA backend against the GPU's own figures (prints one
// markdown table; scripts/gpu-check puts it in its report). A folder of its own: benchmarks/*.cpp
// are Google Benchmark programs built without CUDA; this one is built by tests/cuda.
// - Collectives between 8 simulated devices of one GPU: bytes each member receives per second
//   (summed over members), against cudaMemcpy device-to-device bandwidth (bytes copied per
//   second) on the same GPU. The target: at least 70%.
// - cuBLAS GEMM through cuda_devices::gemm against cublasSgemm called alone on the same
//   shapes, FP32 and TF32. The target: at least 90%.
// Exits 77 (skipped) without a GPU.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <typeshard/backend/cuda.hpp>

namespace ts = typeshard;
namespace api = ts::detail::cuda_api;

namespace {

double seconds_of(auto&& f, int reps) {
  f();  // warm up (pools, communicators, kernels)
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

void row(const char* what, double value, const char* unit, double reference, const char* vs) {
  std::printf("| %s | %.1f %s | %.1f %s | %.0f%% |\n", what, value, unit, reference, vs,
              100.0 * value / reference);
}

}  // namespace

int main() {
  std::string why;
  if (api::visible_gpus(why) == 0) {
    std::printf("SKIPPED bench_cuda_bandwidth: no CUDA GPU is visible (%s)\n", why.c_str());
    return 77;
  }
  std::printf("| measurement | typeshard | reference | ratio |\n|---|---|---|---|\n");
  // ---- device-to-device copy bandwidth ----
  const std::size_t piece = std::size_t{32} << 20;  // bytes per member
  const std::size_t n = 8;
  double copy_bps = 0;
  {
    void *a = nullptr, *b = nullptr;
    cudaMalloc(&a, n * piece);
    cudaMalloc(&b, n * piece);
    const double s = seconds_of([&] {
      cudaMemcpy(b, a, n * piece, cudaMemcpyDeviceToDevice);
      cudaDeviceSynchronize();
    }, 10);
    copy_bps = double(n * piece) / s;
    cudaFree(a);
    cudaFree(b);
    std::printf("| cudaMemcpy D2D, %zu MiB | %.1f GB/s | | |\n", n * piece >> 20, copy_bps / 1e9);
  }
  // ---- collectives on 8 simulated devices ----
  {
    ts::cuda_devices gpu{n, {.nccl = true, .allow_tf32 = false, .max_gpus = 1}};
    const ts::element_type t = ts::element_type_of<float>;
    const std::size_t elems = piece / sizeof(float);
    std::vector<void*> send(n), recv(n);
    for (std::size_t d = 0; d < n; ++d) {
      send[d] = gpu.allocate(d, n * piece);
      recv[d] = gpu.allocate(d, n * piece);
      gpu.synchronize(d);
    }
    std::vector<std::size_t> members(n), counts(n, elems);
    for (std::size_t d = 0; d < n; ++d) members[d] = d;
    std::vector<ts::device_id> devs(members.begin(), members.end());
    auto time_collective = [&](const char* name, double received_per_member, auto&& call) {
      const double s = seconds_of([&] {
        gpu.run(devs, [&](std::size_t i) {
          call(ts::collective_group{members, i}, i);
          gpu.synchronize(devs[i]);
        });
      }, 5);
      row(name, n * received_per_member / s / 1e9, "GB/s", copy_bps / 1e9, "GB/s (D2D copy)");
    };
    time_collective("all_gather, 8 x 32 MiB", 7.0 * piece, [&](auto g, std::size_t i) {
      gpu.all_gather(g, t, send[i], recv[i], 1, counts);
    });
    time_collective("reduce_scatter sum, 8 x 256 MiB", 7.0 * piece, [&](auto g, std::size_t i) {
      gpu.reduce_scatter(g, t, ts::reduce_op::sum, send[i], recv[i], 1, counts);
    });
    time_collective("all_reduce sum, 8 x 32 MiB", 7.0 * piece, [&](auto g, std::size_t i) {
      gpu.all_reduce(g, t, ts::reduce_op::sum, send[i], recv[i], elems);
    });
    const ts::strided_pieces runs{1, elems, elems, elems};
    time_collective("all_to_all, 8 x 8 x 32 MiB", 7.0 * piece, [&](auto g, std::size_t i) {
      gpu.all_to_all(g, t, send[i], recv[i], runs, runs);
    });
    time_collective("permute (ring), 8 x 32 MiB", 1.0 * piece, [&](auto g, std::size_t i) {
      gpu.permute(g, t, send[i], elems, (i + 1) % n, recv[i], elems, (i + n - 1) % n);
    });
    for (std::size_t d = 0; d < n; ++d) {
      gpu.deallocate(d, send[d]);
      gpu.deallocate(d, recv[d]);
    }
  }
  // ---- GEMM: cuda_devices::gemm against cublasSgemm alone ----
  for (const bool tf32 : {false, true}) {
    ts::cuda_devices gpu{1, {.nccl = true, .allow_tf32 = tf32, .max_gpus = 1}};
    cublasHandle_t h = nullptr;
    cublasCreate(&h);
    cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    struct shape { std::size_t m, n, k, batch; };
    for (const shape s : {shape{4096, 4096, 4096, 1}, shape{8192, 8192, 8192, 1},
                          shape{4096, 4096, 4096, 8}}) {
      float *a = nullptr, *b = nullptr, *c = nullptr;
      cudaMalloc(&a, s.batch * s.m * s.k * 4);
      cudaMalloc(&b, s.batch * s.k * s.n * 4);
      cudaMalloc(&c, s.batch * s.m * s.n * 4);
      cudaMemset(a, 0, s.batch * s.m * s.k * 4);
      cudaMemset(b, 0, s.batch * s.k * s.n * 4);
      const double flops = 2.0 * double(s.m) * double(s.n) * double(s.k) * double(s.batch);
      const double ours = seconds_of([&] {
        gpu.gemm(0, a, b, c, s.m, s.n, s.k, false, s.batch);
        gpu.synchronize(0);
      }, 5);
      const float one = 1, zero = 0;
      const int m = int(s.m), nn = int(s.n), k = int(s.k);
      const double alone = seconds_of([&] {
        if (s.batch == 1)
          cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, nn, m, k, &one, b, nn, a, k, &zero, c, nn);
        else
          cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, nn, m, k, &one, b, nn,
                                    long(s.k * s.n), a, k, long(s.m * s.k), &zero, c, nn,
                                    long(s.m * s.n), int(s.batch));
        cudaDeviceSynchronize();
      }, 5);
      const std::string name = std::string(tf32 ? "TF32" : "FP32") + " GEMM " +
                               std::to_string(s.batch) + " x " + std::to_string(s.m) + "x" +
                               std::to_string(s.n) + "x" + std::to_string(s.k);
      row(name.c_str(), flops / ours / 1e12, "TFLOP/s", flops / alone / 1e12,
          "TFLOP/s (cublasSgemm alone)");
      cudaFree(a);
      cudaFree(b);
      cudaFree(c);
    }
    cublasDestroy(h);
  }
  return 0;
}
