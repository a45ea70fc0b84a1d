// src/cuda/reduce.cu: the reduction kernels of the CUDA backend's collectives
// (launch_reduce, which cuda_api::reduce2d_async calls). Compiled by nvcc; includes no typeshard template header (nvcc
// 13.0 cannot compile typeshard.hpp), only reduce_launch.hpp, a plain declaration.
//
// Each kernel means what backend/detail/reduce_kernels.hpp's loop means on the CPU, so the
// CUDA backend's sums are bitwise the thread pool's when both add in the same order: float
// and double add with IEEE round-to-nearest (no fused multiply-add: there is no multiply),
// integers wrap (unsigned arithmetic), bfloat16 adds in float and rounds to nearest even,
// max/min are XLA's NaN-aware ones (a NaN from either side wins).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "reduce_launch.hpp"

namespace typeshard::detail::cuda_api {
namespace {

enum : unsigned { op_sum = 0, op_max = 1, op_min = 2 };

template <class T>
__device__ bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  else return false;
}

template <class T>
__device__ T combine(T a, T x, unsigned op) {
  if (op == op_max) return (a < x || is_nan(x)) ? x : a;
  return (x < a || is_nan(x)) ? x : a;
}

// Sums: integers in unsigned arithmetic (wraps), floating point as is.
template <class T, class S>
__global__ void reduce_kernel(T* acc, std::size_t acc_ld, const T* x, std::size_t x_ld,
                              std::size_t rows, std::size_t cols, unsigned op) {
  const std::size_t total = rows * cols;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < total;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t r = i / cols, c = i % cols;
    T& a = acc[r * acc_ld + c];
    const T v = x[r * x_ld + c];
    if (op == op_sum) a = static_cast<T>(static_cast<S>(a) + static_cast<S>(v));
    else a = combine(a, v, op);
  }
}

__device__ float bf16_to_float(std::uint16_t b) {
  return __uint_as_float(static_cast<std::uint32_t>(b) << 16);
}
__device__ std::uint16_t bf16_round(float f) {  // nearest, ties to even; NaN made quiet
  const std::uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  const std::uint32_t lsb = (u >> 16) & 1u;
  return static_cast<std::uint16_t>((u + 0x7fffu + lsb) >> 16);
}

__global__ void reduce_bf16_kernel(std::uint16_t* acc, std::size_t acc_ld,
                                   const std::uint16_t* x, std::size_t x_ld, std::size_t rows,
                                   std::size_t cols, unsigned op) {
  const std::size_t total = rows * cols;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < total;
       i += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t r = i / cols, c = i % cols;
    std::uint16_t& a = acc[r * acc_ld + c];
    const float fa = bf16_to_float(a), fx = bf16_to_float(x[r * x_ld + c]);
    const bool take_x = op == op_max ? (fa < fx || fx != fx) : (fx < fa || fx != fx);
    if (op == op_sum) a = bf16_round(fa + fx);
    else if (take_x) a = x[r * x_ld + c];
  }
}

template <class T, class S = T>
void launch(void* acc, std::size_t acc_ld, const void* x, std::size_t x_ld, std::size_t rows,
            std::size_t cols, unsigned op, cudaStream_t s) {
  const std::size_t total = rows * cols;
  const unsigned threads = 256;
  const std::size_t want = (total + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(want < 65535 * 4 ? want : 65535 * 4);
  reduce_kernel<T, S><<<blocks, threads, 0, s>>>(static_cast<T*>(acc), acc_ld,
                                                  static_cast<const T*>(x), x_ld, rows, cols, op);
}

}  // namespace

const char* launch_reduce(unsigned kind, unsigned op, void* acc, std::size_t acc_ld,
                          const void* x, std::size_t x_ld, std::size_t rows, std::size_t cols,
                          void* st) {
  if (rows == 0 || cols == 0) return nullptr;
  const auto s = static_cast<cudaStream_t>(st);
  switch (kind) {  // typeshard::element_kind's order
    case 0: launch<std::int8_t, std::uint8_t>(acc, acc_ld, x, x_ld, rows, cols, op, s); break;
    case 1: launch<std::uint8_t>(acc, acc_ld, x, x_ld, rows, cols, op, s); break;
    case 2: launch<std::int16_t, std::uint16_t>(acc, acc_ld, x, x_ld, rows, cols, op, s); break;
    case 3: launch<std::uint16_t>(acc, acc_ld, x, x_ld, rows, cols, op, s); break;
    case 4: launch<std::int32_t, std::uint32_t>(acc, acc_ld, x, x_ld, rows, cols, op, s); break;
    case 5: launch<std::uint32_t>(acc, acc_ld, x, x_ld, rows, cols, op, s); break;
    case 6: launch<std::int64_t, std::uint64_t>(acc, acc_ld, x, x_ld, rows, cols, op, s); break;
    case 7: launch<std::uint64_t>(acc, acc_ld, x, x_ld, rows, cols, op, s); break;
    case 8: launch<float>(acc, acc_ld, x, x_ld, rows, cols, op, s); break;
    case 9: launch<double>(acc, acc_ld, x, x_ld, rows, cols, op, s); break;
    case 10:  // complex64: a sum of both parts (complex reduces with sum only)
      launch<float>(acc, 2 * acc_ld, x, 2 * x_ld, rows, 2 * cols, op_sum, s);
      break;
    case 11: launch<double>(acc, 2 * acc_ld, x, 2 * x_ld, rows, 2 * cols, op_sum, s); break;
    case 12: {
      const std::size_t total = rows * cols;
      const unsigned blocks = static_cast<unsigned>(
          (total + 255) / 256 < 65535 * 4 ? (total + 255) / 256 : 65535 * 4);
      reduce_bf16_kernel<<<blocks, 256, 0, s>>>(static_cast<std::uint16_t*>(acc), acc_ld,
                                                 static_cast<const std::uint16_t*>(x), x_ld,
                                                 rows, cols, op);
      break;
    }
    default:
      return "an element kind that cannot be reduced";
  }
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace typeshard::detail::cuda_api
