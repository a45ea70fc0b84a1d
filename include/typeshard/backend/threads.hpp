// typeshard/backend/threads.hpp: the default backend, N simulated CPU devices on a pool of
// persistent std::threads (like XLA's --xla_force_host_platform_device_count=N).
//
//   ts::cpu_devices devices{8};   // 8 devices, any number of cores
//
// Each device is one thread that lives as long as the cpu_devices object, so a shard's
// memory is first touched, and then always computed on, by the same thread. N may exceed
// the number of cores: devices wait on condition variables, never spin.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "../detail/barrier.hpp"
#include "../detail/function_ref.hpp"
#include "../errors.hpp"
#include "backend.hpp"

namespace typeshard {

namespace detail {

// The shared state of one multi-device operation on the thread pool: the participants'
// barrier and one pointer slot each, through which collectives exchange buffers in place.
struct thread_run {
  explicit thread_run(std::span<const device_id> devs)
      : devices(devs), barrier(devs.size()), slots(devs.size(), nullptr) {}

  std::span<const device_id> devices;
  abortable_barrier barrier;
  std::vector<const void*> slots;
};

// What the calling thread is doing: set while a device thread runs a body.
struct thread_device_context {
  thread_run* run = nullptr;
  std::size_t index = 0;  // position of this device in run->devices
};

inline thread_device_context& current_thread_device() {
  thread_local thread_device_context context;
  return context;
}

}  // namespace detail

class cpu_devices final : public backend {
 public:
  explicit cpu_devices(std::size_t count) {
    if (count == 0)
      throw usage_error(
          "typeshard: cpu_devices needs at least one device; pass the number of simulated "
          "devices, for example ts::cpu_devices devices{8}");
    workers_.reserve(count);
    for (std::size_t i = 0; i < count; ++i) workers_.push_back(std::make_unique<worker>());
    for (std::size_t i = 0; i < count; ++i)
      workers_[i]->thread = std::thread([this, i] { work(*workers_[i]); });
  }

  cpu_devices(const cpu_devices&) = delete;
  cpu_devices& operator=(const cpu_devices&) = delete;

  // Waits for a running operation to finish, then stops and joins the device threads.
  ~cpu_devices() override {
    std::lock_guard operation(run_mutex_);
    for (auto& w : workers_) {
      {
        std::lock_guard lock(w->mutex);
        w->stop = true;
      }
      w->wake.notify_one();
    }
    for (auto& w : workers_) w->thread.join();
  }

  std::size_t device_count() const override { return workers_.size(); }
  bool is_addressable(device_id d) const override { return d < workers_.size(); }
  std::string_view platform() const override { return "cpu"; }

  void run(std::span<const device_id> devices,
           detail::function_ref<void(std::size_t)> body) override {
    if (detail::current_thread_device().run != nullptr)
      throw usage_error(
          "typeshard: a multi-device operation was started from inside a per-device "
          "function; per-device code may only use local blocks and collectives: move the "
          "operation out of the function");
    check_devices(devices);
    std::lock_guard operation(run_mutex_);  // one multi-device operation at a time

    detail::thread_run state(devices);
    std::vector<std::exception_ptr> failures(devices.size());
    std::size_t remaining = devices.size();
    std::mutex done_mutex;
    std::condition_variable done;

    for (std::size_t i = 0; i < devices.size(); ++i) {
      worker& w = *workers_[devices[i]];
      {
        std::lock_guard lock(w.mutex);
        w.task = [&, i] {
          detail::current_thread_device() = {&state, i};
          try {
            body(i);
          } catch (...) {
            failures[i] = std::current_exception();
            state.barrier.abort();  // release the peers waiting for this device
          }
          detail::current_thread_device() = {};
          std::lock_guard lock(done_mutex);
          if (--remaining == 0) done.notify_one();
        };
      }
      w.wake.notify_one();
    }
    {
      std::unique_lock lock(done_mutex);
      done.wait(lock, [&] { return remaining == 0; });
    }
    rethrow_first_failure(devices, failures);
  }

 private:
  struct worker {
    std::thread thread;
    std::mutex mutex;
    std::condition_variable wake;
    std::function<void()> task;
    bool stop = false;
  };

  void work(worker& w) {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(w.mutex);
        w.wake.wait(lock, [&] { return w.stop || w.task; });
        if (w.stop) return;
        task = std::move(w.task);
        w.task = nullptr;
      }
      task();  // never throws: the task catches everything the body throws
    }
  }

  void check_devices(std::span<const device_id> devices) const {
    std::vector<bool> seen(workers_.size(), false);
    for (device_id d : devices) {
      if (d >= workers_.size())
        throw device_mesh_error("typeshard: device " + std::to_string(d) +
                                " does not exist: this cpu_devices has " +
                                std::to_string(workers_.size()) +
                                " devices (0 to " + std::to_string(workers_.size() - 1) + ")");
      if (seen[d])
        throw device_mesh_error("typeshard: device " + std::to_string(d) +
                                " appears twice in one operation; list each device once");
      seen[d] = true;
    }
  }

  // A device that failed on its own is reported before one that was only released from
  // a collective because of it.
  static void rethrow_first_failure(std::span<const device_id> devices,
                                    const std::vector<std::exception_ptr>& failures) {
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
    // Thrown from inside the handler, so device_error's nested_exception holds the original.
    const std::string where =
        "typeshard: the function running on device " + std::to_string(devices[chosen]) + " threw: ";
    try {
      std::rethrow_exception(failures[chosen]);
    } catch (const std::exception& e) {
      throw device_error(devices[chosen], where + e.what(), failures[chosen]);
    } catch (...) {
      throw device_error(devices[chosen], where + "an exception not derived from std::exception",
                         failures[chosen]);
    }
  }

  std::vector<std::unique_ptr<worker>> workers_;
  std::mutex run_mutex_;
};

}  // namespace typeshard
