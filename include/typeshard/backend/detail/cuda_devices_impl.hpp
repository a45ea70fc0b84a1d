// typeshard/backend/detail/cuda_devices_impl.hpp: cuda_devices' member functions (included by
// backend/cuda.hpp). Internal: do not rely on anything in detail/.
#pragma once

#include <algorithm>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "../cuda.hpp"

namespace typeshard {

namespace detail {
// The calling thread's place in a cuda_devices run.
struct cuda_body_context {
  const void* owner = nullptr;
  std::size_t run_size = 0;
  std::size_t index = 0;
};
inline thread_local cuda_body_context cuda_current_body{};
}  // namespace detail

struct cuda_devices::run_state {
  std::span<const device_id> devices;
  bool aborted = false;  // under mutex_
};

namespace cuda_detail = detail::cuda_api;

// cuda_api::reduce2d_async takes element_kind and reduce_op as these integers (reduce.cu).
static_assert(static_cast<unsigned>(element_kind::int8) == 0 &&
              static_cast<unsigned>(element_kind::float32) == 8 &&
              static_cast<unsigned>(element_kind::complex128) == 11 &&
              static_cast<unsigned>(element_kind::bfloat16) == 12 &&
              static_cast<unsigned>(reduce_op::sum) == 0 &&
              static_cast<unsigned>(reduce_op::max) == 1 &&
              static_cast<unsigned>(reduce_op::min) == 2);

inline cuda_devices::cuda_devices(std::size_t count, cuda_options options)
    : tf32_(options.allow_tf32) {
  if (count == 0) throw usage_error("typeshard: cuda_devices needs at least one device");
  std::string why;
  const int visible = cuda_detail::visible_gpus(why);
  if (visible <= 0)
    throw error("typeshard: cuda_devices: no CUDA GPU is visible (" + why +
                "); run on a machine with an NVIDIA GPU and its driver, or use ts::cpu_devices");
  std::size_t g = static_cast<std::size_t>(visible);
  if (options.max_gpus > 0) g = std::min(g, static_cast<std::size_t>(options.max_gpus));
  gpus_ = std::min(g, count);
  use_nccl_ = options.nccl && count <= gpus_;
  devices_.resize(count);
  try {
    for (std::size_t d = 0; d < count; ++d) {
      device_state& s = devices_[d];
      s.gpu = static_cast<int>(d * gpus_ / count);
      s.stream = cuda_detail::stream_create(s.gpu);
      s.pool = cuda_detail::pool_create(s.gpu, static_cast<int>(gpus_));
      s.ready = cuda_detail::event_create(s.gpu);
      s.done = cuda_detail::event_create(s.gpu);
      s.blas = cuda_detail::blas_create(s.gpu, s.stream, tf32_);
    }
    for (std::size_t a = 0; a < gpus_; ++a)
      for (std::size_t b = 0; b < gpus_; ++b)
        cuda_detail::enable_peer_access(static_cast<int>(a), static_cast<int>(b));
    workers_.position.assign(count, no_peer);
    workers_.threads.reserve(count);
    for (std::size_t d = 0; d < count; ++d) {
      try {
        workers_.threads.emplace_back([this, d] { work(d); });
      } catch (const std::system_error& e) {
        throw error("typeshard: cuda_devices: cannot start the host thread of device " +
                    std::to_string(d) + ": " + e.what());
      }
    }
  } catch (...) {
    release();  // what was made so far (null handles are skipped)
    throw;
  }
}

inline cuda_devices::~cuda_devices() { release(); }

inline void cuda_devices::work(std::size_t device) {
  std::uint64_t seen = 0;
  for (;;) {
    std::size_t position = no_peer;
    const detail::function_ref<void(std::size_t)>* body = nullptr;
    {
      std::unique_lock<std::mutex> lock(workers_.mutex);
      workers_.wake.wait(lock, [&] { return workers_.epoch != seen || workers_.stop; });
      if (workers_.stop) return;
      seen = workers_.epoch;
      position = workers_.position[device];
      body = workers_.body;
    }
    if (position == no_peer) continue;
    (*body)(position);  // catches everything (do_run)
    const std::lock_guard<std::mutex> lock(workers_.mutex);
    if (--workers_.remaining == 0) workers_.done.notify_all();
  }
}

inline void cuda_devices::release() noexcept {
  {
    const std::lock_guard<std::mutex> lock(workers_.mutex);
    workers_.stop = true;
  }
  workers_.wake.notify_all();
  for (std::thread& t : workers_.threads) t.join();
  workers_.threads.clear();
  for (device_state& s : devices_) {
    if (s.stream == nullptr) continue;
    try {
      cuda_detail::set_gpu(s.gpu);
      cuda_detail::stream_sync(s.stream);
    } catch (...) {  // a destructor reports nothing; the handles are released below anyway
    }
  }
  for (auto& [members, grp] : groups_)
    for (cuda_detail::comm c : grp.comms) cuda_detail::nccl_destroy(c);
  groups_.clear();
  for (device_state& s : devices_) {
    if (s.blas) cuda_detail::blas_destroy(s.blas);
    if (s.ready) cuda_detail::event_destroy(s.ready);
    if (s.done) cuda_detail::event_destroy(s.done);
    if (s.pool) cuda_detail::pool_destroy(s.pool);
    if (s.stream) cuda_detail::stream_destroy(s.stream);
    s = device_state{};
  }
}

inline const cuda_devices::device_state& cuda_devices::at(device_id d) const {
  if (d >= devices_.size())
    throw device_mesh_error("typeshard: device " + std::to_string(d) +
                            " does not exist: " + devices_summary());
  return devices_[d];
}

inline cuda_devices::device_state& cuda_devices::here() {
  return devices_[run_->devices[detail::cuda_current_body.index]];
}

inline void* cuda_devices::allocate(device_id d, std::size_t bytes) {
  const device_state& s = at(d);
  cuda_detail::set_gpu(s.gpu);
  return cuda_detail::alloc_async(bytes, s.pool, s.stream);
}
inline void cuda_devices::deallocate(device_id d, void* ptr) noexcept {
  if (d < devices_.size()) cuda_detail::free_async(ptr, devices_[d].stream);
}
inline void cuda_devices::to_device(device_id d, void* dst, const void* src, std::size_t bytes) {
  const device_state& s = at(d);
  cuda_detail::set_gpu(s.gpu);
  cuda_detail::copy_async(dst, src, bytes, s.stream);
  cuda_detail::stream_sync(s.stream);
}
inline void cuda_devices::to_host(device_id d, void* dst, const void* src, std::size_t bytes) {
  to_device(d, dst, src, bytes);  // the same stream-ordered copy, waited for
}
inline void cuda_devices::synchronize(device_id d) {
  const device_state& s = at(d);
  cuda_detail::set_gpu(s.gpu);
  cuda_detail::stream_sync(s.stream);
}

inline void cuda_devices::gemm(device_id d, const float* a, const float* b, float* c,
                               std::size_t m, std::size_t n, std::size_t k, bool accumulate,
                               std::size_t batch) {
  const device_state& s = at(d);
  cuda_detail::set_gpu(s.gpu);
  cuda_detail::sgemm(s.blas, false, false, m, n, k, 1.0f, a, k, b, n, accumulate ? 1.0f : 0.0f,
                     c, n, batch, m * k, k * n, m * n);
}

inline backend::body_position cuda_devices::current_body() const {
  const detail::cuda_body_context& c = detail::cuda_current_body;
  if (c.owner != this) return {};
  return {true, c.run_size, c.index};
}

inline std::string cuda_devices::devices_summary() const {
  return "this cuda_devices has " + std::to_string(devices_.size()) + " devices (0 to " +
         std::to_string(devices_.size() - 1) + ") on " + std::to_string(gpus_) + " GPU(s)";
}

inline void cuda_devices::do_run(std::span<const device_id> devices,
                                 detail::function_ref<void(std::size_t)> body) {
  const std::lock_guard<std::mutex> one_run(run_mutex_);
  run_state rs{devices};
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    run_ = &rs;
  }
  std::vector<std::exception_ptr> failures(devices.size());
  auto abort_run = [&] {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      rs.aborted = true;
    }
    met_.notify_all();
  };
  auto one = [&](std::size_t i) {
    detail::cuda_current_body = {this, devices.size(), i};
    try {
      cuda_detail::set_gpu(devices_[devices[i]].gpu);
      body(i);
    } catch (...) {
      failures[i] = std::current_exception();
      abort_run();
    }
    detail::cuda_current_body = {};
  };
  const detail::function_ref<void(std::size_t)> each(one);
  {
    std::unique_lock<std::mutex> lock(workers_.mutex);
    std::fill(workers_.position.begin(), workers_.position.end(), no_peer);
    for (std::size_t i = 0; i < devices.size(); ++i) workers_.position[devices[i]] = i;
    workers_.body = &each;
    workers_.remaining = devices.size();
    ++workers_.epoch;
    workers_.wake.notify_all();
    workers_.done.wait(lock, [&] { return workers_.remaining == 0; });
    workers_.body = nullptr;
  }
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    run_ = nullptr;
    if (rs.aborted)  // members released mid-collective: the groups start afresh
      for (auto& [members, grp] : groups_) grp.arrived = 0;
  }
  // The first device that failed on its own, before one released from a collective.
  std::size_t chosen = failures.size();
  for (std::size_t i = 0; i < failures.size(); ++i) {
    if (!failures[i]) continue;
    if (chosen == failures.size()) chosen = i;
    try {
      std::rethrow_exception(failures[i]);
    } catch (const collective_aborted&) {
      continue;
    } catch (...) {
      chosen = i;
      break;
    }
  }
  if (chosen == failures.size()) return;
  const std::string where = "typeshard: the function running on device " +
                            std::to_string(devices[chosen]) + " threw: ";
  try {
    std::rethrow_exception(failures[chosen]);
  } catch (const std::exception& e) {
    throw device_error(devices[chosen], where + e.what(), failures[chosen]);
  } catch (...) {
    throw device_error(devices[chosen], where + "an exception not derived from std::exception",
                       failures[chosen]);
  }
}

// ---- the group rendezvous ------------------------------------------------------------------

inline cuda_devices::group_state& cuda_devices::group_of(const collective_group& g) {
  std::vector<std::size_t> key(g.size());
  for (std::size_t j = 0; j < g.size(); ++j) key[j] = run_->devices[g.members[j]];
  group_state& grp = groups_[std::move(key)];
  if (grp.calls.size() != g.size()) grp.calls.resize(g.size());
  return grp;
}

inline void cuda_devices::barrier(const collective_group& g, group_state& grp,
                                  std::unique_lock<std::mutex>& lock) {
  const std::uint64_t generation = grp.generation;
  if (++grp.arrived == g.size()) {
    grp.arrived = 0;
    ++grp.generation;
    met_.notify_all();
    return;
  }
  met_.wait(lock, [&] { return grp.generation != generation || run_->aborted; });
  if (grp.generation == generation) throw collective_aborted();
}

inline std::span<const cuda_devices::call> cuda_devices::meet(const collective_group& g,
                                                              const call& mine) {
  device_state& me = here();
  cuda_detail::event_record(me.ready, me.stream);
  std::unique_lock<std::mutex> lock(mutex_);
  group_state& grp = group_of(g);
  grp.calls[g.rank] = mine;
  grp.calls[g.rank].device = run_->devices[g.members[g.rank]];
  barrier(g, grp, lock);
  for (const call& c : grp.calls)
    if (c.signature != mine.signature) throw_signature_mismatch();
  return grp.calls;
}

inline void cuda_devices::finish(const collective_group& g, std::span<const call> calls) {
  device_state& me = here();
  std::vector<device_id> peers(calls.size());
  for (std::size_t j = 0; j < calls.size(); ++j) peers[j] = calls[j].device;
  cuda_detail::event_record(me.done, me.stream);
  {
    std::unique_lock<std::mutex> lock(mutex_);
    barrier(g, group_of(g), lock);
  }
  for (std::size_t j = 0; j < peers.size(); ++j)
    if (j != g.rank) cuda_detail::stream_wait(me.stream, devices_[peers[j]].done);
}

inline cuda_devices::view cuda_devices::readable(const call& peer, const void* ptr,
                                                 std::size_t ld, std::size_t rows,
                                                 std::size_t cols, std::size_t size) {
  device_state& me = here();
  if (devices_[peer.device].gpu == me.gpu) return {ptr, ld, nullptr};
  void* staged = cuda_detail::alloc_async(rows * cols * size, me.pool, me.stream);
  cuda_detail::copy2d_async(staged, cols * size, ptr, ld * size, cols * size, rows, me.stream);
  return {staged, cols, staged};
}

inline bool cuda_devices::nccl_group(const collective_group& g, element_type) const {
  return use_nccl_ && g.size() > 0;
}

inline void cuda_devices::exchange(const collective_group& g, std::span<const void* const> send,
                                   std::span<const std::size_t> send_bytes,
                                   std::span<void* const> recv,
                                   std::span<const std::size_t> recv_bytes) {
  device_state& me = here();
  cuda_detail::comm c = nullptr;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    group_state& grp = group_of(g);
    if (grp.comms.empty()) {  // the first member here makes every member's communicator
      std::vector<int> gpus(g.size());
      for (std::size_t j = 0; j < g.size(); ++j)
        gpus[j] = devices_[run_->devices[g.members[j]]].gpu;
      grp.comms.resize(g.size());
      cuda_detail::nccl_comms(gpus, grp.comms);
      cuda_detail::set_gpu(me.gpu);  // in case NCCL's set-up left another GPU current
    }
    c = grp.comms[g.rank];
  }
  cuda_detail::nccl_exchange(c, me.stream, g.rank, send, send_bytes, recv, recv_bytes);
}

}  // namespace typeshard
