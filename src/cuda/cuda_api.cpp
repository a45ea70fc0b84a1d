// src/cuda/cuda_api.cpp: typeshard/backend/detail/cuda_api.hpp's functions over the CUDA
// runtime, cuBLAS and NCCL (compiled by the host compiler; the kernels are in reduce.cu).
#include "typeshard/backend/detail/cuda_api.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "reduce_launch.hpp"
#include "typeshard/core/errors.hpp"

namespace typeshard::detail::cuda_api {
namespace {

[[noreturn]] void fail(const char* call, const char* why) {
  throw typeshard::error(std::string("typeshard: CUDA: ") + call + " failed: " + why);
}
void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) fail(call, cudaGetErrorString(e));
}
void check(cublasStatus_t e, const char* call) {
  if (e != CUBLAS_STATUS_SUCCESS) fail(call, cublasGetStatusString(e));
}
void check(ncclResult_t e, const char* call) {
  if (e != ncclSuccess) fail(call, ncclGetErrorString(e));
}
cudaStream_t as_stream(stream s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t as_event(event e) { return static_cast<cudaEvent_t>(e); }

}  // namespace

int visible_gpus(std::string& reason) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    reason = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    (void)cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  if (n == 0) reason = "cudaGetDeviceCount found 0 devices";
  return n;
}

std::string gpu_name(int gpu) {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, gpu), "cudaGetDeviceProperties");
  return p.name;
}

std::string versions() {
  int rt = 0, drv = 0, nccl = 0;
  (void)cudaRuntimeGetVersion(&rt);
  (void)cudaDriverGetVersion(&drv);
  (void)ncclGetVersion(&nccl);
  return "CUDA runtime " + std::to_string(rt) + ", driver " + std::to_string(drv) +
         ", cuBLAS " + std::to_string(CUBLAS_VERSION) + ", NCCL " + std::to_string(nccl);
}

void set_gpu(int gpu) { check(cudaSetDevice(gpu), "cudaSetDevice"); }

void enable_peer_access(int gpu, int peer) {
  if (gpu == peer) return;
  int can = 0;
  check(cudaDeviceCanAccessPeer(&can, gpu, peer), "cudaDeviceCanAccessPeer");
  if (!can) return;
  set_gpu(gpu);
  const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
  else check(e, "cudaDeviceEnablePeerAccess");
}

stream stream_create(int gpu) {
  set_gpu(gpu);
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  return s;
}
void stream_destroy(stream s) noexcept { (void)cudaStreamDestroy(as_stream(s)); }
void stream_sync(stream s) { check(cudaStreamSynchronize(as_stream(s)), "cudaStreamSynchronize"); }

event event_create(int gpu, bool timing) {
  set_gpu(gpu);
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming),
        "cudaEventCreateWithFlags");
  return e;
}
void event_destroy(event e) noexcept { (void)cudaEventDestroy(as_event(e)); }
void event_record(event e, stream s) {
  check(cudaEventRecord(as_event(e), as_stream(s)), "cudaEventRecord");
}
void stream_wait(stream s, event e) {
  check(cudaStreamWaitEvent(as_stream(s), as_event(e), 0), "cudaStreamWaitEvent");
}
float event_elapsed_ms(event start, event stop) {
  check(cudaEventSynchronize(as_event(stop)), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, as_event(start), as_event(stop)), "cudaEventElapsedTime");
  return ms;
}

pool pool_create(int gpu, int gpu_count) {
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = gpu;
  cudaMemPool_t p = nullptr;
  check(cudaMemPoolCreate(&p, &props), "cudaMemPoolCreate");
  // Keep freed memory in the pool rather than returning it at each synchronisation.
  std::uint64_t keep = ~std::uint64_t{0};
  check(cudaMemPoolSetAttribute(p, cudaMemPoolAttrReleaseThreshold, &keep),
        "cudaMemPoolSetAttribute");
  for (int peer = 0; peer < gpu_count; ++peer) {
    int can = 0;
    if (peer == gpu || cudaDeviceCanAccessPeer(&can, peer, gpu) != cudaSuccess || !can) continue;
    cudaMemAccessDesc access{};
    access.location.type = cudaMemLocationTypeDevice;
    access.location.id = peer;
    access.flags = cudaMemAccessFlagsProtReadWrite;
    check(cudaMemPoolSetAccess(p, &access, 1), "cudaMemPoolSetAccess");
  }
  return p;
}
void pool_destroy(pool p) noexcept { (void)cudaMemPoolDestroy(static_cast<cudaMemPool_t>(p)); }

void* alloc_async(std::size_t bytes, pool p, stream s) {
  if (bytes == 0) return nullptr;
  void* ptr = nullptr;
  check(cudaMallocFromPoolAsync(&ptr, bytes, static_cast<cudaMemPool_t>(p), as_stream(s)),
        "cudaMallocFromPoolAsync");
  return ptr;
}
void free_async(void* ptr, stream s) noexcept {
  if (ptr != nullptr) (void)cudaFreeAsync(ptr, as_stream(s));
}

void copy_async(void* dst, const void* src, std::size_t bytes, stream s) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(s)), "cudaMemcpyAsync");
}
void copy2d_async(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                  std::size_t width_bytes, std::size_t height, stream s) {
  if (width_bytes == 0 || height == 0) return;
  if (height == 1 || (dst_pitch == width_bytes && src_pitch == width_bytes))
    return copy_async(dst, src, width_bytes * height, s);
  check(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width_bytes, height, cudaMemcpyDefault,
                          as_stream(s)),
        "cudaMemcpy2DAsync");
}
void zero_async(void* dst, std::size_t bytes, stream s) {
  if (bytes == 0) return;
  check(cudaMemsetAsync(dst, 0, bytes, as_stream(s)), "cudaMemsetAsync");
}

void nccl_comms(std::span<const int> gpus, std::span<comm> out) {
  std::vector<ncclComm_t> comms(gpus.size());
  check(ncclCommInitAll(comms.data(), static_cast<int>(gpus.size()), gpus.data()),
        "ncclCommInitAll");
  for (std::size_t i = 0; i < comms.size(); ++i) out[i] = comms[i];
}
void nccl_destroy(comm c) noexcept { (void)ncclCommDestroy(static_cast<ncclComm_t>(c)); }

void nccl_exchange(comm c, stream s, std::size_t rank, std::span<const void* const> send,
                   std::span<const std::size_t> send_bytes, std::span<void* const> recv,
                   std::span<const std::size_t> recv_bytes) {
  const auto nc = static_cast<ncclComm_t>(c);
  check(ncclGroupStart(), "ncclGroupStart");
  for (std::size_t j = 0; j < send.size(); ++j) {
    if (j == rank) continue;
    if (send_bytes[j] != 0)
      check(ncclSend(send[j], send_bytes[j], ncclChar, static_cast<int>(j), nc, as_stream(s)),
            "ncclSend");
    if (recv_bytes[j] != 0)
      check(ncclRecv(recv[j], recv_bytes[j], ncclChar, static_cast<int>(j), nc, as_stream(s)),
            "ncclRecv");
  }
  check(ncclGroupEnd(), "ncclGroupEnd");
}

void reduce2d_async(unsigned kind, unsigned op, void* acc, std::size_t acc_ld, const void* x,
                    std::size_t x_ld, std::size_t rows, std::size_t cols, stream s) {
  if (const char* why = launch_reduce(kind, op, acc, acc_ld, x, x_ld, rows, cols, s))
    fail("the reduction kernel", why);
}

blas blas_create(int gpu, stream s, bool tf32) {
  set_gpu(gpu);
  cublasHandle_t h = nullptr;
  check(cublasCreate(&h), "cublasCreate");
  check(cublasSetStream(h, as_stream(s)), "cublasSetStream");
  check(cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
        "cublasSetMathMode");
  return h;
}
void blas_destroy(blas h) noexcept { (void)cublasDestroy(static_cast<cublasHandle_t>(h)); }

void sgemm(blas h, bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
           float alpha, const float* a, std::size_t lda, const float* b, std::size_t ldb,
           float beta, float* c, std::size_t ldc, std::size_t batch, std::size_t stride_a,
           std::size_t stride_b, std::size_t stride_c) {
  if (m == 0 || n == 0 || batch == 0) return;
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B first.
  const auto hh = static_cast<cublasHandle_t>(h);
  const cublasOperation_t ob = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t oa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const auto i = [](std::size_t v) { return static_cast<int>(v); };
  const auto l = [](std::size_t v) { return static_cast<long long>(v); };
  if (batch == 1)
    check(cublasSgemm(hh, ob, oa, i(n), i(m), i(k), &alpha, b, i(ldb), a, i(lda), &beta, c,
                      i(ldc)),
          "cublasSgemm");
  else
    check(cublasSgemmStridedBatched(hh, ob, oa, i(n), i(m), i(k), &alpha, b, i(ldb),
                                    l(stride_b), a, i(lda), l(stride_a), &beta, c, i(ldc),
                                    l(stride_c), i(batch)),
          "cublasSgemmStridedBatched");
}

}  // namespace typeshard::detail::cuda_api
