// typeshard/viz/impl/visualize.ipp: the drawing of viz/visualize.hpp, the part that does not
// depend on the layout (rich's table, JAX's colours and sizes). Included by visualize.hpp in
// header-only mode (inline); compiled once in src/typeshard_runtime.cpp with
// TYPESHARD_SEPARATE_COMPILATION. Internal.
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <iostream>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#if defined(_WIN32)
#include <io.h>
#else
#include <unistd.h>
#endif

#include "../../core/config.hpp"
#include "../../core/errors.hpp"
#include "../detail/ansi_output.hpp"
#include "../detail/rich_table.hpp"
#include "../visualize.hpp"

namespace typeshard::detail {

// matplotlib's colormaps["tab20b"], as JAX's _canonicalize_color reads it.
inline constexpr rgb tab20b[20] = {
    {0x39, 0x3B, 0x79}, {0x52, 0x54, 0xA3}, {0x6B, 0x6E, 0xCF}, {0x9C, 0x9E, 0xDE},
    {0x63, 0x79, 0x39}, {0x8C, 0xA2, 0x52}, {0xB5, 0xCF, 0x6B}, {0xCE, 0xDB, 0x9C},
    {0x8C, 0x6D, 0x31}, {0xBD, 0x9E, 0x39}, {0xE7, 0xBA, 0x52}, {0xE7, 0xCB, 0x94},
    {0x84, 0x3C, 0x39}, {0xAD, 0x49, 0x4A}, {0xD6, 0x61, 0x6B}, {0xE7, 0x96, 0x9C},
    {0x7B, 0x41, 0x73}, {0xA5, 0x51, 0x94}, {0xCE, 0x6D, 0xBD}, {0xDE, 0x9E, 0xD6}};

// JAX's make_color_iter: the k-th of n boxes (row-major) takes colormap(linspace(0, 1, n)[i])
// where i steps by n/2 (+1 when n is even) modulo n, so neighbours get distant colours.
TYPESHARD_DEFERRED
TYPESHARD_COLD
TYPESHARD_RUNTIME_DEF rgb box_colour(std::size_t k, std::size_t n) {
  const std::size_t i = k * (n / 2 + (n % 2 == 0 ? 1 : 0)) % n;  // k steps from 0
  const double step = n > 1 ? 1.0 / static_cast<double>(n - 1) : 0.0;  // numpy.linspace
  const double value = (n > 1 && i == n - 1) ? 1.0 : static_cast<double>(i) * step;
  double x = value * 20.0;  // ListedColormap.__call__: x * N, N itself maps to N - 1
  if (x == 20.0) x = 19.0;
  return tab20b[static_cast<std::size_t>(x)];
}

// JAX's _get_text_color: black on light backgrounds, white on dark ones.
TYPESHARD_DEFERRED
TYPESHARD_COLD
TYPESHARD_RUNTIME_DEF rgb text_colour(rgb bg) {
  return (bg.r * 0.299 + bg.g * 0.587 + bg.b * 0.114) > 186 ? rgb{0, 0, 0} : rgb{255, 255, 255};
}

// Whether `os` writes to a terminal: std::cout or std::cerr/std::clog on a tty.
TYPESHARD_DEFERRED
TYPESHARD_COLD
TYPESHARD_RUNTIME_DEF bool writes_to_terminal(const std::ostream& os) {
  int fd = -1;
  if (os.rdbuf() == std::cout.rdbuf()) fd = 1;
  else if (os.rdbuf() == std::cerr.rdbuf() || os.rdbuf() == std::clog.rdbuf()) fd = 2;
  if (fd < 0) return false;
#if defined(_WIN32)
  return _isatty(fd) != 0;
#else
  return ::isatty(fd) != 0;
#endif
}

// rich's choice: colours on a terminal unless NO_COLOR is set or TERM is dumb.
TYPESHARD_DEFERRED
TYPESHARD_COLD
TYPESHARD_RUNTIME_DEF bool use_colour(const std::ostream& os, const visualize_options& o) {
  if (o.use_color) return *o.use_color;
  if (std::getenv("NO_COLOR") != nullptr) return false;
  const char* term = std::getenv("TERM");
  if (term != nullptr && (std::string_view(term) == "dumb" || std::string_view(term) == "unknown"))
    return false;
  return writes_to_terminal(os);
}

TYPESHARD_DEFERRED
TYPESHARD_COLD
TYPESHARD_RUNTIME_DEF ansi_palette palette(const visualize_options& o) {
  if (o.colors == color_system::truecolor) return ansi_palette::truecolor;
  if (o.colors == color_system::eight_bit) return ansi_palette::eight_bit;
  const char* colorterm = std::getenv("COLORTERM");
  const std::string_view ct = colorterm ? colorterm : "";
  return (ct == "truecolor" || ct == "24bit") ? ansi_palette::truecolor : ansi_palette::eight_bit;
}

TYPESHARD_DEFERRED
TYPESHARD_COLD
TYPESHARD_RUNTIME_DEF void check_options(const visualize_options& o) {
  if (!(std::isfinite(o.scale) && o.scale >= 0.0 && o.scale <= 1000.0))
    throw usage_error("typeshard: visualize: scale is " + std::to_string(o.scale) +
                      "; pass a scale between 0 and 1000 (1 draws JAX's default size)");
  if (o.max_width < 1 || o.max_width > 100000)
    throw usage_error("typeshard: visualize: max_width is " + std::to_string(o.max_width) +
                      "; pass a console width between 1 and 100000 characters (JAX uses 80)");
}

TYPESHARD_DEFERRED_DEFINITION
TYPESHARD_COLD
TYPESHARD_RUNTIME_DEF void draw_boxes(std::ostream& os, box_grid g, std::string_view platform,
                                      const visualize_options& o) {
  check_options(o);
  const bool colour = use_colour(os, o);
  const std::size_t rows = g.rows, cols = g.cols;
  std::vector<box_of_devices>& boxes = g.boxes;

  // JAX: base_height = int(10 * scale), base_width = int(base_height * columns / rows);
  // a box is int(width_share * base_width * 2.5) wide (characters are 2.5 times as tall as
  // wide), clamped to [min_width, max_width], and int(height_share * base_height) tall.
  auto extent_or_one = [](std::size_t e) {
    return static_cast<double>(std::max<std::size_t>(e, 1));
  };
  const double base_height = std::trunc(10 * o.scale);
  const double aspect =
      (g.two_dimensional ? extent_or_one(g.last_extent) : 1.0) / extent_or_one(g.first_extent);
  const double base_width = std::trunc(base_height * aspect);
  // min(max(w, min_width), max_width) is max_width whenever min_width > max_width.
  const long long min_width = static_cast<long long>(std::min(o.min_width, o.max_width));
  const long long max_width = static_cast<long long>(o.max_width);

  std::string kind(platform);
  for (char& ch : kind) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));

  grid table{rows, cols, {}};
  table.cells.reserve(rows * cols);
  for (std::size_t k = 0; k < boxes.size(); ++k) {
    box_of_devices& b = boxes[k];
    // Sorted by insertion, in place: quadratic in a box's devices (at most the mesh's, once
    // per picture), and std::sort would cost every TU that draws (header-only) its dozen
    // helper templates.
    for (std::size_t i = 1; i < b.devices.size(); ++i) {
      const device_id d = b.devices[i];
      std::size_t j = i;
      for (; j > 0 && b.devices[j - 1] > d; --j) b.devices[j] = b.devices[j - 1];
      b.devices[j] = d;
    }
    padded_label cell;
    cell.label = kind + " ";
    for (std::size_t i = 0; i < b.devices.size(); ++i) {
      // Two appends, not `(i ? "," : "") + to_string(...)`: g++ 12 at -O3 (Release, what
      // scripts/demo builds) raises a false -Wrestrict on that operator+ (GCC bug 105329).
      if (i) cell.label += ',';
      cell.label += std::to_string(b.devices[i]);
    }

    const double w = b.width * base_width * 2.5;
    long long width = max_width;
    if (w < static_cast<double>(max_width))
      width = std::min(std::max(static_cast<long long>(std::trunc(w)), min_width), max_width);
    const long long height =
        b.height < 0 ? 1 : static_cast<long long>(std::trunc(b.height * base_height));

    const auto [left, left_rem] = py_divmod(width - cell_len(cell.label) - 2, 2);
    const auto [top, top_rem] = py_divmod(height - 2, 2);
    const long long extra = colour ? 1 : 0;  // coloured boxes have no lines: pad instead
    cell.left = std::max(0LL, left + extra);
    cell.right = std::max(0LL, left + left_rem + extra);
    cell.top = std::max(0LL, top + extra);
    cell.bottom = std::max(0LL, top + top_rem + extra);
    if (colour) {
      cell.styled = true;
      cell.background = box_colour(k, rows * cols);
      cell.foreground = text_colour(cell.background);
    }
    table.cells.push_back(std::move(cell));  // boxes are in row-major order
  }
  picture_text text;
  write_lines(os, render_table(text, table, !colour, max_width), palette(o));
}


}  // namespace typeshard::detail
