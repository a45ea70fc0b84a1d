// typeshard/backend/impl/threads_programs.ipp: the thread pool's SPMD programs (see
// threads.hpp, run_program): each device's program on a fiber, the fibers on one worker per
// kernel slot (detail/fibers.hpp), or on a thread per device. Included at the end of
// threads.ipp (it uses the pool's jobs and device context defined there), header-only or
// compiled once into typeshard::runtime.
#pragma once

#include <algorithm>
#include <chrono>

#include "../../core/errors.hpp"
#include "../detail/fibers.hpp"
#include "../detail/thread_run.hpp"
#include "../threads.hpp"

namespace typeshard {

namespace detail {

// A worker of a program on fibers, on the calling thread: runs its `live` fibers until all
// are done, each with its device's context and call site installed, blocking only when none
// is runnable.
TYPESHARD_DEFERRED
inline void run_fiber_worker(fiber_worker& w, std::size_t live) noexcept {
  thread_device_context*& installed = current_fiber_device();
  const source_site*& site = current_call_site();
  const source_site* const own_site = site;
  while (live != 0) {
    wait_briefly([&] { return w.runnable(); });
    fiber& f = w.take();
    fiber_device& d = *static_cast<fiber_device*>(f.data);
    installed = &d.context;
    site = d.site;
    f.resume(w.scheduler);
    d.site = site;
    installed = nullptr;
    site = own_site;
    if (f.done()) --live;
  }
}

}  // namespace detail

template <class Unused>
void basic_cpu_devices<Unused>::run_fibers(detail::thread_job& programs, std::size_t workers) {
  // Everything that may throw (the stacks, the workers' job) comes before any fiber runs.
  if (!fibers_) {
    auto made = std::make_unique<detail::fiber_device[]>(device_count_);
    for (std::size_t d = 0; d < device_count_; ++d) {
      made[d].runner = std::make_unique<detail::fiber>(fiber_stack_bytes_);
      made[d].runner->data = &made[d];
    }
    auto pool = std::make_unique<detail::fiber_worker[]>(device_count_);
    for (std::size_t w = 0; w < device_count_; ++w) pool[w].reserve(device_count_);
    fibers_ = std::move(made);
    fiber_workers_ = std::move(pool);
  }
  // Worker w runs a contiguous block of devices: a mesh's last axis (a Megatron "model"
  // group) stays on one worker where it fits, and its collectives wake no other thread.
  const auto worker_of = [&](std::size_t d) { return d * workers / device_count_; };
  const auto live = [&](std::size_t w) {
    std::size_t n = 0;
    for (std::size_t d = 0; d < device_count_; ++d) n += worker_of(d) == w;
    return n;
  };
  const auto others = [&](std::size_t i) {
    detail::run_fiber_worker(fiber_workers_[i + 1], live(i + 1));
  };
  const std::span<const device_id> helpers = std::span(all_devices_).subspan(1, workers - 1);
  detail::thread_job threads(helpers, others);
  for (std::size_t d = 0; d < device_count_; ++d) {
    detail::fiber_device& f = fibers_[d];
    f.job = &programs;
    f.index = d;
    // The fiber runs the device's part of the program, as a device thread does (run_job).
    f.runner->prepare(
        +[](detail::fiber& self) noexcept {
          const auto& mine = *static_cast<const detail::fiber_device*>(self.data);
          detail::run_job(*mine.job, mine.index);
        },
        fiber_workers_[worker_of(d)]);
    fiber_workers_[worker_of(d)].wake(*f.runner);
  }
  start(threads, helpers);
  detail::run_fiber_worker(fiber_workers_[0], live(0));
  join(threads);
}

template <class Unused>
void basic_cpu_devices<Unused>::set_program_execution(program_execution how) {
  std::lock_guard operation(run_mutex_);
  execution_ = how;
  small_program_ = false;
}

template <class Unused>
void basic_cpu_devices<Unused>::set_fiber_stack_bytes(std::size_t bytes) {
  if (bytes == 0)
    throw usage_error("typeshard: a fiber's stack needs at least one byte (a page is mapped)");
  std::lock_guard operation(run_mutex_);
  fiber_stack_bytes_ = bytes;
  fibers_.reset();  // remapped by the next program
  fiber_workers_.reset();
}

template <class Unused>
bool basic_cpu_devices<Unused>::run_program(detail::function_ref<void(std::size_t)> program,
                                            detail::program_listener* listener) {
  detail::thread_device_context& caller = detail::current_thread_device();
  if (caller.program == this) return false;  // already one device's program
  if (current_body().inside)
    throw usage_error(
        "typeshard: an SPMD program (ts::jit) was started from inside a per-device function; "
        "call the compiled function outside ts::shard_map and run() bodies");
  std::lock_guard operation(run_mutex_);
  const auto each = [&](std::size_t d) {
    detail::thread_device_context& here = detail::current_thread_device();
    here.program = this;
    here.listener = listener;
    struct leave {
      detail::thread_device_context& c;
      ~leave() {
        c.program = nullptr;
        c.listener = nullptr;
        c.inner = false;
      }
    } left{here};
    program(d);
  };
  if (execution_ == program_execution::device_threads) {
    start_and_join(all_devices_, each, true);
    return true;
  }
  // A small program runs on the calling thread alone: waking a worker and meeting it in
  // each collective would cost more than the work it takes over (see fiber_small_program).
  const std::size_t most = std::min(kernel_slots_, device_count_);
  const std::size_t workers = small_program_ ? 1 : most;
  detail::thread_job programs(all_devices_, each);
  const auto start = std::chrono::steady_clock::now();
  run_fibers(programs, workers);
  const auto took = std::chrono::steady_clock::now() - start;
  if (most > 1)
    small_program_ = workers == 1 ? took < 4 * detail::fiber_small_program
                                  : took < detail::fiber_small_program;
  detail::rethrow_first_program_failure({programs.failures.get(), device_count_});
  return true;
}

}  // namespace typeshard
