// typeshard/backend/impl/threads.ipp: the thread pool's implementation (see threads.hpp).
// Included by threads.hpp (header-only) or compiled once into typeshard::runtime.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <utility>
#if defined(__linux__)
#include <sched.h>
#endif

#include "../../core/errors.hpp"
#include "../detail/reduce_kernels.hpp"
#include "../detail/thread_run.hpp"
#include "../threads.hpp"
#include "backend.ipp"  // detail::sum_of
#include "threads_collectives.ipp"  // the collectives of the pool
#include "threads_failures.ipp"     // how a failed device is reported

namespace typeshard {

namespace detail {

TYPESHARD_DEFERRED_DEFINITION
TYPESHARD_RUNTIME_DEF thread_device_context*& current_fiber_device() {
  thread_local thread_device_context* installed = nullptr;
  return installed;
}

TYPESHARD_DEFERRED_DEFINITION
TYPESHARD_RUNTIME_DEF thread_device_context& current_thread_device() {
  thread_local thread_device_context context;
  thread_device_context* const fiber = current_fiber_device();
  return fiber != nullptr ? *fiber : context;
}

// One device of SPMD programs on fibers: its fiber, the context and call site its worker
// installs while it runs, and its part of the current program.
struct fiber_device {
  std::unique_ptr<fiber> runner;
  thread_device_context context;
  const source_site* site = nullptr;
  thread_job* job = nullptr;
  std::size_t index = 0;
};

// The cores this process may run on (its CPU affinity mask on Linux, so that `taskset -c 0`
// or a container's CPU set counts), at least 1.
TYPESHARD_DEFERRED
TYPESHARD_COLD inline std::size_t cores_available() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<std::size_t>(n);
  }
#endif
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? n : 1;
}

}  // namespace detail

template <class Unused>
basic_cpu_devices<Unused>::basic_cpu_devices(std::size_t count)
    : basic_cpu_devices(count, detail::cores_available()) {}

template <class Unused>
TYPESHARD_COLD
basic_cpu_devices<Unused>::basic_cpu_devices(std::size_t count,
                                             std::size_t concurrent_kernels)
    : fiber_stack_bytes_(detail::default_fiber_stack_bytes), kernel_slots_(concurrent_kernels) {
  if (const char* how = std::getenv("TYPESHARD_PROGRAM_EXECUTION"); how != nullptr) {
    if (std::strcmp(how, "threads") == 0)
      execution_ = program_execution::device_threads;
    else if (std::strcmp(how, "fibers") != 0)
      throw usage_error(detail::message(
          {"typeshard: TYPESHARD_PROGRAM_EXECUTION is \"", how,
           "\"; set it to \"fibers\" (the default) or \"threads\" (a thread per device)"}));
  }
  if (concurrent_kernels == 0)
    throw usage_error(
        "typeshard: cpu_devices needs at least one concurrent kernel; pass the number of "
        "per-shard kernels that may run at once (the cores to use), or omit it for all the "
        "cores this process may run on");
  if (count == 0)
    throw usage_error(
        "typeshard: cpu_devices needs at least one device; pass the number of simulated "
        "devices, for example ts::cpu_devices devices{8}");
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) kernel_cores_.push_back({c, false});
  if (kernel_cores_.size() < 2 || kernel_slots_ > kernel_cores_.size()) kernel_cores_.clear();
#endif
  workers_ = std::make_unique<worker[]>(count);
  std::size_t started = 0;
  try {
    for (; started < count; ++started) {
      if (detail::thread_start_hook != nullptr) detail::thread_start_hook(started);
      const std::size_t i = started;
      workers_[i].thread = std::thread([this, i] { work(workers_[i]); });
    }
  } catch (const std::exception& e) {
    // Joinable threads must not be destroyed (std::terminate): stop the ones running first.
    stop_workers(started);
    throw error(detail::message(
        {"typeshard: cpu_devices could not start the thread of device ", started, " of ", count,
         " (", e.what(), "): the process is at a limit on threads, processes or address space "
         "(ulimit -u, ulimit -v, a container's pids limit); ask for fewer devices"}));
  }
  all_devices_.resize(count);
  for (std::size_t d = 0; d < count; ++d) all_devices_[d] = d;
  device_count_ = count;
}

template <class Unused>
TYPESHARD_COLD void basic_cpu_devices<Unused>::stop_workers(std::size_t started) noexcept {
  for (std::size_t i = 0; i < started; ++i) {
    worker& w = workers_[i];
    {
      std::lock_guard lock(w.mutex);
      w.stop = true;
      w.signaled.store(true, std::memory_order_release);
    }
    w.wake.notify_one();
  }
  for (std::size_t i = 0; i < started; ++i) workers_[i].thread.join();
}

template <class Unused>
TYPESHARD_COLD
basic_cpu_devices<Unused>::~basic_cpu_devices() {
  std::lock_guard operation(run_mutex_);
  stop_workers(device_count_);
}

template <class Unused>
backend::body_position basic_cpu_devices<Unused>::current_body() const {
  const detail::thread_device_context& here = detail::current_thread_device();
  if (here.run == nullptr) return {};
  if (here.program == this)  // an SPMD program: inside the operation it runs inline, if any
    return here.inner ? body_position{true, here.inner_devices.size(), here.inner_index}
                      : body_position{};
  return {true, here.run->devices.size(), here.index};
}

template <class Unused>
TYPESHARD_COLD
std::string basic_cpu_devices<Unused>::devices_summary() const {
  return detail::message({"this cpu_devices has ", device_count_, " devices (0 to ",
                          device_count_ - 1, ")"});
}

namespace detail {

// What the devices of one do_run share: the body, the run's rendezvous, each device's
// failure, and how many devices are still running.
struct thread_job {
  TYPESHARD_DEFERRED thread_job(std::span<const device_id> devices,
                                 function_ref<void(std::size_t)> b)
      : state(devices),
        body(b),
        failures(std::make_unique<std::exception_ptr[]>(devices.size())),
        remaining(devices.size()) {}

  thread_run state;
  function_ref<void(std::size_t)> body;
  const source_site* site = current_call_site();  // the caller's, for the reports
  std::unique_ptr<std::exception_ptr[]> failures;  // by position in the run
  std::atomic<std::size_t> remaining;  // changed under done_mutex; do_run also polls it
  std::mutex done_mutex;
  std::condition_variable done;
};

// Device `index` of job's run, on its thread. Never throws: a failure of the body is kept
// for do_run to report, and releases the peers waiting for this device in a collective.
TYPESHARD_DEFERRED
inline void run_job(thread_job& job, std::size_t index) noexcept {
  thread_device_context& here = current_thread_device();
  here.run = &job.state;
  here.index = index;
  current_call_site() = job.site;
  try {
    job.body(index);
  } catch (...) {
    job.failures[index] = std::current_exception();
    job.state.abort();
  }
  job.state.finished();
  here.run = nullptr;
  here.index = 0;
  current_call_site() = nullptr;
  std::lock_guard lock(job.done_mutex);
  if (--job.remaining == 0) job.done.notify_one();
}

}  // namespace detail

template <class Unused>
void basic_cpu_devices<Unused>::do_run(std::span<const device_id> devices,
                                       detail::function_ref<void(std::size_t)> body) {
  detail::thread_device_context& here = detail::current_thread_device();
  if (here.program == this) {  // one device of an SPMD program: its part, here and now
    std::size_t mine = devices.size();
    for (std::size_t i = 0; i < devices.size(); ++i)
      if (devices[i] == here.index) mine = i;
    if (mine == devices.size()) return;  // this device takes no part
    here.inner_devices = devices;
    here.inner_index = mine;
    here.inner = true;
    std::chrono::steady_clock::time_point start;
    if (here.listener != nullptr) start = std::chrono::steady_clock::now();
    std::exception_ptr failed;
    try {
      body(mine);
    } catch (const collective_aborted&) {
      here.inner = false;  // another device failed: its failure is the program's
      throw;
    } catch (...) {
      failed = std::current_exception();
    }
    here.inner = false;
    if (failed)  // as a run reports it: a device_error naming the device
      detail::rethrow_first_failure(devices.subspan(mine, 1), {&failed, 1});
    if (here.listener != nullptr)
      here.listener->local_step(
          here.index,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return;
  }
  std::lock_guard operation(run_mutex_);  // one multi-device operation at a time
  start_and_join(devices, body, false);
}

template <class Unused>
void basic_cpu_devices<Unused>::start_and_join(std::span<const device_id> devices,
                                               detail::function_ref<void(std::size_t)> body,
                                               bool as_thrown) {
  // Everything that may allocate (and so throw) is made before any device starts: once one
  // runs, this must not return before all have finished, for they use the job.
  detail::thread_job job(devices, body);
  start(job, devices);
  join(job);
  if (as_thrown)
    detail::rethrow_first_program_failure({job.failures.get(), devices.size()});
  else
    detail::rethrow_first_failure(devices, {job.failures.get(), devices.size()});
}

template <class Unused>
void basic_cpu_devices<Unused>::start(detail::thread_job& job,
                                      std::span<const device_id> devices) {
  for (std::size_t i = 0; i < devices.size(); ++i) {
    worker& w = workers_[devices[i]];
    {
      std::lock_guard lock(w.mutex);
      w.job = &job;
      w.index = i;
      w.signaled.store(true, std::memory_order_release);
    }
    w.wake.notify_one();
  }
}

template <class Unused>
void basic_cpu_devices<Unused>::join(detail::thread_job& job) {
  // Taking done_mutex after the poll too: the last device touches the job until it
  // releases the mutex, so the job may not go before that.
  detail::wait_briefly([&] { return job.remaining.load(std::memory_order_acquire) == 0; });
  std::unique_lock lock(job.done_mutex);
  job.done.wait(lock, [&] { return job.remaining == 0; });
}

namespace detail {
// The index into kernel_cores_ of the core the calling thread's kernel is pinned to, if any
// (a device thread holds at most one slot at a time).
TYPESHARD_DEFERRED
inline std::size_t& pinned_kernel_core() {
  thread_local std::size_t core = static_cast<std::size_t>(-1);
  return core;
}
}  // namespace detail

// A long kernel holding a slot is pinned to a core no other kernel holds (the one it is on,
// if free), and unpinned when it gives the slot back. Unpinned, the scheduler sometimes ran
// two GEMMs time-sliced on one core while the other idled (a woken thread queued behind a
// running one, a cache-hot task the balancer will not move for some milliseconds). A short
// kernel ends before that matters, and the two moves would cost more than it (threads.hpp).
template <class Unused>
void basic_cpu_devices<Unused>::do_acquire_kernel_slot(std::size_t multiply_adds) {
  if (kernel_slots_ >= device_count_) return;
  std::unique_lock lock(kernel_mutex_);
  kernel_slot_free_.wait(lock, [&] { return kernels_running_ < kernel_slots_; });
  ++kernels_running_;
#if defined(__linux__)
  if (kernel_cores_.empty() || multiply_adds < pinned_kernel_multiply_adds) return;
  const int here = sched_getcpu();
  std::size_t pick = kernel_cores_.size();
  for (std::size_t i = 0; i < kernel_cores_.size(); ++i) {
    if (kernel_cores_[i].taken) continue;
    if (pick == kernel_cores_.size() || kernel_cores_[i].cpu == here) pick = i;
    if (kernel_cores_[i].cpu == here) break;
  }
  if (pick == kernel_cores_.size()) return;  // not reached: slots <= cores
  kernel_cores_[pick].taken = true;
  detail::pinned_kernel_core() = pick;
  lock.unlock();
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(kernel_cores_[pick].cpu, &one);
  (void)sched_setaffinity(0, sizeof one, &one);  // on failure the kernel runs unpinned
#endif
}

template <class Unused>
void basic_cpu_devices<Unused>::do_release_kernel_slot() noexcept {
  if (kernel_slots_ >= device_count_) return;
#if defined(__linux__)
  std::size_t& pinned = detail::pinned_kernel_core();
  if (pinned != static_cast<std::size_t>(-1)) {
    cpu_set_t all;  // the mask the pool was made with
    CPU_ZERO(&all);
    for (const kernel_core& c : kernel_cores_) CPU_SET(c.cpu, &all);
    (void)sched_setaffinity(0, sizeof all, &all);
  }
#endif
  {
    std::lock_guard lock(kernel_mutex_);
    --kernels_running_;
#if defined(__linux__)
    if (pinned != static_cast<std::size_t>(-1)) kernel_cores_[pinned].taken = false;
    pinned = static_cast<std::size_t>(-1);
#endif
  }
  kernel_slot_free_.notify_one();
}

template <class Unused>
void basic_cpu_devices<Unused>::work(worker& w) {
  for (;;) {
    detail::thread_job* job = nullptr;
    std::size_t index = 0;
    {
      detail::wait_briefly([&] { return w.signaled.load(std::memory_order_acquire); });
      std::unique_lock lock(w.mutex);
      w.wake.wait(lock, [&] { return w.stop || w.job != nullptr; });
      if (w.stop) return;
      job = std::exchange(w.job, nullptr);
      w.signaled.store(false, std::memory_order_relaxed);
      index = w.index;
    }
    detail::run_job(*job, index);  // never throws
  }
}

template <class Unused>
void basic_cpu_devices<Unused>::collective(
    const collective_group& g, std::uint64_t signature, const void* send, void* recv,
    send_info info, detail::function_ref<void(std::span<const detail::thread_call>)> work) {
  // backend::check_group has checked that the caller is a member running in this run.
  detail::thread_device_context& here = detail::current_thread_device();
  detail::thread_run& run = *here.run;
  std::span<const std::size_t> members = g.members;
  if (here.program == this) {  // an SPMD program: the operation's positions as the program's
    here.members.resize(members.size());
    for (std::size_t j = 0; j < members.size(); ++j)
      here.members[j] = here.inner_devices[members[j]];
    members = here.members;
  }
  detail::thread_group& grp = run.group(members);
  grp.calls[g.rank] = {send,      recv, signature, info.peer, info.count,
                       info.kind, &g,   detail::current_call_site()};
  run.arrive_and_wait(grp, true, g.rank);
  // Every member passed the first barrier, so every member reaches the second: it waits
  // even if the run is aborted meanwhile, and a failure in this member's share is raised
  // only after it, when no peer touches this member's buffers any more.
  std::exception_ptr failed;
  try {
    for (std::size_t j = 0; j < g.size(); ++j)
      if (grp.calls[j].signature != signature)
        detail::throw_calls_differ(run.devices, grp);
    work(std::span<const detail::thread_call>(grp.calls.get(), grp.size));
  } catch (...) {
    failed = std::current_exception();
  }
  run.arrive_and_wait(grp, false, g.rank);
  if (failed) std::rethrow_exception(failed);
}

}  // namespace typeshard
#include "threads_programs.ipp"  // SPMD programs on fibers or device threads
