// typeshard/backend/detail/fibers.hpp: stackful fibers (POSIX ucontext: makecontext and
// swapcontext, in glibc) for the thread pool's SPMD programs (cpu_devices::run_program), and
// the worker that runs several of them on one thread. Internal: do not rely on anything in
// detail/. The scheduling loop is the pool's (impl/threads.ipp); thread_run.hpp parks a fiber
// that waits in a collective and wakes it when the collective's last member arrives.
//
// A fiber runs on its worker's thread only between two switches it makes itself (park or
// return): never inside a kernel. The thread's `thread_local`s the pool keeps per device (the
// device context, the call site) are switched with the fiber by the worker; those of kernels
// (GEMM packing buffers) are per thread and not held across a collective, so the fibers of a
// worker share them. A fiber must not switch inside a catch handler (the C++ runtime keeps the
// exceptions being handled per thread): the pool calls no collective from a handler.
//
// Sanitizers: the switches carry AddressSanitizer's and ThreadSanitizer's fiber annotations
// (__sanitizer_start_switch_fiber / __sanitizer_finish_switch_fiber, __tsan_create_fiber /
// __tsan_switch_to_fiber / __tsan_destroy_fiber), so both follow the stacks and the
// happens-before of a switch. (AddressSanitizer still prints once that it "doesn't fully
// support makecontext/swapcontext": its warning for any use, annotated or not.)
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "../../core/errors.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define TYPESHARD_FIBERS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TYPESHARD_FIBERS_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define TYPESHARD_FIBERS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TYPESHARD_FIBERS_TSAN 1
#endif
#endif
#if defined(TYPESHARD_FIBERS_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(TYPESHARD_FIBERS_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace typeshard::detail {

// The default size of a fiber's stack: what a device's program may use, as a thread's
// would (glibc's default thread stack is 8 MiB). Reserved address space with a guard page
// below it (an overflow faults rather than corrupting memory); pages are committed only
// as they are touched. cpu_devices::set_fiber_stack_bytes changes it.
inline constexpr std::size_t default_fiber_stack_bytes = std::size_t{8} << 20;

// A program that took less than this on several workers runs on one (the caller's thread)
// next time, and one that took 4 times this on one runs on several again: about the cost of
// waking a thread and meeting it in a few collectives on the machines here (a few tens of
// microseconds each, docs/reference/backend/threads.md), against work it would share.
inline constexpr std::chrono::microseconds fiber_small_program{100};

class fiber_worker;

// One fiber: its stack (mapped once, reused by every program it runs) and its saved context.
class fiber {
 public:
  // Maps `stack_bytes` (rounded up to pages) and a guard page; typeshard::error if the
  // address space is exhausted.
  explicit fiber(std::size_t stack_bytes) {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    map_bytes_ = (stack_bytes + page - 1) / page * page + page;
    void* p = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (p == MAP_FAILED)
      throw error(
          "typeshard: cpu_devices could not map a fiber's stack for an SPMD program (the "
          "process is at its address-space limit, ulimit -v); set a smaller stack with "
          "set_fiber_stack_bytes, or run programs on device threads");
    map_ = static_cast<unsigned char*>(p);
    (void)mprotect(map_, page, PROT_NONE);  // the guard page (stacks grow down)
    stack_ = map_ + page;
    stack_bytes_ = map_bytes_ - page;
#if defined(TYPESHARD_FIBERS_TSAN)
    tsan_ = __tsan_create_fiber(0);
#endif
  }
  ~fiber() {
#if defined(TYPESHARD_FIBERS_TSAN)
    __tsan_destroy_fiber(tsan_);
#endif
    munmap(map_, map_bytes_);
  }
  fiber(const fiber&) = delete;
  fiber& operator=(const fiber&) = delete;

  // Makes the fiber run entry(*this) from the top of its stack when `home` first resumes it.
  // entry must not throw; the fiber is done when it returns.
  void prepare(void (*entry)(fiber&), fiber_worker& home) {
    entry_ = entry;
    home_ = &home;
    done_ = false;
    next_parked = nullptr;
#if defined(TYPESHARD_FIBERS_ASAN)
    fake_stack_ = nullptr;  // the last program's was released by its final switch
#endif
#if defined(TYPESHARD_FIBERS_TSAN)
    // A fresh one: the last program's ended inside its frames, which ThreadSanitizer's
    // shadow stack of the fiber still holds.
    __tsan_destroy_fiber(tsan_);
    tsan_ = __tsan_create_fiber(0);
#endif
    getcontext(&context_);
    context_.uc_stack.ss_sp = stack_;
    context_.uc_stack.ss_size = stack_bytes_;
    context_.uc_link = nullptr;
    const auto bits = reinterpret_cast<std::uintptr_t>(this);
    makecontext(&context_, reinterpret_cast<void (*)()>(&trampoline), 2,
                static_cast<unsigned>(bits >> 32), static_cast<unsigned>(bits & 0xffffffffu));
  }

  fiber_worker& home() const { return *home_; }
  bool done() const { return done_; }

  // The fiber the calling thread runs now, if any.
  static fiber*& current() noexcept {
    thread_local fiber* running = nullptr;
    return running;
  }

  // From the fiber itself: switches to its worker's scheduler. It runs again once woken
  // (fiber_worker::wake) and resumed.
  void park();

  // From the worker's scheduler (on its thread): runs the fiber until it parks or is done.
  void resume(ucontext_t& scheduler);

  void* data = nullptr;           // the pool's: the device this fiber runs
  fiber* next_parked = nullptr;   // a collective group's list of parked fibers (thread_run)

 private:
  static void trampoline(unsigned hi, unsigned lo) {
    fiber& self = *reinterpret_cast<fiber*>((std::uintptr_t{hi} << 32) | std::uintptr_t{lo});
    self.arrived();
    self.entry_(self);
    self.done_ = true;
    self.leave(true);  // never resumed again until prepared anew
  }

  // Switches from the fiber to the scheduler (`final`: the fiber's stack frames are dead).
  void leave(bool final);
  // On the fiber, just after a switch to it.
  void arrived() {
#if defined(TYPESHARD_FIBERS_ASAN)
    __sanitizer_finish_switch_fiber(fake_stack_, &scheduler_bottom_, &scheduler_size_);
#endif
  }

  unsigned char* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  unsigned char* stack_ = nullptr;
  std::size_t stack_bytes_ = 0;
  ucontext_t context_{};
  ucontext_t* scheduler_ = nullptr;  // the worker's, while the fiber runs
  void (*entry_)(fiber&) = nullptr;
  fiber_worker* home_ = nullptr;
  bool done_ = false;
#if defined(TYPESHARD_FIBERS_ASAN)
  void* fake_stack_ = nullptr;
  const void* scheduler_bottom_ = nullptr;
  std::size_t scheduler_size_ = 0;
#endif
#if defined(TYPESHARD_FIBERS_TSAN)
  void* tsan_ = nullptr;
  void* tsan_scheduler_ = nullptr;
#endif
};

// A worker: the fibers of some devices, run one at a time on one thread. Its queue of
// runnable fibers holds each at most once (a fiber is queued when prepared, and when woken
// after it parked), so `capacity` fibers never overflow it.
class fiber_worker {
 public:
  // Room for `capacity` fibers (before any is queued).
  void reserve(std::size_t capacity) {
    ready_ = std::make_unique<fiber*[]>(capacity);
    capacity_ = capacity;
  }

  // Any thread: makes f, which parked or was prepared, runnable, and wakes the worker if it
  // sleeps.
  void wake(fiber& f) {
    std::lock_guard lock(mutex_);
    ready_[(head_ + count_) % capacity_] = &f;
    ++count_;
    runnable_.store(true, std::memory_order_release);
    if (sleeping_) woken_.notify_one();
  }

  // Whether a fiber is runnable (polled before the worker sleeps).
  bool runnable() const { return runnable_.load(std::memory_order_acquire); }

  // The next runnable fiber, blocking until there is one.
  fiber& take() {
    std::unique_lock lock(mutex_);
    if (count_ == 0) {
      sleeping_ = true;
      woken_.wait(lock, [&] { return count_ != 0; });
      sleeping_ = false;
    }
    fiber& f = *ready_[head_];
    head_ = (head_ + 1) % capacity_;
    if (--count_ == 0) runnable_.store(false, std::memory_order_relaxed);
    return f;
  }

  ucontext_t scheduler{};  // the worker thread's context while a fiber runs

 private:
  std::mutex mutex_;
  std::condition_variable woken_;
  std::unique_ptr<fiber*[]> ready_;
  std::size_t capacity_ = 0;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
  bool sleeping_ = false;
  std::atomic<bool> runnable_{false};
};

inline void fiber::resume(ucontext_t& scheduler) {
  scheduler_ = &scheduler;
  current() = this;
#if defined(TYPESHARD_FIBERS_ASAN)
  void* scheduler_fake = nullptr;
  __sanitizer_start_switch_fiber(&scheduler_fake, stack_, stack_bytes_);
#endif
#if defined(TYPESHARD_FIBERS_TSAN)
  tsan_scheduler_ = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(tsan_, 0);
#endif
  swapcontext(&scheduler, &context_);
#if defined(TYPESHARD_FIBERS_ASAN)
  __sanitizer_finish_switch_fiber(scheduler_fake, nullptr, nullptr);
#endif
  current() = nullptr;
}

inline void fiber::leave(bool final) {
#if defined(TYPESHARD_FIBERS_ASAN)
  __sanitizer_start_switch_fiber(final ? nullptr : &fake_stack_, scheduler_bottom_,
                                 scheduler_size_);
#else
  (void)final;
#endif
#if defined(TYPESHARD_FIBERS_TSAN)
  __tsan_switch_to_fiber(tsan_scheduler_, 0);
#endif
  swapcontext(&context_, scheduler_);
  arrived();
}

inline void fiber::park() { leave(false); }

}  // namespace typeshard::detail
