// typeshard/backend/detail/call_site.hpp: the user's call site of the operation running on this
// thread, for the backends' deadlock and mismatch reports. Internal: do not rely on anything
// in detail/.
//
// Each public entry point that may communicate (the block collectives, ts::reshard, ts::psum,
// the ops that issue collectives) takes a trailing `std::source_location loc =
// std::source_location::current()` and opens a call_site_scope for the duration of the
// call. The outermost scope on a thread wins, so the collective that ts::matmul issues from
// inside the library reports the user's line, not the library's. Opening a scope stores a
// pointer in a thread_local: no allocation, no formatting until a report is made. The
// thread pool hands the host's site to its device threads with each run (threads.ipp).
#pragma once

#include <cstddef>
#include <cstring>
#include <source_location>
#include <string>

namespace typeshard::detail {

// The call site current on this thread; nullptr when no entry point opened one.
inline const std::source_location*& current_call_site() noexcept {
  thread_local const std::source_location* site = nullptr;
  return site;
}

// Makes `loc` the current call site while it lives, unless an outer scope set one.
class call_site_scope {
 public:
  explicit call_site_scope(const std::source_location& loc) noexcept
      : outer_(current_call_site()) {
    if (outer_ == nullptr) current_call_site() = &loc;
  }
  ~call_site_scope() { current_call_site() = outer_; }
  call_site_scope(const call_site_scope&) = delete;
  call_site_scope& operator=(const call_site_scope&) = delete;

 private:
  const std::source_location* outer_;
};

// "file:line" of `site`, at most `max` characters: a longer path keeps its end ("...h/f.cpp:31").
// "an unknown call site" when there is none.
inline std::string format_call_site(const std::source_location* site, std::size_t max = 95) {
  if (site == nullptr || site->line() == 0) return "an unknown call site";
  const std::string line = ':' + std::to_string(site->line());
  const char* file = site->file_name();
  std::size_t n = std::strlen(file);
  const std::size_t room = max > line.size() + 3 ? max - line.size() : 3;
  if (n <= room) return file + line;
  file += n - (room - 3);
  return "..." + std::string(file) + line;
}

}  // namespace typeshard::detail
