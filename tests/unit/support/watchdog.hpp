// tests/unit/support/watchdog.hpp: turning hangs into test failures, without sleeping.
//
//   auto r = ts_test::within(std::chrono::seconds(120), "run with a throwing device", [pool] {
//     ...;          // owns (by value, e.g. a shared_ptr) everything it touches
//     return ...;   // observations; the Catch2 checks happen on the test's thread
//   });
//
// within() runs the callable on its own thread and waits for it with a time limit. If it does
// not finish, the test FAILs (and the stuck thread is left behind, detached: that is why the
// callable must own what it uses). Catch2 v2 assertions are not thread-safe, so the callable
// returns what it saw and the caller checks it.
//
// rendezvous: a one-shot barrier for N threads with a deadline; arrive_and_wait() returns
// false instead of blocking forever when not everyone arrives in time. A test that needs its
// bodies to run at the same time makes them all meet here: run one after another, the first
// would wait for the others forever.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <future>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>

namespace ts_test {

template <class F>
auto within(std::chrono::seconds limit, const char* what, F f) -> std::invoke_result_t<F&> {
  using R = std::invoke_result_t<F&>;
  std::packaged_task<R()> task(std::move(f));
  std::future<R> result = task.get_future();
  std::thread runner(std::move(task));
  if (result.wait_for(limit) != std::future_status::ready) {
    runner.detach();  // stuck: leave it behind, it owns what it uses
    FAIL(what << " did not finish within " << limit.count() << " s: a deadlock or a lost wake-up");
  }
  runner.join();
  return result.get();  // rethrows what the callable threw
}

class rendezvous {
 public:
  rendezvous(std::size_t participants, std::chrono::seconds limit)
      : participants_(participants), deadline_(std::chrono::steady_clock::now() + limit) {}

  // True when all participants arrived before the deadline.
  bool arrive_and_wait() {
    std::unique_lock lock(mutex_);
    if (++arrived_ == participants_) {
      all_here_.notify_all();
      return true;
    }
    return all_here_.wait_until(lock, deadline_, [&] { return arrived_ >= participants_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable all_here_;
  std::size_t participants_;
  std::size_t arrived_ = 0;
  std::chrono::steady_clock::time_point deadline_;
};

// A flag one thread raises and others wait for, with a deadline.
class signal {
 public:
  void raise() {
    {
      std::lock_guard lock(mutex_);
      raised_ = true;
    }
    cv_.notify_all();
  }
  bool wait_for(std::chrono::seconds limit) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, limit, [&] { return raised_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool raised_ = false;
};

}  // namespace ts_test
