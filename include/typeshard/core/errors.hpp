// typeshard/core/errors.hpp: the exceptions typeshard throws at run time.
//
// Every message starts with "typeshard: ", says what was wrong (with the numbers
// involved) and what to do. An operation that throws leaves its inputs untouched.
#pragma once

#include <cstddef>
#include <exception>
#include <stdexcept>
#include <string>

#include "config.hpp"
#include "detail/message.hpp"

namespace typeshard {

// Base of every typeshard run-time error.
class error : public std::runtime_error {
 public:
  explicit error(const std::string& message) : std::runtime_error(message) {}
};

// Extents or host data that do not fit the operation (rule 6 at run time, sizes, overflow).
class shape_error : public error {
 public:
  using error::error;
};

// A device list that does not fit its mesh, or arrays on different device sets.
class device_mesh_error : public error {
 public:
  using error::error;
};

// A per-device function threw. device() says which device; original() is what it threw
// (also reachable through std::rethrow_if_nested: typeshard throws it from inside the
// handler of the original, so the nested exception is always set).
class device_error : public error, public std::nested_exception {
 public:
  device_error(std::size_t device, const std::string& message, std::exception_ptr original)
      : error(message), device_(device), original_(std::move(original)) {}

  std::size_t device() const noexcept { return device_; }
  const std::exception_ptr& original() const noexcept { return original_; }

 private:
  std::size_t device_;
  std::exception_ptr original_;
};

// Thrown inside the other devices' functions when one device failed while they waited
// for it in a collective: it releases them, so nothing hangs. The caller of the
// multi-device operation sees the original failure as a device_error, not this.
class collective_aborted : public error {
 public:
  collective_aborted()
      : error("typeshard: collective aborted because another device's function threw") {}
};

// A multi-device operation started where it cannot run, such as from inside a
// per-device function (it would wait for its own device forever).
class usage_error : public error {
 public:
  using error::error;
};

namespace detail {

// A usage_error reporting a broken invariant of typeshard itself ("typeshard: internal:
// ..."): cold and out of line, so that the check compiles to its test and one call.
[[noreturn]] TYPESHARD_COLD TYPESHARD_NOINLINE inline void throw_internal(const char* what) {
  throw usage_error(what);
}

// a * b, or a shape_error naming `what` if the product does not fit in size_t.
[[noreturn]] TYPESHARD_COLD inline void throw_extent_overflow(const char* what, std::size_t a,
                                                           std::size_t b) {
  throw shape_error(message({"typeshard: ", what, ": the product of the extents (", a, " * ", b,
                             ") overflows size_t; use smaller extents"}));
}

inline std::size_t checked_multiply(std::size_t a, std::size_t b, const char* what) {
  std::size_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) throw_extent_overflow(what, a, b);
  return out;
}

}  // namespace detail
}  // namespace typeshard
