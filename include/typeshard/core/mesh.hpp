// typeshard/core/mesh.hpp: named mesh axes with sizes, as a type.
//
//   using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;   // JAX: Mesh('x': 2, 'y': 2)
//   static_assert(mesh_2x2::size == 4);
//   static_assert(mesh_2x2::axis_size<"y"> == 2 && mesh_2x2::axis_index<"y"> == 1);
//
// Devices are laid out over the mesh in row-major order: the last axis varies fastest,
// as in numpy's reshape of the device list.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "config.hpp"
#include "detail/axis_name.hpp"
#include "detail/diagnose.hpp"
#include "detail/message.hpp"
#include "rules/mesh.hpp"

namespace typeshard {

using detail::axis_name;

// axis("x", 2): one named mesh axis and its size.
struct axis {
  axis_name name;
  std::size_t size = 0;

  template <std::size_t N>
  consteval axis(const char (&axis_label)[N], std::size_t axis_size)
      : name(axis_label), size(axis_size) {}
};

namespace detail {

inline constexpr std::size_t npos = static_cast<std::size_t>(-1);

template <std::size_t Rank>
constexpr std::size_t find_axis(const std::array<axis, Rank>& axes, axis_name name) {
  for (std::size_t i = 0; i < Rank; ++i)
    if (axes[i].name == name) return i;
  return npos;
}

// Position of the first axis whose name appeared earlier, or npos.
template <std::size_t Rank>
constexpr std::size_t first_repeated_axis(const std::array<axis, Rank>& axes) {
  for (std::size_t i = 0; i < Rank; ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (axes[i].name == axes[j].name) return i;
  return npos;
}

// The name of axes[i], or an empty name when i is out of range (npos, or a mesh of no axes).
template <std::size_t Rank>
constexpr axis_name name_at(const std::array<axis, Rank>& axes, std::size_t i) {
  if constexpr (Rank == 0) {
    return axis_name{};
  } else {
    return i < Rank ? axes[i].name : axis_name{};
  }
}

template <std::size_t Rank>
constexpr std::size_t first_empty_axis(const std::array<axis, Rank>& axes) {
  for (std::size_t i = 0; i < Rank; ++i)
    if (axes[i].size == 0) return i;
  return npos;
}

// "Mesh('x': 2, 'y': 2)": a function of the axes' values, one copy per TU (not per mesh).
TYPESHARD_COLD inline std::string mesh_string(std::span<const axis> axes) {
  std::string out = "Mesh(";
  for (std::size_t i = 0; i < axes.size(); ++i) {
    if (i) out += ", ";
    out += '\'';
    out += axes[i].name.view();
    out += "': ";
    append_integer(out, axes[i].size);
  }
  out += ")";
  return out;
}

}  // namespace detail

// mesh<axis...>: the logical arrangement of devices, a type.
template <axis... Axes>
struct mesh {
  static constexpr std::size_t rank = sizeof...(Axes);
  static constexpr std::array<axis, rank> axes{Axes...};
  // Number of devices the mesh spans.
  static constexpr std::size_t size = (std::size_t{1} * ... * Axes.size);
  static constexpr std::array<std::size_t, rank> shape{Axes.size...};

 private:
  static constexpr std::size_t repeated_ = detail::first_repeated_axis(axes);
  static constexpr std::size_t empty_ = detail::first_empty_axis(axes);
  static_assert(detail::require_named<repeated_ == detail::npos, detail::name_at(axes, repeated_),
                                      diagnostic::duplicate_mesh_axis>::value);
  static_assert(detail::require<empty_ == detail::npos,
                                diagnostic::mesh_axis_of_size_zero<empty_>>::value);

 public:
  // Whether the mesh has an axis of that name.
  static constexpr bool contains(axis_name name) {
    return detail::find_axis(axes, name) != detail::npos;
  }

  // Position of the named axis, or rank when the mesh has none (total, for generic code).
  static constexpr std::size_t index_of(axis_name name) {
    const std::size_t i = detail::find_axis(axes, name);
    return i == detail::npos ? rank : i;
  }

  // Size of the named axis, or 1 when the mesh has none (total, for generic code).
  static constexpr std::size_t size_of(axis_name name) {
    const std::size_t i = detail::find_axis(axes, name);
    return i == detail::npos ? 1 : axes[i].size;
  }

  // axis_index<"y"> / axis_size<"y">: checked queries; an unknown name is a compile error.
  template <axis_name Name>
  static constexpr std::size_t axis_index =
      detail::require_named<contains(Name), Name, diagnostic::mesh_has_no_such_axis>::value
          ? index_of(Name)
          : 0;
  template <axis_name Name>
  static constexpr std::size_t axis_size =
      detail::require_named<contains(Name), Name, diagnostic::mesh_has_no_such_axis>::value
          ? size_of(Name)
          : 0;

  // Mesh coordinates of a row-major position in [0, size).
  static constexpr std::array<std::size_t, rank> coordinates(std::size_t position) {
    std::array<std::size_t, rank> coords{};
    for (std::size_t i = rank; i-- > 0;) {
      coords[i] = position % shape[i];
      position /= shape[i];
    }
    return coords;
  }

  // Row-major position of mesh coordinates.
  static constexpr std::size_t position(const std::array<std::size_t, rank>& coords) {
    std::size_t p = 0;
    for (std::size_t i = 0; i < rank; ++i) p = p * shape[i] + coords[i];
    return p;
  }

  // "Mesh('x': 2, 'y': 2)", as JAX prints a mesh.
  static std::string to_string() { return detail::mesh_string(axes); }
};

// is_mesh<T>: whether T is a typeshard::mesh.
template <class T>
inline constexpr bool is_mesh_v = false;
template <axis... Axes>
inline constexpr bool is_mesh_v<mesh<Axes...>> = true;

template <class T>
concept mesh_like = is_mesh_v<T>;

}  // namespace typeshard
