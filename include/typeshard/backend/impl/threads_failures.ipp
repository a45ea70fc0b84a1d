// typeshard/backend/impl/threads_failures.ipp: how the thread pool reports a failed run (see
// threads.hpp): the device whose function threw, or the members of a group whose calls
// differ. Included by threads.ipp (header-only) or compiled once into typeshard::runtime.
#pragma once

#include <exception>
#include <span>
#include <string>

#include "../../core/errors.hpp"
#include "../detail/thread_run.hpp"
#include "../threads.hpp"

namespace typeshard::detail {

// A device that failed on its own is reported before one that was only released from
// a collective because of it.
TYPESHARD_DEFERRED
TYPESHARD_COLD inline void rethrow_first_failure(std::span<const device_id> devices,
                                                 std::span<const std::exception_ptr> failures) {
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
  const char* const where = "typeshard: the function running on device ";
  try {
    std::rethrow_exception(failures[chosen]);
  } catch (const std::exception& e) {
    throw device_error(devices[chosen], message({where, devices[chosen], " threw: ", e.what()}),
                       failures[chosen]);
  } catch (...) {
    throw device_error(devices[chosen],
                       message({where, devices[chosen],
                                " threw: an exception not derived from std::exception"}),
                       failures[chosen]);
  }
}

// run_program's failure: the first device that failed on its own (else the first released
// because of another's failure), rethrown as it was thrown.
TYPESHARD_DEFERRED
TYPESHARD_COLD inline void rethrow_first_program_failure(
    std::span<const std::exception_ptr> failures) {
  std::exception_ptr chosen;
  for (const std::exception_ptr& f : failures) {
    if (!f) continue;
    if (!chosen) chosen = f;
    try {
      std::rethrow_exception(f);
    } catch (const collective_aborted&) {
      continue;
    } catch (...) {
      chosen = f;
      break;
    }
  }
  if (chosen) std::rethrow_exception(chosen);
}

// The usage_error for members of `grp` that called different collectives: each member's
// collective, group and call site.
TYPESHARD_DEFERRED [[noreturn]] TYPESHARD_COLD inline void throw_calls_differ(
    std::span<const device_id> devices, const thread_group& grp) {
  std::string out =
      "typeshard: the devices of a collective group called different collectives (or the "
      "same with different sizes or element types); every device must call the same "
      "collectives in the same order:";
  for (std::size_t j = 0; j < grp.size; ++j)
    out += std::string(j ? ";" : "") + " device " + std::to_string(devices[grp.members[j]]) +
           " called " + describe_call(grp.calls[j], devices, grp.members);
  throw usage_error(out);
}

}  // namespace typeshard::detail
