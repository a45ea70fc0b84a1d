// typeshard/backend/detail/call_site.hpp: the user's call site of the operation running on this
// thread, for the backends' deadlock and mismatch reports. Internal: do not rely on anything
// in detail/.
//
// Each public entry point that may communicate (the block collectives, ts::reshard, ts::psum,
// the ops that issue collectives, the backend's own collectives) takes a trailing
// `detail::source_site loc = detail::source_site::current()` and opens a call_site_scope for
// the duration of the call. The outermost scope on a thread wins, so the collective that
// ts::reshard issues from inside the library reports the user's line, not the library's.
// Opening a scope stores a pointer in a thread_local: no allocation, no formatting until a
// report is made. The thread pool hands the caller's site to its device threads with each
// run (threads.ipp); an MPI rank runs its device function on the calling thread.
//
// source_site rather than std::source_location: clang before 15 with libstdc++ has no
// std::source_location; __builtin_FILE and __builtin_LINE, which GCC, Clang and MSVC have,
// evaluated in a default argument, give the caller's position in all three.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>

#include "../../core/config.hpp"
#include "../../core/detail/message.hpp"

namespace typeshard::detail {

// A position in the source: file and line.
struct source_site {
  const char* file = nullptr;
  unsigned line = 0;
  // The caller's position, when called in a default argument.
  static constexpr source_site current(const char* file = __builtin_FILE(),
                                       unsigned line = __builtin_LINE()) noexcept {
    return {file, line};
  }
};

// The call site current on this thread; nullptr when no entry point opened one.
inline const source_site*& current_call_site() noexcept {
  thread_local const source_site* site = nullptr;
  return site;
}

// Makes `loc` the current call site while it lives, unless an outer scope set one.
class call_site_scope {
 public:
  explicit call_site_scope(const source_site& loc) noexcept : outer_(current_call_site()) {
    if (outer_ == nullptr) current_call_site() = &loc;
  }
  ~call_site_scope() { current_call_site() = outer_; }
  call_site_scope(const call_site_scope&) = delete;
  call_site_scope& operator=(const call_site_scope&) = delete;

 private:
  const source_site* outer_;
};

// "file:line" of `site`, at most `max` characters (a longer path keeps its end:
// ".../unit/f.cpp:31"); "an unknown call site" when there is none.
// Only on reporting paths: cold, out of line, compiled once per TU.
TYPESHARD_COLD TYPESHARD_NOINLINE inline std::string format_call_site(const source_site* site,
                                                                     std::size_t max = 95) {
  if (site == nullptr || site->file == nullptr || site->line == 0) return "an unknown call site";
  std::string line = ":";
  append_integer(line, site->line);
  const char* file = site->file;
  const std::size_t n = std::strlen(file);
  const std::size_t room = max > line.size() + 3 ? max - line.size() : 3;
  std::string out;
  if (n <= room) {
    out.append(file, n);
  } else {
    out.append("...");
    out.append(file + n - (room - 3));
  }
  out.append(line);
  return out;
}

}  // namespace typeshard::detail
