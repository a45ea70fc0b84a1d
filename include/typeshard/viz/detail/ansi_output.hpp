// typeshard/viz/detail/ansi_output.hpp: the lines of a rendered picture (rich_table.hpp)
// written out, coloured as rich's Style.render colours them on a truecolor or 256-colour
// terminal (Color.downgrade). Internal: do not rely on anything in detail/.
#pragma once

#include <algorithm>
#include <charconv>
#include <ios>
#include <ostream>
#include <string>
#include <vector>

#include "../../core/config.hpp"
#include "rich_table.hpp"

namespace typeshard::detail {

// ---- Colours ------------------------------------------------------------------------------

// Color.downgrade(EIGHT_BIT) of a truecolor colour: a grey ramp entry when the saturation
// is under 15%, else the nearest entry of the 6x6x6 cube.
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline int eight_bit_colour(rgb c) {
  const double r = c.r / 255.0, g = c.g / 255.0, b = c.b / 255.0;
  const double maxc = std::max({r, g, b}), minc = std::min({r, g, b});
  const double sumc = maxc + minc, rangec = maxc - minc;
  const double l = sumc / 2.0;
  double s = 0.0;  // colorsys.rgb_to_hls
  if (minc != maxc) s = l <= 0.5 ? rangec / sumc : rangec / (2.0 - sumc);
  if (s < 0.15) {
    const long long gray = py_round(l * 25.0);
    return gray == 0 ? 16 : gray == 25 ? 231 : static_cast<int>(231 + gray);
  }
  auto six = [](int v) { return v < 95 ? v / 95.0 : 1 + (v - 95) / 40.0; };
  return static_cast<int>(16 + 36 * py_round(six(c.r)) + 6 * py_round(six(c.g)) +
                          py_round(six(c.b)));
}

// n in decimal, at the end of `out`.
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline void append_number(std::string& out, long long n) {
  char digits[24];
  out.append(digits, std::to_chars(digits, digits + sizeof digits, n).ptr);
}

// Style(color=foreground, bgcolor=background).render: "\x1b[<fg>;<bg>m" text "\x1b[0m".
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline void append_styled(std::string& out, const segment& s, ansi_palette palette) {
  if (s.text.empty()) return;
  if (s.style == nullptr) {
    out.append(s.text);
    return;
  }
  auto colour = [&](rgb c, int base) {
    append_number(out, base);
    if (palette == ansi_palette::eight_bit) {
      out.append(";5;");
      append_number(out, eight_bit_colour(c));
      return;
    }
    out.append(";2;");
    append_number(out, c.r);
    out += ';';
    append_number(out, c.g);
    out += ';';
    append_number(out, c.b);
  };
  out.append("\x1b[");
  colour(s.style->foreground, 38);
  out += ';';
  colour(s.style->background, 48);
  out += 'm';
  out.append(s.text);
  out.append("\x1b[0m");
}

// The lines joined into one text and written at once (one stream operation, not one per
// segment and number: the stream's formatting is what costs a TU that draws).
TYPESHARD_DEFERRED
TYPESHARD_COLD
inline void write_lines(std::ostream& os, const std::vector<segment_line>& lines,
                        ansi_palette palette) {
  std::string out;
  for (const segment_line& line : lines) {
    for (const segment& s : line) append_styled(out, s, palette);
    out += '\n';
  }
  os.write(out.data(), static_cast<std::streamsize>(out.size()));
}

}  // namespace typeshard::detail
