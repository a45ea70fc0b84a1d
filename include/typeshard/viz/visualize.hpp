// typeshard/viz/visualize.hpp: the box drawing of jax.debug.visualize_array_sharding.
//
//   ts::visualize(C);                                  // to std::cout, coloured on a terminal
//   ts::visualize(std::cout, C, {.use_color = false}); // boxes, as JAX's use_color=False
//   ts::visualize_sharding<ts::spec<"x", "y">>(os, m, ts::shape<2>{16, 16});  // no data needed
//
// For a 1-D or 2-D array: one box per distinct shard, placed where the shard sits in the
// array and sized in proportion to its extents, labelled with the devices that hold it
// ("CPU 0,1": a replica group, ids sorted). The output is byte for byte what JAX prints for
// the same shape, mesh, spec and device order (JAX draws with `rich`; detail/rich_table.hpp
// re-implements the part of rich involved): uncoloured, SQUARE box lines; coloured, no lines
// but ANSI background colours from matplotlib's "tab20b", in JAX's order.
//
// Where JAX stops, typeshard goes on: uneven shards are drawn in proportion (JAX's
// visualize asserts even shards), zero extents draw every shard at its share of the box,
// and a column too narrow for its label keeps its box without the label (rich raises).
// A value unreduced over some axis draws where its partial sums live.
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#if defined(_WIN32)
#include <io.h>
#else
#include <unistd.h>
#endif

#include "../backend/backend.hpp"
#include "../core/detail/diagnose.hpp"
#include "detail/rich_table.hpp"
#include "../array/device_mesh.hpp"
#include "../core/errors.hpp"
#include "../core/layout.hpp"
#include "../array/sharded_array.hpp"
#include "../core/rules/visualize.hpp"

namespace typeshard {

// Which ANSI colours a coloured picture uses; automatic asks the environment as rich does
// (COLORTERM=truecolor or 24bit: 24-bit colours; otherwise the 256-colour palette).
enum class color_system { automatic, truecolor, eight_bit };

// The options of jax.debug.visualize_array_sharding / visualize_sharding.
struct visualize_options {
  // JAX's use_color. Unset: colours only when the stream is std::cout / std::cerr and that
  // is a terminal (and NO_COLOR is unset, TERM is not "dumb"), as rich decides.
  std::optional<bool> use_color;
  color_system colors = color_system::automatic;
  double scale = 1.0;           // JAX's scale: the picture is 10 * scale lines tall
  std::size_t min_width = 9;    // narrowest box, in characters
  std::size_t max_width = 80;   // widest box, and the width of the console JAX draws on
};

namespace detail {

// matplotlib's colormaps["tab20b"], as JAX's _canonicalize_color reads it.
inline constexpr rgb tab20b[20] = {
    {0x39, 0x3B, 0x79}, {0x52, 0x54, 0xA3}, {0x6B, 0x6E, 0xCF}, {0x9C, 0x9E, 0xDE},
    {0x63, 0x79, 0x39}, {0x8C, 0xA2, 0x52}, {0xB5, 0xCF, 0x6B}, {0xCE, 0xDB, 0x9C},
    {0x8C, 0x6D, 0x31}, {0xBD, 0x9E, 0x39}, {0xE7, 0xBA, 0x52}, {0xE7, 0xCB, 0x94},
    {0x84, 0x3C, 0x39}, {0xAD, 0x49, 0x4A}, {0xD6, 0x61, 0x6B}, {0xE7, 0x96, 0x9C},
    {0x7B, 0x41, 0x73}, {0xA5, 0x51, 0x94}, {0xCE, 0x6D, 0xBD}, {0xDE, 0x9E, 0xD6}};

// JAX's make_color_iter: the k-th of n boxes (row-major) takes colormap(linspace(0, 1, n)[i])
// where i steps by n/2 (+1 when n is even) modulo n, so neighbours get distant colours.
inline std::vector<rgb> box_colours(std::size_t n) {
  std::vector<rgb> out;
  const double step = n > 1 ? 1.0 / static_cast<double>(n - 1) : 0.0;  // numpy.linspace
  std::size_t i = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const double value = (n > 1 && i == n - 1) ? 1.0 : static_cast<double>(i) * step;
    double x = value * 20.0;  // ListedColormap.__call__: x * N, N itself maps to N - 1
    if (x == 20.0) x = 19.0;
    out.push_back(tab20b[static_cast<std::size_t>(x)]);
    i = (i + n / 2 + (n % 2 == 0 ? 1 : 0)) % n;
  }
  return out;
}

// JAX's _get_text_color: black on light backgrounds, white on dark ones.
inline rgb text_colour(rgb bg) {
  return (bg.r * 0.299 + bg.g * 0.587 + bg.b * 0.114) > 186 ? rgb{0, 0, 0} : rgb{255, 255, 255};
}

// Whether `os` writes to a terminal: std::cout or std::cerr/std::clog on a tty.
inline bool writes_to_terminal(const std::ostream& os) {
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
inline bool use_colour(const std::ostream& os, const visualize_options& o) {
  if (o.use_color) return *o.use_color;
  if (std::getenv("NO_COLOR") != nullptr) return false;
  const char* term = std::getenv("TERM");
  if (term != nullptr && (std::string_view(term) == "dumb" || std::string_view(term) == "unknown"))
    return false;
  return writes_to_terminal(os);
}

inline ansi_palette palette(const visualize_options& o) {
  if (o.colors == color_system::truecolor) return ansi_palette::truecolor;
  if (o.colors == color_system::eight_bit) return ansi_palette::eight_bit;
  const char* colorterm = std::getenv("COLORTERM");
  const std::string_view ct = colorterm ? colorterm : "";
  return (ct == "truecolor" || ct == "24bit") ? ansi_palette::truecolor : ansi_palette::eight_bit;
}

inline void check_options(const visualize_options& o) {
  if (!(std::isfinite(o.scale) && o.scale >= 0.0 && o.scale <= 1000.0))
    throw usage_error("typeshard: visualize: scale is " + std::to_string(o.scale) +
                      "; pass a scale between 0 and 1000 (1 draws JAX's default size)");
  if (o.max_width < 1 || o.max_width > 100000)
    throw usage_error("typeshard: visualize: max_width is " + std::to_string(o.max_width) +
                      "; pass a console width between 1 and 100000 characters (JAX uses 80)");
}

// One distinct shard: where it sits in the grid of boxes, its share of each dimension, and
// the devices that hold it.
struct box_of_devices {
  double height = -1;  // fraction of the rows; negative for a 1-D array (one line)
  double width = 0;    // fraction of the columns
  std::vector<device_id> devices;
};

// The picture of Layout over `global`, whose mesh positions run on `devices` of `platform`:
// jax.debug.visualize_sharding, step for step.
template <class Layout, std::size_t Rank>
void draw_sharding(std::ostream& os, const shape<Rank>& global, std::span<const device_id> devices,
                   std::string_view platform, const visualize_options& o) {
  static_assert(Rank == 1 || Rank == 2);
  check_options(o);
  const bool colour = use_colour(os, o);

  // Share of dimension d held by a slice: its extent over the global extent (an empty
  // dimension, which JAX divides by, gives every shard an equal share instead).
  auto share = [&](std::size_t d, const slice& s) {
    return global[d] != 0 ? static_cast<double>(s.size()) / static_cast<double>(global[d])
                          : 1.0 / static_cast<double>(Layout::shards_along(d));
  };
  const std::size_t rows = Rank == 2 ? Layout::shards_along(0) : 1;
  const std::size_t cols = Layout::shards_along(Rank - 1);
  std::vector<box_of_devices> boxes(rows * cols);
  for (std::size_t p = 0; p < devices.size(); ++p) {
    const index_slices<Rank> ix = Layout::index(global, p);
    const std::size_t r = Rank == 2 ? Layout::shard_along(0, p) : 0;
    const std::size_t c = Layout::shard_along(Rank - 1, p);
    box_of_devices& b = boxes[r * cols + c];
    if constexpr (Rank == 2) b.height = share(0, ix[0]);
    b.width = share(Rank - 1, ix[Rank - 1]);
    b.devices.push_back(devices[p]);
  }

  // JAX: base_height = int(10 * scale), base_width = int(base_height * columns / rows);
  // a box is int(width_share * base_width * 2.5) wide (characters are 2.5 times as tall as
  // wide), clamped to [min_width, max_width], and int(height_share * base_height) tall.
  auto extent_or_one = [&](std::size_t d) { return static_cast<double>(std::max<std::size_t>(global[d], 1)); };
  const double base_height = std::trunc(10 * o.scale);
  const double aspect = (Rank == 2 ? extent_or_one(Rank - 1) : 1.0) / extent_or_one(0);
  const double base_width = std::trunc(base_height * aspect);
  // min(max(w, min_width), max_width) is max_width whenever min_width > max_width.
  const long long min_width = static_cast<long long>(std::min(o.min_width, o.max_width));
  const long long max_width = static_cast<long long>(o.max_width);

  std::string kind(platform);
  for (char& ch : kind) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  const std::vector<rgb> colours = box_colours(rows * cols);

  grid table(rows);
  for (std::size_t k = 0; k < boxes.size(); ++k) {
    box_of_devices& b = boxes[k];
    std::sort(b.devices.begin(), b.devices.end());
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
    const long long height = b.height < 0 ? 1 : static_cast<long long>(std::trunc(b.height * base_height));

    const auto [left, left_rem] = py_divmod(width - cell_len(cell.label) - 2, 2);
    const auto [top, top_rem] = py_divmod(height - 2, 2);
    const long long extra = colour ? 1 : 0;  // coloured boxes have no lines: pad instead
    cell.left = std::max(0LL, left + extra);
    cell.right = std::max(0LL, left + left_rem + extra);
    cell.top = std::max(0LL, top + extra);
    cell.bottom = std::max(0LL, top + top_rem + extra);
    if (colour) {
      cell.styled = true;
      cell.background = colours[k];
      cell.foreground = text_colour(colours[k]);
    }
    table[k / cols].push_back(std::move(cell));
  }
  write_lines(os, render_table(table, !colour, max_width), palette(o));
}

}  // namespace detail

// visualize_sharding<Spec>(os, mesh, shape): the picture of an array of that shape sharded
// by Spec over the device mesh, without the array (jax.debug.visualize_sharding).
template <spec_type Spec, mesh_type Mesh, std::size_t Rank>
void visualize_sharding(std::ostream& os, const device_mesh<Mesh>& m, const shape<Rank>& global,
                        const visualize_options& options = {}) {
  static_assert(detail::require<(Rank <= 2), diagnostic::visualize_needs_rank_1_or_2<Rank>>::value);
  if constexpr (Rank <= 2) {
    static_assert(detail::check_spec<Mesh, Spec, Rank>() || true);  // rule 1, one error
    if (m.get_backend().process_index() != 0) return;  // SPMD (MPI): drawn once, by process 0
    if constexpr (valid_spec<Mesh, Spec, Rank>)
      detail::draw_sharding<layout<Mesh, Spec, Rank>>(os, global, m.devices(),
                                                      m.get_backend().platform(), options);
  }
}

// visualize(os, array): jax.debug.visualize_array_sharding(array) written to `os`.
template <sharded_array_type Array>
void visualize(std::ostream& os, const Array& a, const visualize_options& options = {}) {
  using A = std::remove_cvref_t<Array>;
  static_assert(detail::require<(A::rank <= 2), diagnostic::visualize_needs_rank_1_or_2<A::rank>>::value);
  // SPMD (MPI): every process runs this line; the picture is drawn once, by process 0.
  if (a.device_mesh().get_backend().process_index() != 0) return;
  if constexpr (A::rank <= 2)
    detail::draw_sharding<typename A::layout_type>(os, a.extents(), a.device_mesh().devices(),
                                                   a.device_mesh().get_backend().platform(), options);
}

// visualize(array): the same, to std::cout.
template <sharded_array_type Array>
void visualize(const Array& a, const visualize_options& options = {}) {
  visualize(std::cout, a, options);
}

}  // namespace typeshard
