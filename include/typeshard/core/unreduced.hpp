// typeshard/core/unreduced.hpp: the mesh axes over which a value is an unreduced partial sum.
//
// A sharded array of type ...unreduced<"x"> holds on each device a partial sum; the value
// it stands for is the sum of those over the "x" axis (DTensor's Partial(sum); the book's
// C{U_X}). Only linear operations may touch it before it is reduced (rule 3).
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "detail/axis_name.hpp"

namespace typeshard {

template <detail::axis_name... Axes>
struct unreduced {
  static constexpr std::size_t size = sizeof...(Axes);
  static constexpr bool empty = size == 0;
  static constexpr std::array<detail::axis_name, size> axes{Axes...};

  static constexpr bool contains(detail::axis_name name) { return ((Axes == name) || ...); }

  // "{U_x, y}" in the book's notation; "" when fully reduced.
  static std::string to_string() {
    if constexpr (size == 0) {
      return "";
    } else {
      std::string out = "{U_";
      bool first = true;
      ((out += (first ? "" : ", "), out += Axes.view(), first = false), ...);
      return out + "}";
    }
  }
};

template <class T>
inline constexpr bool is_unreduced_v = false;
template <detail::axis_name... Axes>
inline constexpr bool is_unreduced_v<unreduced<Axes...>> = true;

template <class T>
concept unreduced_like = is_unreduced_v<T>;

}  // namespace typeshard
