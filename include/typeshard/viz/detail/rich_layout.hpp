// typeshard/viz/detail/rich_layout.hpp: the cells, segments and widths of the table that
// rich_table.hpp renders: rich's Measurement.get and Table._calculate_column_widths,
// re-implemented under rich's own names (see rich_table.hpp). Internal: do not rely on
// anything in detail/.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../../core/config.hpp"

namespace typeshard::detail {

struct rgb {
  std::uint8_t r = 0, g = 0, b = 0;
  friend bool operator==(const rgb&, const rgb&) = default;
};

// Which escape sequences a coloured picture uses: rich's ColorSystem.TRUECOLOR (24-bit
// "\x1b[48;2;r;g;bm") or EIGHT_BIT (the 256-colour palette, "\x1b[48;5;nm").
enum class ansi_palette { truecolor, eight_bit };

// One cell: Padding(Align(label, "center"), (top, right, bottom, left), style=colours).
// Paddings are >= 0 (JAX clamps them before building the Padding).
struct padded_label {
  std::string label;  // ASCII, one line
  long long top = 0, right = 0, bottom = 0, left = 0;
  bool styled = false;  // whether the cell has colours (background and text)
  rgb background{};
  rgb foreground{};
};

// The text of a picture's segments. A segment views its text here instead of owning a
// string, so that lines of segments are vectors of plain values: copying, inserting and
// cropping them is memmove, and the drawing, compiled in every TU that draws (header-only),
// costs g++ less than with vectors of strings. Each text is held by pointer, so the
// views stay valid for the picture's lifetime (a moved short string would move its
// characters).
struct picture_text {
  std::vector<std::unique_ptr<std::string>> texts;
};

// `text` kept in the picture; its view. (Functions, not members: a member of a class that is
// not a template is compiled by every TU that includes this header; these, only by one that
// draws.)
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline std::string_view keep(picture_text& picture, std::string text) {
  picture.texts.push_back(std::make_unique<std::string>(std::move(text)));
  return *picture.texts.back();
}
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline std::string_view spaces(picture_text& picture, long long n) {
  return keep(picture, std::string(static_cast<std::size_t>(std::max(0LL, n)), ' '));
}

// A run of text in one style (rich's Segment): `style` is the cell whose colours it takes,
// or null for unstyled text (borders, and the blanks rich pads rows with).
struct segment {
  std::string_view text;
  const padded_label* style = nullptr;
};
using segment_line = std::vector<segment>;

// line += more. (Loops of push_back, here and where a line is cropped, rather than
// vector::insert and resize: fewer vector templates for every TU that draws to compile.)
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline void append_segments(segment_line& line, const segment_line& more) {
  for (const segment& s : more) line.push_back(segment{s});
}

// Display width of UTF-8 text whose characters are one cell each (ASCII, box drawing).
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline long long cell_len(std::string_view s) {
  long long n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// Python's divmod for a possibly negative numerator and a positive divisor.
struct quotient_remainder {
  long long quotient, remainder;
};
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline quotient_remainder py_divmod(long long a, long long b) {
  long long q = a / b, r = a % b;
  if (r != 0 && r < 0) {
    --q;
    r += b;
  }
  return {q, r};
}

// Python's round(): to nearest, ties to even (the default floating-point rounding mode).
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline long long py_round(double x) { return static_cast<long long>(std::nearbyint(x)); }

// ---- Measurement ----------------------------------------------------------------------

struct measurement {
  long long minimum = 0, maximum = 0;

  measurement normalize() const {
    const long long mn = std::min(std::max(0LL, minimum), maximum);
    return {std::max(0LL, mn), std::max(0LL, std::max(mn, maximum))};
  }
  measurement with_maximum(long long width) const {
    return {std::min(minimum, width), std::min(maximum, width)};
  }
};

// Measurement.get: the protocol around every renderable's own __rich_measure__.
template <class Measure>
TYPESHARD_COLD
measurement measurement_get(long long max_width, Measure&& own) {
  if (max_width < 1) return {0, 0};
  const measurement m = own().normalize().with_maximum(max_width);
  if (m.maximum < 1) return {0, 0};
  return m.normalize();
}

// Text.__rich_measure__ of a one-line label: the longest word, the whole line.
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline measurement measure_text(std::string_view text, long long max_width) {
  return measurement_get(max_width, [&] {
    long long longest_word = 0, word = 0;
    for (char c : text) {
      word = (c == ' ') ? 0 : word + 1;
      longest_word = std::max(longest_word, word);
    }
    const long long whole = cell_len(text);
    return measurement{longest_word > 0 ? longest_word : whole, whole};
  });
}

// Padding.__rich_measure__ (around Align, which measures as its text).
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline measurement measure_cell(const padded_label& c, long long max_width) {
  return measurement_get(max_width, [&] {
    const long long extra = c.left + c.right;
    if (max_width - extra < 1) return measurement{max_width, max_width};
    const measurement inner = measure_text(c.label, max_width);
    return measurement{inner.minimum + extra, inner.maximum + extra}.with_maximum(max_width);
  });
}

// ---- Table column widths ----------------------------------------------------------------

// The table's cells, row by row in one vector (not a vector of rows: one vector type fewer
// for a TU that draws to compile).
struct grid {
  std::size_t rows = 0, columns = 0;
  std::vector<padded_label> cells;  // rows * columns, row-major

  const padded_label& at(std::size_t row, std::size_t column) const {
    return cells[row * columns + column];
  }
};

// Table._measure_column.
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline measurement measure_column(const grid& table, std::size_t column, long long max_width) {
  if (max_width < 1) return {0, 0};
  long long mn = 0, mx = 0;
  for (std::size_t r = 0; r < table.rows; ++r) {
    const measurement m = measure_cell(table.at(r, column), max_width);
    mn = std::max(mn, m.minimum);
    mx = std::max(mx, m.maximum);
  }
  if (table.rows == 0) mx = max_width;
  return measurement{table.rows == 0 ? 1 : mn, mx}.with_maximum(max_width);
}

// _ratio.ratio_reduce: take `total` away from `values`, in proportion to `ratios`, at most
// `maximums` from each.
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline std::vector<long long> ratio_reduce(long long total, std::vector<long long> ratios,
                                           const std::vector<long long>& maximums,
                                           const std::vector<long long>& values) {
  long long total_ratio = 0;
  for (std::size_t i = 0; i < ratios.size(); ++i) {
    if (maximums[i] == 0) ratios[i] = 0;
    total_ratio += ratios[i];
  }
  if (total_ratio == 0) return values;
  long long remaining = total;
  std::vector<long long> out = values;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (ratios[i] != 0 && total_ratio > 0) {
      const long long distributed = std::min(
          maximums[i], py_round(static_cast<double>(ratios[i] * remaining) /
                                static_cast<double>(total_ratio)));
      out[i] -= distributed;
      remaining -= distributed;
      total_ratio -= ratios[i];
    }
  }
  return out;
}

TYPESHARD_DEFERRED
TYPESHARD_COLD
inline long long sum(const std::vector<long long>& v) {
  long long s = 0;
  for (long long x : v) s += x;
  return s;
}

// Table._collapse_widths (every column may wrap): shrink the widest columns first.
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline std::vector<long long> collapse_widths(std::vector<long long> widths, long long max_width) {
  long long total = sum(widths);
  long long excess = total - max_width;
  while (total != 0 && excess > 0) {
    const long long max_column = *std::max_element(widths.begin(), widths.end());
    long long second_max_column = 0;
    for (long long w : widths)
      if (w != max_column) second_max_column = std::max(second_max_column, w);
    const long long difference = max_column - second_max_column;
    std::vector<long long> ratios;
    for (long long w : widths) ratios.push_back(w == max_column ? 1 : 0);
    if (difference == 0) break;
    const std::vector<long long> max_reduce(widths.size(), std::min(excess, difference));
    widths = ratio_reduce(excess, ratios, max_reduce, widths);
    total = sum(widths);
    excess = total - max_width;
  }
  return widths;
}

// Table._calculate_column_widths (expand False, no fixed widths).
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline std::vector<long long> column_widths(const grid& table, long long max_width) {
  const std::size_t columns = table.columns;
  std::vector<long long> widths;
  for (std::size_t c = 0; c < columns; ++c) {
    const long long m = measure_column(table, c, max_width).maximum;
    widths.push_back(m != 0 ? m : 1);
  }
  if (sum(widths) > max_width) {
    widths = collapse_widths(widths, max_width);
    if (sum(widths) > max_width) {  // last resort, reduce columns evenly
      const std::vector<long long> ones(widths.size(), 1);
      widths = ratio_reduce(sum(widths) - max_width, ones, widths, widths);
    }
    for (std::size_t c = 0; c < columns; ++c)
      widths[c] = measure_column(table, c, std::max(0LL, widths[c])).maximum;
  }
  return widths;
}

}  // namespace typeshard::detail
