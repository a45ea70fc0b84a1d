// benchmarks/cuda_gpu/nvrtc_compile.cpp: what compiling the CUDA backend's reduction kernel at run
// time with NVRTC would cost, per kernel, against nothing at run time for the kernels nvcc
// compiles once into typeshard::cuda (docs/gpu.md, "nvcc units or NVRTC"). Needs no GPU
// (NVRTC compiles on the host). Build and run:
//   g++ -std=c++20 -O2 -I/usr/local/cuda/include benchmarks/cuda_gpu/nvrtc_compile.cpp \
//       -L/usr/local/cuda/lib64 -lnvrtc -o build/nvrtc_compile && build/nvrtc_compile
#include <nvrtc.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {

// One specialisation of the reduction (float sum over a 2-d region), as NVRTC would be given it.
const char* source = R"(
extern "C" __global__ void reduce_f32_sum(float* acc, unsigned long long acc_ld, const float* x,
                                          unsigned long long x_ld, unsigned long long rows,
                                          unsigned long long cols) {
  const unsigned long long total = rows * cols;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
       i < total; i += (unsigned long long)gridDim.x * blockDim.x) {
    const unsigned long long r = i / cols, c = i % cols;
    acc[r * acc_ld + c] += x[r * x_ld + c];
  }
}
)";

double compile_ms(const char* arch_option) {
  const auto t0 = std::chrono::steady_clock::now();
  nvrtcProgram p;
  nvrtcCreateProgram(&p, source, "reduce.cu", 0, nullptr, nullptr);
  const char* opts[] = {arch_option, "-std=c++17"};
  const nvrtcResult r = nvrtcCompileProgram(p, 2, opts);
  std::size_t size = 0;
  if (r == NVRTC_SUCCESS) nvrtcGetCUBINSize(p, &size);
  nvrtcDestroyProgram(&p);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (r != NVRTC_SUCCESS) std::printf("compile failed: %s\n", nvrtcGetErrorString(r));
  return ms;
}

}  // namespace

int main() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  std::printf("NVRTC %d.%d, one reduction kernel to sm_90 CUBIN:\n", major, minor);
  std::vector<double> ms;
  for (int i = 0; i < 6; ++i) ms.push_back(compile_ms("--gpu-architecture=sm_90"));
  std::printf("first %.1f ms, then", ms[0]);
  for (std::size_t i = 1; i < ms.size(); ++i) std::printf(" %.1f", ms[i]);
  std::printf(" ms\n");
}
