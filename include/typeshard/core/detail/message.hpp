// typeshard/core/detail/message.hpp: run-time error messages, joined out of line.
// Internal: do not rely on anything in detail/.
//
//   throw usage_error(detail::message({"typeshard: device ", d, " does not exist: ", summary}));
//
// A message is a list of pieces, each text or an integer, joined by one function that every
// throw site calls. Written as `"..." + std::to_string(n) + "..."`, each site compiles its
// own chain of concatenations and conversions (inlined, an allocation per step), again in
// every TU of a header-only program; as a list it is an array on the stack and one call, and
// message() itself is compiled once per TU, cold (it runs only to report).
#pragma once

#include <charconv>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

#include "../config.hpp"

namespace typeshard::detail {

// Appends n in decimal: what std::to_string does, without a string of its own to concatenate
// (the cold string builders of shapes, meshes and messages use it).
inline void append_integer(std::string& out, unsigned long long n) {
  char digits[24];
  out.append(digits, std::to_chars(digits, digits + sizeof digits, n).ptr);
}

// One piece of a message: text (not copied: it must outlive the message() call, as the
// arguments of a full expression do) or an integer.
class message_piece {
 public:
  message_piece(const char* text) : text_(text) {}         // NOLINT: implicit, as a piece
  message_piece(std::string_view text) : text_(text) {}    // NOLINT
  message_piece(const std::string& text) : text_(text) {}  // NOLINT
  template <class I>
    requires(std::is_integral_v<I> && !std::is_same_v<I, bool> && !std::is_same_v<I, char>)
  message_piece(I n)  // NOLINT
      : magnitude_(n < 0 ? 0ull - static_cast<unsigned long long>(n)
                         : static_cast<unsigned long long>(n)),
        kind_(n < 0 ? kind::negative : kind::number) {}

  void append_to(std::string& out) const {
    if (kind_ == kind::text) {
      out.append(text_);
      return;
    }
    if (kind_ == kind::negative) out.push_back('-');
    append_integer(out, magnitude_);
  }

 private:
  enum class kind : unsigned char { text, number, negative };
  std::string_view text_;
  unsigned long long magnitude_ = 0;
  kind kind_ = kind::text;
};

// The pieces joined, in order.
TYPESHARD_COLD TYPESHARD_NOINLINE inline std::string message(
    std::initializer_list<message_piece> pieces) {
  std::string out;
  for (const message_piece& p : pieces) p.append_to(out);
  return out;
}

}  // namespace typeshard::detail
