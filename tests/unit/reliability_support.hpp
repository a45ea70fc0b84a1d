// tests/unit/reliability_support.hpp: what the reliability tests share (not a test itself;
// CMake globs tests/unit/*.cpp only).
//
// - watchdog: turns a hang into a failure. A test that deadlocks cannot be failed the
//   ordinary way (its threads cannot be joined), so the watchdog prints what hung and ends
//   the process with exit code 3 once a generous time limit has passed.
// - proc_status: VmRSS and Threads of this process, from /proc/self/status.
// - same_bits: bitwise equality of host tensors (NaN == NaN, -0.0 != 0.0).
// - message checks for the "typeshard: " convention.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

#include <typeshard/typeshard.hpp>

namespace reliability {

namespace ts = typeshard;

// How long a watched section may take before it counts as hung. Generous: sanitizer builds
// on a loaded two-core machine are slow, and a hang never finishes anyway.
inline std::chrono::seconds watchdog_limit() {
  if (const char* env = std::getenv("TYPESHARD_WATCHDOG_SECONDS")) return std::chrono::seconds(std::stol(env));
  return std::chrono::seconds(240);
}

// watchdog dog("what"): if it is not destroyed within the limit, report `what` and _Exit(3).
class watchdog {
 public:
  explicit watchdog(std::string what, std::chrono::seconds limit = watchdog_limit())
      : what_(std::move(what)), thread_([this, limit] {
          std::unique_lock lock(mutex_);
          if (!done_cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr,
                         "\nwatchdog: '%s' did not finish within %lld s: a hang (deadlock or "
                         "lost wake-up); failing the test process\n",
                         what_.c_str(), static_cast<long long>(limit.count()));
            std::fflush(stderr);
            std::_Exit(3);
          }
        }) {}
  watchdog(const watchdog&) = delete;
  watchdog& operator=(const watchdog&) = delete;
  ~watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }

 private:
  std::string what_;
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;  // last: started once the members above exist
};

// One field of /proc/self/status ("VmRSS", "Threads"), as the number it starts with; -1 if
// the file or field is missing (not Linux).
inline long proc_status(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(in, line))
    if (line.compare(0, key.size(), key) == 0) return std::strtol(line.c_str() + key.size(), nullptr, 10);
  return -1;
}
inline long rss_kib() { return proc_status("VmRSS"); }
inline long thread_count() { return proc_status("Threads"); }

// The thread count to compare against later: measured after one thread has been started and
// joined, so that helper threads a sanitizer runtime starts with the first thread
// (ThreadSanitizer's background thread) are already counted.
inline long settled_thread_count() {
  std::thread([] {}).join();
  return thread_count();
}

// Whether the thread count comes back to at most `before` (no thread leaked). A joined
// thread leaves the kernel's count a moment after join() returns (the kernel wakes the
// joiner before it finishes reaping the thread), so a count read right after a join, here
// or when `before` was taken, can include a thread that is already gone: the count is
// polled until it is no higher than `before`, for at most 10 s (a leaked thread never
// leaves, and fails the check).
inline bool threads_return_to(long before) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (thread_count() > before) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

template <class T, std::size_t Rank>
bool same_bits(const ts::host_tensor<T, Rank>& a, const ts::host_tensor<T, Rank>& b) {
  return a.extents() == b.extents() &&
         (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

inline bool starts_with_typeshard(const std::string& message) {
  return message.rfind("typeshard: ", 0) == 0;
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace reliability
