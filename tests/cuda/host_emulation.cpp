// tests/cuda/host_emulation.cpp: cuda_api (backend/detail/cuda_api.hpp) emulated on the host,
// so that cuda_devices' own logic (the group rendezvous, the signature and permutation
// checks, the layouts of every collective, rank-order reductions, the NCCL path's packing
// and exchange) runs and is tested on a machine without a GPU, linked instead of
// typeshard::cuda. "Device memory" is host memory, streams run their work at once (so the
// events' ordering is not exercised), reductions are the thread pool's loops
// (detail/reduce_kernels.hpp), NCCL's grouped send/recv is a rendezvous of the clique's
// threads, GEMM is a plain loop. TYPESHARD_EMULATED_GPUS (default 2) GPUs are "visible".
#include <complex>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <typeshard/backend/backend.hpp>
#include <typeshard/backend/detail/cuda_api.hpp>
#include <typeshard/core/errors.hpp>

namespace typeshard::detail::cuda_api {
namespace {

struct emulated_blas {
  bool tf32 = false;
};

struct clique {
  explicit clique(std::size_t n) : posted(n) {}
  struct post {
    std::vector<const void*> send;
    std::vector<std::size_t> send_bytes;
  };
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<post> posted;
  std::size_t arrived = 0;
  std::uint64_t generation = 0;

  void barrier(std::unique_lock<std::mutex>& lock) {
    const std::uint64_t g = generation;
    if (++arrived == posted.size()) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    cv.wait(lock, [&] { return generation != g; });
  }
};

struct emulated_comm {
  std::shared_ptr<clique> c;
  std::size_t rank = 0;
};

template <class T>
void reduce_rows(unsigned op, void* acc, std::size_t acc_ld, const void* x, std::size_t x_ld,
                 std::size_t rows, std::size_t cols) {
  for (std::size_t r = 0; r < rows; ++r)
    reduce_elements<T>(static_cast<T*>(acc) + r * acc_ld, static_cast<const T*>(x) + r * x_ld,
                       cols, static_cast<reduce_op>(op));
}

}  // namespace

int visible_gpus(std::string& reason) {
  const char* env = std::getenv("TYPESHARD_EMULATED_GPUS");
  const int n = env != nullptr ? std::atoi(env) : 2;
  if (n <= 0) reason = "cudaErrorNoDevice: no CUDA-capable device is detected (emulated)";
  return n;
}
std::string gpu_name(int gpu) { return "emulated GPU " + std::to_string(gpu); }
std::string versions() { return "host emulation"; }
void set_gpu(int) {}
void enable_peer_access(int, int) {}

stream stream_create(int gpu) { return new int(gpu); }
void stream_destroy(stream s) noexcept { delete static_cast<int*>(s); }
void stream_sync(stream) {}
event event_create(int gpu, bool) { return new int(gpu); }
void event_destroy(event e) noexcept { delete static_cast<int*>(e); }
void event_record(event, stream) {}
void stream_wait(stream, event) {}
float event_elapsed_ms(event, event) { return 0; }

pool pool_create(int gpu, int) { return new int(gpu); }
void pool_destroy(pool p) noexcept { delete static_cast<int*>(p); }
void* alloc_async(std::size_t bytes, pool, stream) {
  if (bytes == 0) return nullptr;
  void* p = std::malloc(bytes);
  std::memset(p, 0xcd, bytes);  // not zero: a collective that forgets to write shows
  return p;
}
void free_async(void* ptr, stream) noexcept { std::free(ptr); }

void copy_async(void* dst, const void* src, std::size_t bytes, stream) {
  if (bytes != 0) std::memmove(dst, src, bytes);
}
void copy2d_async(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                  std::size_t width_bytes, std::size_t height, stream) {
  if (width_bytes == 0) return;
  if (width_bytes > dst_pitch || width_bytes > src_pitch)
    throw error("emulated cudaMemcpy2DAsync: width exceeds a pitch (cudaErrorInvalidPitchValue)");
  for (std::size_t r = 0; r < height; ++r)
    std::memcpy(static_cast<unsigned char*>(dst) + r * dst_pitch,
                static_cast<const unsigned char*>(src) + r * src_pitch, width_bytes);
}
void zero_async(void* dst, std::size_t bytes, stream) {
  if (bytes != 0) std::memset(dst, 0, bytes);
}

void reduce2d_async(unsigned kind, unsigned op, void* acc, std::size_t acc_ld, const void* x,
                    std::size_t x_ld, std::size_t rows, std::size_t cols, stream) {
  auto as = [&]<class T>(T*) { reduce_rows<T>(op, acc, acc_ld, x, x_ld, rows, cols); };
  switch (static_cast<element_kind>(kind)) {
    case element_kind::int8: return as(static_cast<std::int8_t*>(nullptr));
    case element_kind::int32: return as(static_cast<std::int32_t*>(nullptr));
    case element_kind::uint64: return as(static_cast<std::uint64_t*>(nullptr));
    case element_kind::float32: return as(static_cast<float*>(nullptr));
    case element_kind::float64: return as(static_cast<double*>(nullptr));
    case element_kind::complex64: return as(static_cast<std::complex<float>*>(nullptr));
    case element_kind::bfloat16: return as(static_cast<bfloat16*>(nullptr));
    default: throw error("emulated reduce2d_async: element kind not emulated");
  }
}

void nccl_comms(std::span<const int> gpus, std::span<comm> out) {
  for (std::size_t a = 0; a < gpus.size(); ++a)
    for (std::size_t b = 0; b < a; ++b)
      if (gpus[a] == gpus[b])
        throw error("typeshard: CUDA: ncclCommInitAll failed: invalid usage (emulated: two "
                    "ranks on one GPU)");
  auto c = std::make_shared<clique>(gpus.size());
  for (std::size_t i = 0; i < gpus.size(); ++i) out[i] = new emulated_comm{c, i};
}
void nccl_destroy(comm c) noexcept { delete static_cast<emulated_comm*>(c); }

void nccl_exchange(comm c, stream, std::size_t rank, std::span<const void* const> send,
                   std::span<const std::size_t> send_bytes, std::span<void* const> recv,
                   std::span<const std::size_t> recv_bytes) {
  auto& e = *static_cast<emulated_comm*>(c);
  if (rank != e.rank) throw error("emulated nccl_exchange: rank is not the communicator's");
  clique& q = *e.c;
  std::unique_lock<std::mutex> lock(q.mutex);
  q.posted[rank] = {{send.begin(), send.end()}, {send_bytes.begin(), send_bytes.end()}};
  q.barrier(lock);
  for (std::size_t j = 0; j < recv.size(); ++j) {
    if (j == rank || recv_bytes[j] == 0) continue;
    if (q.posted[j].send_bytes[rank] != recv_bytes[j])
      throw error("emulated NCCL: a receive of " + std::to_string(recv_bytes[j]) +
                  " bytes meets a send of " + std::to_string(q.posted[j].send_bytes[rank]));
    std::memcpy(recv[j], q.posted[j].send[rank], recv_bytes[j]);
  }
  q.barrier(lock);
}

blas blas_create(int, stream, bool tf32) { return new emulated_blas{tf32}; }
void blas_destroy(blas h) noexcept { delete static_cast<emulated_blas*>(h); }

void sgemm(blas, bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
           float alpha, const float* a, std::size_t lda, const float* b, std::size_t ldb,
           float beta, float* c, std::size_t ldc, std::size_t batch, std::size_t stride_a,
           std::size_t stride_b, std::size_t stride_c) {
  for (std::size_t q = 0; q < batch; ++q)
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        double s = 0;
        for (std::size_t p = 0; p < k; ++p) {
          const float x = trans_a ? a[q * stride_a + p * lda + i] : a[q * stride_a + i * lda + p];
          const float y = trans_b ? b[q * stride_b + j * ldb + p] : b[q * stride_b + p * ldb + j];
          s += double(x) * double(y);
        }
        float& out = c[q * stride_c + i * ldc + j];
        out = static_cast<float>(alpha * s + (beta == 0 ? 0.0 : double(beta) * out));
      }
}

}  // namespace typeshard::detail::cuda_api
