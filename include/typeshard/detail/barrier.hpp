// typeshard/detail/barrier.hpp: a reusable barrier that can be aborted.
// Internal: do not rely on anything in detail/.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>

#include "../errors.hpp"

namespace typeshard::detail {

// abortable_barrier: N participants wait for each other, phase after phase, like
// std::barrier; abort() releases every current and future waiter with
// collective_aborted. That is how one device's exception frees the devices blocked in a
// collective with it. Waiters block on a condition variable (no spinning), so more
// devices than cores is fine.
class abortable_barrier {
 public:
  explicit abortable_barrier(std::size_t participants) : participants_(participants) {}

  // Blocks until all participants arrived at this phase; throws collective_aborted if the
  // barrier was aborted before or while waiting.
  void arrive_and_wait() {
    std::unique_lock lock(mutex_);
    if (aborted_) throw collective_aborted();
    const std::size_t phase = phase_;
    if (++arrived_ == participants_) {
      arrived_ = 0;
      ++phase_;
      lock.unlock();
      released_.notify_all();
      return;
    }
    released_.wait(lock, [&] { return phase_ != phase || aborted_; });
    if (phase_ == phase) throw collective_aborted();
  }

  void abort() {
    {
      std::lock_guard lock(mutex_);
      aborted_ = true;
    }
    released_.notify_all();
  }

  bool aborted() const {
    std::lock_guard lock(mutex_);
    return aborted_;
  }

  std::size_t participants() const { return participants_; }

 private:
  mutable std::mutex mutex_;
  std::condition_variable released_;
  std::size_t participants_;
  std::size_t arrived_ = 0;
  std::size_t phase_ = 0;
  bool aborted_ = false;
};

}  // namespace typeshard::detail
