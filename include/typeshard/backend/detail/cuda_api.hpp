// typeshard/backend/detail/cuda_api.hpp: the CUDA runtime, cuBLAS and NCCL calls the CUDA
// backend makes, behind a plain C++ interface. Internal: do not rely on anything in detail/.
//
// Declared here, defined in the compiled library typeshard::cuda (src/cuda/): this header
// includes no CUDA header, so code that includes backend/cuda.hpp compiles with g++ or
// clang++ alone and links typeshard::cuda. Handles are opaque pointers (cudaStream_t,
// cudaEvent_t, cudaMemPool_t, cublasHandle_t, ncclComm_t). Every function throws
// typeshard::error naming the failed call and the library's error string; none is called
// from a CUDA kernel.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace typeshard::detail::cuda_api {

using stream = void*;
using event = void*;
using pool = void*;
using blas = void*;
using comm = void*;

// The number of visible GPUs. When the runtime finds none (no driver, no device,
// CUDA_VISIBLE_DEVICES empty), 0, with `reason` set to cudaGetDeviceCount's error string.
int visible_gpus(std::string& reason);
std::string gpu_name(int gpu);
// "CUDA runtime 13000, driver 13000, cuBLAS 130000, NCCL 22800".
std::string versions();

void set_gpu(int gpu);
// Lets kernels on `gpu` read memory of `peer` (ignored where the GPUs cannot, or gpu == peer).
void enable_peer_access(int gpu, int peer);

stream stream_create(int gpu);
void stream_destroy(stream s) noexcept;
void stream_sync(stream s);

// `timing`: the event can be timed (event_elapsed_ms); otherwise it orders streams only.
event event_create(int gpu, bool timing = false);
void event_destroy(event e) noexcept;
void event_record(event e, stream s);
// Work queued on `s` after this call runs after the work `e` last recorded.
void stream_wait(stream s, event e);
// Milliseconds between two recorded, completed timing events.
float event_elapsed_ms(event start, event stop);

// A memory pool of its own on `gpu` (cudaMemPoolCreate), for stream-ordered allocations,
// readable from the GPUs below gpu_count that can access `gpu`'s memory as peers.
pool pool_create(int gpu, int gpu_count);
void pool_destroy(pool p) noexcept;
void* alloc_async(std::size_t bytes, pool p, stream s);  // nullptr for 0 bytes
void free_async(void* ptr, stream s) noexcept;

// Copies ordered on `s` (host or device pointers, any GPU: cudaMemcpyDefault).
void copy_async(void* dst, const void* src, std::size_t bytes, stream s);
void copy2d_async(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                  std::size_t width_bytes, std::size_t height, stream s);
void zero_async(void* dst, std::size_t bytes, stream s);

// acc[r * acc_ld + c] = op(acc[...], x[r * x_ld + c]) for r < rows, c < cols, on `s`, both on
// the stream's GPU. kind and op are typeshard::element_kind and reduce_op as integers;
// reductions mean what backend/detail/reduce_kernels.hpp's mean (bfloat16 sums in float,
// rounded to nearest even; integers wrap; max/min NaN-aware; complex: sums of both parts).
void reduce2d_async(unsigned kind, unsigned op, void* acc, std::size_t acc_ld, const void* x,
                    std::size_t x_ld, std::size_t rows, std::size_t cols, stream s);

// NCCL: one communicator per GPU of `gpus` (ncclCommInitAll: one process, distinct GPUs).
void nccl_comms(std::span<const int> gpus, std::span<comm> out);
void nccl_destroy(comm c) noexcept;
// One grouped exchange on member `rank`'s communicator: send_bytes[j] bytes from send[j] to
// member j and recv_bytes[j] into recv[j] from member j (0 bytes: no message). The member's
// own entries are skipped (the caller copies locally).
void nccl_exchange(comm c, stream s, std::size_t rank, std::span<const void* const> send,
                   std::span<const std::size_t> send_bytes, std::span<void* const> recv,
                   std::span<const std::size_t> recv_bytes);

// cuBLAS on `s`: full FP32 (CUBLAS_DEFAULT_MATH) unless `tf32`
// (CUBLAS_TF32_TENSOR_OP_MATH: inputs rounded to TF32, about 10 bits of mantissa).
blas blas_create(int gpu, stream s, bool tf32);
void blas_destroy(blas h) noexcept;
// Row-major C[m][n] = alpha * op(A) op(B) + beta * C, op(A) [m][k], op(B) [k][n], leading
// dimensions in elements; `batch` products strided by stride_a/b/c elements
// (cublasSgemmStridedBatched; batch 1 is cublasSgemm).
void sgemm(blas h, bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
           float alpha, const float* a, std::size_t lda, const float* b, std::size_t ldb,
           float beta, float* c, std::size_t ldc, std::size_t batch = 1,
           std::size_t stride_a = 0, std::size_t stride_b = 0, std::size_t stride_c = 0);

}  // namespace typeshard::detail::cuda_api
