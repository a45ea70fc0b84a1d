// typeshard/viz/detail/rich_table.hpp: the table that jax.debug.visualize_array_sharding draws.
// Internal: do not rely on anything in detail/.
//
// JAX draws its pictures with the Python library `rich`: a rich.table.Table (padding 0, no
// header, pad_edge False; box SQUARE with lines between rows when uncoloured, no box when
// coloured) whose cells are Padding(Align(label, "center"), (top, right, bottom, left)).
// This header re-implements exactly the parts of rich that such a table goes through, step
// by step and under rich's own names, so that typeshard's output is byte for byte JAX's:
//   - Measurement.get of Text, Align and Padding (a cell's minimum and maximum width);
//   - Table._calculate_column_widths, _collapse_widths and ratio_reduce (how columns shrink
//     when the table is wider than the console);
//   - Text.wrap with _wrap.divide_line (how a label wraps, or ends in "…", in a narrow column);
//   - Padding and Align rendering, Segment.adjust_line_length (crop / pad to a width);
//   - Style.render for truecolor and 256-colour terminals (Color.downgrade): in
//     ansi_output.hpp, which writes the lines this header renders.
// Like rich, a column narrower than its padding draws its box without the label.
// tests/unit/visualize_*.cpp compare the result with output captured from JAX.
#pragma once

#include <algorithm>
#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "../../core/config.hpp"
#include "rich_layout.hpp"

namespace typeshard::detail {

// ---- Rendering ----------------------------------------------------------------------------

// The first `cells` cells of s, padded with spaces to `cells` (set_cell_size, for text of
// one-cell characters), then `tail`.
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline std::string_view take_cells(picture_text& text, std::string_view s, long long cells,
                                   std::string_view tail = {}) {
  std::size_t i = 0;
  long long n = 0;
  while (i < s.size()) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (n == cells) break;
      ++n;
    }
    ++i;
  }
  std::string out(s.substr(0, i));
  out.append(static_cast<std::size_t>(cells - n), ' ');
  out.append(tail);
  return keep(text, std::move(out));
}

// Segment.adjust_line_length: crop to `length` cells, or pad with spaces in `pad_style`.
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline void adjust_line_length(picture_text& text, segment_line& line, long long length,
                               bool pad, const padded_label* pad_style = nullptr) {
  long long line_length = 0;
  for (const segment& s : line) line_length += cell_len(s.text);
  if (line_length <= length) {
    if (pad && line_length < length)
      line.push_back({spaces(text, length - line_length), pad_style});
    return;
  }
  long long used = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const long long n = cell_len(line[i].text);
    if (used + n >= length) {  // the segment that reaches `length`: cropped, the rest dropped
      line[i].text = take_cells(text, line[i].text, length - used);
      while (line.size() > i + 1) line.pop_back();
      return;
    }
    used += n;
  }
}

// _wrap.divide_line without fold (a Table column's overflow is "ellipsis"): where to break
// `text` so that each word starts a line when it does not fit on the current one.
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline std::vector<std::size_t> divide_line(std::string_view text, long long width) {
  std::vector<std::size_t> breaks;
  long long cell_offset = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {  // words: \s*\S+\s*
    const std::size_t start = pos;
    std::size_t end = pos;
    while (end < text.size() && text[end] == ' ') ++end;
    if (end == text.size()) break;
    while (end < text.size() && text[end] != ' ') ++end;
    const long long word_length = static_cast<long long>(end - start);  // word.rstrip()
    while (end < text.size() && text[end] == ' ') ++end;
    const long long with_space = static_cast<long long>(end - start);
    if (width - cell_offset >= word_length) {
      cell_offset += with_space;
    } else if (word_length > width) {  // too long for any line: it gets its own, cropped
      if (start != 0) breaks.push_back(start);
      cell_offset = with_space;
    } else if (cell_offset != 0 && start != 0) {
      breaks.push_back(start);
      cell_offset = with_space;
    }
    pos = end;
  }
  return breaks;
}

// Text.wrap(width) with justify "left" and overflow "ellipsis": lines of exactly `width`
// cells, one unstyled segment each; a line too long ends in "…". (Segments rather than
// string views: one vector type fewer for a TU that draws to compile.)
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline segment_line wrap_text(picture_text& text, std::string_view label, long long width) {
  std::vector<std::size_t> breaks = divide_line(label, width);
  breaks.push_back(label.size());
  segment_line lines;
  std::size_t begin = 0;
  for (const std::size_t end : breaks) {
    std::string_view line = label.substr(begin, end - begin);
    begin = end;
    if (static_cast<long long>(line.size()) > width) {  // rstrip_end
      std::size_t excess = line.size() - static_cast<std::size_t>(width);
      while (excess > 0 && !line.empty() && line.back() == ' ') {
        line.remove_suffix(1);
        --excess;
      }
    }
    if (static_cast<long long>(line.size()) > width)  // truncate(width, "ellipsis", pad=True)
      lines.push_back({take_cells(text, line, width - 1, "\u2026")});
    else
      lines.push_back({take_cells(text, line, width)});
  }
  return lines;
}

// Padding(Align(label, "center")) rendered `width` cells wide: its lines, each `width` cells.
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline std::vector<segment_line> render_cell(picture_text& text, const padded_label& c,
                                             long long width) {
  const padded_label* style = c.styled ? &c : nullptr;
  const long long inner = std::max(0LL, width - c.left - c.right);
  // Align: the label takes at most `inner` cells and is centred in the rest.
  const long long text_width = measure_text(c.label, inner).maximum;
  // rich renders nothing at all in less than one cell (Console.render returns at once).
  const segment_line text_lines =
      text_width > 0 ? wrap_text(text, c.label, text_width) : segment_line{};
  const long long excess = inner - text_width;
  const long long align_left = excess > 0 ? excess / 2 : 0;
  const long long align_right = excess > 0 ? excess - align_left : 0;

  std::vector<segment_line> out;
  if (width < 1) return out;
  const std::string_view blank = spaces(text, width);
  for (long long i = 0; i < c.top; ++i) out.push_back(segment_line{{blank, style}});
  for (const segment& t : text_lines) {
    segment_line aligned;
    if (align_left > 0) aligned.push_back({spaces(text, align_left), style});
    aligned.push_back({t.text, style});
    if (align_right > 0) aligned.push_back({spaces(text, align_right), style});
    adjust_line_length(text, aligned, inner, true, style);  // Padding's render_lines
    segment_line line;
    if (c.left > 0) line.push_back({spaces(text, c.left), style});
    append_segments(line, aligned);
    if (c.right > 0) line.push_back({spaces(text, c.right), style});
    out.push_back(std::move(line));
  }
  for (long long i = 0; i < c.bottom; ++i) out.push_back(segment_line{{blank, style}});
  for (segment_line& line : out) adjust_line_length(text, line, width, true);  // the Table's
  return out;
}

// Box characters of rich.box.SQUARE.
struct square_box {
  static constexpr std::string_view horizontal = "\u2500", vertical = "\u2502";
  static constexpr std::string_view top[3] = {"\u250c", "\u252c", "\u2510"};
  static constexpr std::string_view row[3] = {"\u251c", "\u253c", "\u2524"};
  static constexpr std::string_view bottom[3] = {"\u2514", "\u2534", "\u2518"};
};

TYPESHARD_DEFERRED
TYPESHARD_COLD
inline segment_line border_line(picture_text& text, const std::string_view (&parts)[3],
                                const std::vector<long long>& widths) {
  std::string s(parts[0]);
  for (std::size_t c = 0; c < widths.size(); ++c) {
    if (c) s += parts[1];
    for (long long i = 0; i < widths[c]; ++i) s += square_box::horizontal;
  }
  s += parts[2];
  return {{keep(text, std::move(s)), nullptr}};
}

// Table(show_header=False, padding=0, pad_edge=False, box=SQUARE and show_lines=True when
// `boxed`, else box=None) rendered on a console `console_width` cells wide: its lines,
// cropped to the console's width as Console.print does. Their text lives in `text`.
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline std::vector<segment_line> render_table(picture_text& text, const grid& table, bool boxed,
                                              long long console_width) {
  std::vector<segment_line> out;
  if (table.rows == 0 || table.columns == 0) return out;
  const std::size_t columns = table.columns;
  const long long extra = boxed ? static_cast<long long>(columns) + 1 : 0;
  const std::vector<long long> widths = column_widths(table, console_width - extra);

  if (boxed) out.push_back(border_line(text, square_box::top, widths));
  // One row's cells, rendered: cell c's lines are lines[first[c]] to lines[first[c + 1]].
  std::vector<segment_line> lines;
  std::vector<std::size_t> first(columns + 1);
  for (std::size_t r = 0; r < table.rows; ++r) {
    std::size_t height = 1;
    lines.clear();
    for (std::size_t c = 0; c < columns; ++c) {
      first[c] = lines.size();
      for (segment_line& l : render_cell(text, table.at(r, c), widths[c]))
        lines.push_back(std::move(l));
      height = std::max(height, lines.size() - first[c]);
    }
    first[columns] = lines.size();
    for (std::size_t i = 0; i < height; ++i) {
      segment_line line;
      if (boxed) line.push_back({square_box::vertical, nullptr});
      for (std::size_t c = 0; c < columns; ++c) {
        if (i < first[c + 1] - first[c])
          append_segments(line, lines[first[c] + i]);
        else  // vertical "top": blank lines below
          line.push_back({spaces(text, widths[c]), nullptr});
        if (boxed) line.push_back({square_box::vertical, nullptr});
      }
      out.push_back(std::move(line));
    }
    if (boxed)
      out.push_back(
          border_line(text, r + 1 < table.rows ? square_box::row : square_box::bottom, widths));
  }
  for (segment_line& line : out) adjust_line_length(text, line, console_width, false);
  return out;
}

}  // namespace typeshard::detail
