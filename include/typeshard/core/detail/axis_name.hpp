// typeshard/core/detail/axis_name.hpp: a mesh-axis name usable as a template argument.
// Internal: do not rely on anything in detail/.
#pragma once

#include <cstddef>
#include <string_view>
#include <utility>

namespace typeshard::detail {

// The longest axis name typeshard accepts. Names are short labels ("data", "model"),
// and a fixed capacity keeps the type structural so it can be a template argument.
inline constexpr std::size_t max_axis_name_length = 31;

// axis_name: a structural fixed-capacity string, built at compile time from a literal.
struct axis_name {
  char chars[max_axis_name_length + 1]{};
  std::size_t length = 0;

  constexpr axis_name() = default;

  template <std::size_t N>
  consteval axis_name(const char (&literal)[N])  // NOLINT: implicit on purpose
      : length(N - 1 <= max_axis_name_length ? N - 1 : max_axis_name_length) {
    static_assert(N - 1 <= max_axis_name_length,
                  "typeshard: axis name too long: a mesh axis name has at most 31 characters; "
                  "fix: use a shorter name");
    if (N - 1 == 0) throw "typeshard: an axis name must not be empty";
    // Bounded by the capacity too, so that a too-long name gives only the message above.
    for (std::size_t i = 0; i + 1 < N && i < max_axis_name_length; ++i) chars[i] = literal[i];
  }

  constexpr std::string_view view() const { return {chars, length}; }
  constexpr bool empty() const { return length == 0; }
  friend constexpr bool operator==(const axis_name&, const axis_name&) = default;
};

// axis_name_chars<Name>: the characters of Name as a pack, so that a diagnostic template
// instantiated with them shows the name readably on every compiler (clang 14 prints
// class-type template arguments as lists of character codes).
template <axis_name Name, class Seq = std::make_index_sequence<Name.length>>
struct axis_name_chars;

template <axis_name Name, std::size_t... I>
struct axis_name_chars<Name, std::index_sequence<I...>> {
  template <template <char...> class Diagnostic>
  using apply = Diagnostic<Name.chars[I]...>;
};

}  // namespace typeshard::detail
