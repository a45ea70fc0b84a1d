// typeshard/backend/cuda.hpp: N devices on the visible NVIDIA GPUs (link typeshard::cuda).
//
//   ts::cuda_devices gpus{8};     // 8 devices: on one GPU, 8 simulated devices
//
// Device d lives on GPU d * G / N of the G GPUs used (min(N, visible)): consecutive devices
// share a GPU. Each device has its own CUDA stream, its own memory pool (cudaMemPoolCreate),
// and a cuBLAS handle on its stream. Blocks and collective buffers are device memory
// (allocate / to_device / to_host below); a collective's buffers are device pointers.
//
// Collectives:
// - Simulated devices (more devices than GPUs), and element types NCCL has no type for:
//   typeshard's own. Members meet on the host (publish buffers, one barrier), then each
//   member queues on its own stream, after the peers' "ready" events, the device-to-device
//   copies and reduction kernels of its share, records a "done" event; one more barrier, and
//   each member's stream waits for every peer's "done" (so no member overwrites a buffer a
//   peer still reads). Sums run in group-rank order, as the thread pool's do, so every
//   backend's float sums agree bitwise.
// - One device per GPU (N <= visible GPUs) with `nccl`: the bytes move through NCCL (one
//   communicator per group, ncclCommInitAll; NCCL refuses two ranks on one GPU) as grouped
//   ncclSend/ncclRecv, and reductions run on the receiver in group-rank order with the same
//   kernels: results are bitwise the simulated devices' and the thread pool's.
// Every collective returns once its work is queued on the calling device's stream; work the
// caller queues after it on that stream (to_host, a GEMM, another collective) sees its result.
//
// Each device has a host thread of its own for the backend's life, with its GPU current
// (cudaSetDevice): a run() hands each device's body to that thread. When no GPU is visible the
// constructor throws typeshard::error with the CUDA runtime's reason.
//
// Not done yet: typeshard's operations (device_put, elementwise, matmul, ...) still run their
// local kernels on the CPU; this backend gives their next step the device memory, copies,
// collectives and the cuBLAS GEMM to dispatch to (docs/gpu.md).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "../core/errors.hpp"
#include "backend.hpp"
#include "detail/cuda_api.hpp"

namespace typeshard {

struct cuda_options {
  // Use NCCL for the collectives when every device has a GPU of its own.
  bool nccl = true;
  // Let cuBLAS round float GEMM inputs to TF32 (about 10 mantissa bits, several times the
  // FP32 throughput on tensor cores). Off: full FP32, the CPU's results within rounding.
  bool allow_tf32 = false;
  // How many of the visible GPUs to use (0: all).
  int max_gpus = 0;
};

class cuda_devices final : public backend {
 public:
  explicit cuda_devices(std::size_t count, cuda_options options = {});
  cuda_devices(const cuda_devices&) = delete;
  cuda_devices& operator=(const cuda_devices&) = delete;
  ~cuda_devices() override;

  std::size_t device_count() const override { return devices_.size(); }
  bool is_addressable(device_id d) const override { return d < devices_.size(); }
  std::string_view platform() const override { return "cuda"; }

  // The GPU device d runs on, the number of GPUs used, and whether collectives go through
  // NCCL (one device per GPU) or typeshard's own (simulated devices).
  int gpu_of(device_id d) const { return at(d).gpu; }
  std::size_t gpu_count() const { return gpus_; }
  bool uses_nccl() const { return use_nccl_; }
  std::string gpu_name(device_id d) const { return detail::cuda_api::gpu_name(at(d).gpu); }

  // ---- memory: stream-ordered on the device's stream, from its own pool ----------------
  [[nodiscard]] void* allocate(device_id d, std::size_t bytes);
  void deallocate(device_id d, void* ptr) noexcept;
  // Host to device / device to host; both return when the copy is done (and so is the
  // work queued before it on the device's stream).
  void to_device(device_id d, void* dst, const void* host_src, std::size_t bytes);
  void to_host(device_id d, void* host_dst, const void* src, std::size_t bytes);
  // Waits for everything queued on the device's stream.
  void synchronize(device_id d);
  // The device's cudaStream_t, as an opaque pointer (for kernels of the caller's own).
  void* stream_of(device_id d) const { return at(d).stream; }

  // ---- per-shard GEMM through cuBLAS on the device's stream (queued, not waited for) -----
  // Row-major C[m][n] = A[m][k] B[k][n] (+ C if accumulate), `batch` products of matrices
  // stored one after another (cublasSgemmStridedBatched). Full FP32 unless allow_tf32.
  void gemm(device_id d, const float* a, const float* b, float* c, std::size_t m,
            std::size_t n, std::size_t k, bool accumulate = false, std::size_t batch = 1);

 protected:
  body_position current_body() const override;
  std::string devices_summary() const override;
  void do_run(std::span<const device_id> devices,
              detail::function_ref<void(std::size_t)> body) override;
  void do_all_gather(const collective_group& g, element_type t, const void* send, void* recv,
                     std::size_t rows, std::span<const std::size_t> counts,
                     std::uint64_t signature) override;
  void do_reduce_scatter(const collective_group& g, element_type t, reduce_op op,
                         const void* send, void* recv, std::size_t rows,
                         std::span<const std::size_t> counts,
                         std::uint64_t signature) override;
  void do_all_reduce(const collective_group& g, element_type t, reduce_op op, const void* send,
                     void* recv, std::size_t count, std::uint64_t signature) override;
  void do_all_to_all(const collective_group& g, element_type t, const void* send, void* recv,
                     const strided_pieces& send_pieces, const strided_pieces& recv_pieces,
                     std::uint64_t signature) override;
  void do_permute(const collective_group& g, element_type t, const void* send,
                  std::size_t send_count, std::size_t send_to, void* recv,
                  std::size_t recv_count, std::size_t recv_from,
                  std::uint64_t signature) override;

 private:
  struct device_state {
    int gpu = 0;
    detail::cuda_api::stream stream = nullptr;
    detail::cuda_api::pool pool = nullptr;
    detail::cuda_api::event ready = nullptr;  // recorded when a member's buffers are ready
    detail::cuda_api::event done = nullptr;   // recorded when it has read its peers' buffers
    detail::cuda_api::blas blas = nullptr;
  };
  // What one member publishes to its group.
  struct call {
    const void* send = nullptr;
    void* recv = nullptr;
    std::uint64_t signature = 0;
    std::size_t peer = no_peer;  // permute: send_to
    std::size_t count = 0;       // permute: send_count
    std::size_t recv_from = no_peer;
    std::size_t recv_count = 0;
    strided_pieces pieces{};     // all_to_all: send_pieces
    device_id device = 0;
  };
  struct group_state {
    std::vector<call> calls;
    std::size_t arrived = 0;
    std::uint64_t generation = 0;
    std::vector<detail::cuda_api::comm> comms;  // NCCL, one per member, made on first use
  };
  struct run_state;

  const device_state& at(device_id d) const;
  device_state& here();  // the calling body's device
  // Meets the group: publishes `mine`, waits for every member, checks the signatures.
  // Returns the group's calls (valid until the second meet of this collective).
  std::span<const call> meet(const collective_group& g, const call& mine);
  void barrier(const collective_group& g, group_state& grp, std::unique_lock<std::mutex>& lock);
  group_state& group_of(const collective_group& g);
  // The end of every own collective: record done, meet, wait for the peers' done.
  void finish(const collective_group& g, std::span<const call> calls);
  // A peer's region (rows x cols elements, leading dimension ld) readable by a kernel on the
  // calling device's GPU: the region itself on the same GPU, else a staged copy (freed by
  // the caller with free_async).
  struct view {
    const void* ptr;
    std::size_t ld;
    void* staged;
  };
  view readable(const call& peer, const void* ptr, std::size_t ld, std::size_t rows,
                std::size_t cols, std::size_t size);
  bool nccl_group(const collective_group& g, element_type t) const;
  // NCCL exchange: piece j of `send` to member j, piece i of `recv` from member i.
  void exchange(const collective_group& g, std::span<const void* const> send,
                std::span<const std::size_t> send_bytes, std::span<void* const> recv,
                std::span<const std::size_t> recv_bytes);

  std::vector<device_state> devices_;
  std::size_t gpus_ = 0;
  bool use_nccl_ = false;
  bool tf32_ = false;
  // Releases the workers and every handle made so far (the destructor; a failed constructor).
  void release() noexcept;
  void work(std::size_t device);  // device thread `device`'s loop

  // One host thread per device for its whole life, its GPU current: a run hands each of its
  // devices its position and the body (epoch), and waits until `remaining` is 0.
  struct workers {
    std::vector<std::thread> threads;
    std::mutex mutex;
    std::condition_variable wake, done;
    std::uint64_t epoch = 0;
    bool stop = false;
    std::vector<std::size_t> position;  // per device: its index in the run, or no_peer
    const detail::function_ref<void(std::size_t)>* body = nullptr;
    std::size_t remaining = 0;
  };
  workers workers_;
  std::mutex run_mutex_;
  run_state* run_ = nullptr;  // the run in progress
  std::mutex mutex_;          // guards groups_, run_->aborted, the group states
  std::condition_variable met_;
  std::map<std::vector<std::size_t>, group_state> groups_;  // by members' device ids
};

}  // namespace typeshard

#include "detail/cuda_devices_impl.hpp"
#include "detail/cuda_collectives_impl.hpp"
