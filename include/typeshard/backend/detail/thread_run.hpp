// typeshard/backend/detail/thread_run.hpp: the shared state of one multi-device operation
// on the thread pool (cpu_devices): the rendezvous of each collective group and the
// accounting that turns a would-be hang into an error. Internal: do not rely on anything in
// detail/. Only the thread pool's implementation (impl/threads.ipp) includes it; its
// functions are TYPESHARD_DEFERRED (core/config.hpp), compiled only by a TU that makes a pool.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../../core/config.hpp"
#include "../../core/errors.hpp"
#include "../backend.hpp"
#include "../collective_observer.hpp"
#include "call_site.hpp"
#include "fibers.hpp"

namespace typeshard::detail {

// Waits up to `thread_handoff_wait` for pred() to hold, giving the core away at each check,
// before the caller blocks on a condition variable (a device waiting for work or for its
// collective's members, the caller waiting for the devices). Waking a thread that sleeps in a
// condition variable took longer than a small operation's work on the machines here; the next
// step usually comes within this window. It yields rather than spins, so with more devices
// than cores it does not take the core from a device that is computing. Measurements:
// docs/reference/backend/threads.md, "Handing work over".
inline constexpr std::chrono::microseconds thread_handoff_wait{200};
template <class Pred>
void wait_briefly(Pred pred) {
  const auto until = std::chrono::steady_clock::now() + thread_handoff_wait;
  while (!pred() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
}

// What one member passed to the current collective of its group.
struct thread_call {
  const void* send = nullptr;
  void* recv = nullptr;
  std::uint64_t signature = 0;  // the arguments every member must agree on, hashed
  std::size_t peer = 0;         // permute: the member this one sends to
  std::size_t count = 0;        // permute: how many elements it sends
  // For the reports: which collective, over which group, called where (the caller's,
  // alive while it is in the collective), and whether it waits in the first barrier now
  // (written under thread_run's mutex).
  collective_kind kind = collective_kind::all_reduce;
  const collective_group* group = nullptr;
  const source_site* site = nullptr;
  bool waiting = false;
};

// "all_reduce over \"x\" (group of devices [0, 2])": a collective and its group, for reports.
TYPESHARD_DEFERRED inline std::string describe_call(const thread_call& c,
                                                     std::span<const device_id> devices,
                                                     std::span<const std::size_t> members) {
  std::string axes;
  if (c.group != nullptr) {
    for (const axis_name& a : c.group->axes) {
      if (!axes.empty()) axes += ',';
      axes.append(a.chars, a.length);
    }
    if (axes.empty() && c.group->purpose != nullptr) axes = c.group->purpose;
  }
  std::string out = std::string(to_string(c.kind)) + " over \"" + axes + "\" (group of devices [";
  for (std::size_t j = 0; j < members.size(); ++j)
    out += (j ? ", " : "") + std::to_string(devices[members[j]]);
  return out + "]) at " + format_call_site(c.site);
}

// The rendezvous of one collective group within a run: its members, how many arrived in
// the current phase, and what each member passed to the current collective.
struct thread_group {
  using call = thread_call;

  TYPESHARD_DEFERRED explicit thread_group(std::span<const std::size_t> m)
      : members(m.begin(), m.end()), size(m.size()), calls(std::make_unique<call[]>(m.size())) {}

  std::vector<std::size_t> members;
  std::size_t size;
  std::size_t arrived = 0;
  std::atomic<std::size_t> phase{0};  // changed under thread_run's mutex; waiters also poll it
  std::condition_variable released;
  fiber* parked = nullptr;  // members parked here (fibers), linked by next_parked; under mutex
  std::unique_ptr<call[]> calls;  // by rank in the group
  std::unique_ptr<thread_group> next;  // the run's next group (thread_run's list)
};

// The shared state of one multi-device operation on the thread pool: the devices taking
// part, one rendezvous per collective group (made the first time the group meets), and
// the accounting that turns a would-be hang into an error.
//
// Every barrier of every group goes through one mutex, which keeps an exact count of the
// devices blocked in a barrier and of those whose function returned. When a device is
// about to block and every other device is blocked or finished, nobody can release it:
// the devices called collectives over different groups in different orders, or one
// skipped a collective the others wait in. The run is then aborted with a usage_error
// instead of hanging (an MPI job would hang). abort() releases every member waiting in an
// abortable barrier, now or later.
class thread_run {
 public:
  explicit thread_run(std::span<const device_id> devs) : devices(devs) {}

  std::span<const device_id> devices;

  // The rendezvous of the group with these members, made the first time it meets. A run
  // meets few groups (one per mesh axis and coordinate at most), so a linked list searched
  // in order costs less, to run and to compile, than an ordered map or a vector of them.
  TYPESHARD_DEFERRED thread_group& group(std::span<const std::size_t> members) {
    std::lock_guard lock(mutex_);
    for (thread_group* g = groups_.get(); g != nullptr; g = g->next.get())
      if (std::equal(g->members.begin(), g->members.end(), members.begin(), members.end()))
        return *g;
    auto made = std::make_unique<thread_group>(members);
    made->next = std::move(groups_);
    groups_ = std::move(made);
    return *groups_;
  }

  // Blocks until every member of g arrived at this phase. An abortable wait throws
  // collective_aborted when the run is aborted first (usage_error when the abort was a
  // detected deadlock); the other kind waits for its members whatever happens, for a
  // phase every member is certain to reach.
  // `rank` is the caller's rank in g; an abortable wait marks its call as waiting, for the
  // deadlock report.
  TYPESHARD_DEFERRED void arrive_and_wait(thread_group& g, bool abortable, std::size_t rank) {
    std::unique_lock lock(mutex_);
    if (abortable && aborted_) throw_aborted();
    const std::size_t phase = g.phase;
    if (++g.arrived == g.size) {
      g.arrived = 0;
      ++g.phase;
      blocked_ -= g.size - 1;  // its waiters are runnable again from this moment
      for (std::size_t j = 0; j < g.size; ++j) g.calls[j].waiting = false;
      g.released.notify_all();
      wake_parked_locked(g);
      return;
    }
    g.calls[rank].waiting = abortable;
    ++blocked_;
    check_deadlock_locked();
    if (fiber* self = fiber::current()) {
      // A device of an SPMD program on fibers: it parks, and its worker runs another of its
      // fibers (or sleeps); whoever releases the group (or aborts the run) makes it
      // runnable. Woken by an abort it does not heed, it parks again.
      while (g.phase.load(std::memory_order_relaxed) == phase && !(abortable && aborted_)) {
        self->next_parked = g.parked;
        g.parked = self;
        lock.unlock();
        self->park();
        lock.lock();
      }
      if (g.phase == phase) {
        --blocked_;
        throw_aborted();
      }
      return;
    }
    // The last member usually arrives within the brief wait (wait_briefly); counted as
    // blocked meanwhile, as the release and the deadlock check expect.
    lock.unlock();
    wait_briefly([&] {
      return g.phase.load(std::memory_order_acquire) != phase ||
             (abortable && aborted_.load(std::memory_order_acquire));
    });
    lock.lock();
    g.released.wait(lock, [&] { return g.phase != phase || (abortable && aborted_); });
    if (g.phase == phase) {
      --blocked_;
      throw_aborted();
    }
  }

  // A device's function returned or threw: it will not arrive anywhere any more.
  TYPESHARD_DEFERRED void finished() {
    std::lock_guard lock(mutex_);
    ++finished_;
    check_deadlock_locked();
  }

  TYPESHARD_DEFERRED void abort() {
    std::lock_guard lock(mutex_);
    abort_locked();
  }

 private:
  // Nobody left to release the blocked devices. (After an abort for another reason the
  // waiters are on their way out already.)
  TYPESHARD_DEFERRED void check_deadlock_locked() {
    if (!aborted_ && blocked_ != 0 && blocked_ + finished_ == devices.size()) {
      deadlocked_ = true;
      try {
        report_ = waits_locked();
      } catch (...) {  // out of memory: the report without the list
      }
      abort_locked();
    }
  }

  // "; device 0 waits in all_reduce over \"x\" (group of devices [0, 1]) at f.cpp:12; ..."
  TYPESHARD_DEFERRED std::string waits_locked() const {
    std::string out;
    for (std::size_t d = 0; d < devices.size(); ++d)
      for (const thread_group* g = groups_.get(); g != nullptr; g = g->next.get())
        for (std::size_t j = 0; j < g->size; ++j)
          if (g->members[j] == d && g->calls[j].waiting)
            out += "; device " + std::to_string(devices[d]) + " waits in " +
                   describe_call(g->calls[j], devices, g->members);
    if (finished_ != 0)
      out += "; " + std::to_string(finished_) + " device" + (finished_ == 1 ? "" : "s") +
             " returned from the function (and call no collective any more)";
    return out;
  }

  TYPESHARD_DEFERRED void abort_locked() {
    aborted_ = true;
    for (thread_group* g = groups_.get(); g != nullptr; g = g->next.get()) {
      g->released.notify_all();
      wake_parked_locked(*g);
    }
  }

  // Makes the fibers parked in g runnable (each re-checks why it waits).
  static void wake_parked_locked(thread_group& g) {
    for (fiber* f = std::exchange(g.parked, nullptr); f != nullptr;) {
      fiber* next = f->next_parked;
      f->home().wake(*f);
      f = next;
    }
  }

  TYPESHARD_DEFERRED [[noreturn]] void throw_aborted() const {
    if (deadlocked_)
      throw usage_error(
          "typeshard: deadlock: every device still running waits in a collective that cannot "
          "complete (the devices called collectives over different groups in different "
          "orders, or some skipped a collective the others wait in); every device must call "
          "the same collectives in the same order" + report_);
    throw collective_aborted();
  }

  std::mutex mutex_;
  std::atomic<bool> aborted_{false};  // changed under mutex_; arrive_and_wait also polls it
  bool deadlocked_ = false;
  std::string report_;        // the deadlocked devices' waits, for the usage_error
  std::size_t blocked_ = 0;   // devices waiting in a barrier
  std::size_t finished_ = 0;  // devices whose function returned or threw
  std::unique_ptr<thread_group> groups_;  // the first of the run's groups, each owning the next
};

}  // namespace typeshard::detail
