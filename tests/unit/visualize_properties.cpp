// Properties of ts::visualize over random shapes (uneven and empty ones included), meshes,
// specs, device orders and options: the things JAX's own pictures cannot show, since JAX
// draws only even shards. visualize_golden.cpp checks byte equality with JAX.
//
// Every test prints its seed; rerun one with TYPESHARD_TEST_SEED=<seed>.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

namespace {

std::uint64_t test_seed() {
  if (const char* s = std::getenv("TYPESHARD_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return std::random_device{}();
}

// A line split into its characters (UTF-8 code points), so box columns can be indexed.
std::vector<std::string> characters(const std::string& line) {
  std::vector<std::string> out;
  for (unsigned char c : line) {
    if ((c & 0xC0) != 0x80) out.emplace_back();
    out.back() += static_cast<char>(c);
  }
  return out;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The text with its ANSI escape sequences removed, and the background colours they set.
struct stripped_text {
  std::string text;
  std::set<std::string> backgrounds;
  bool unstyled_text = false;  // characters outside any escape sequence
};
stripped_text strip_ansi(const std::string& s) {
  stripped_text out;
  bool styled = false;
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] == '\x1b') {
      const std::size_t m = s.find('m', i);
      const std::string codes = s.substr(i + 2, m - i - 2);
      styled = codes != "0";
      const std::size_t bg = codes.find(";48;");
      if (bg != std::string::npos) out.backgrounds.insert(codes.substr(bg + 4));
      i = m + 1;
    } else {
      if (!styled && s[i] != '\n') out.unstyled_text = true;
      out.text += s[i++];
    }
  }
  return out;
}

// "CPU 0,1"-style labels in reading order.
std::vector<std::string> labels_in(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t i = text.find("CPU "); i != std::string::npos; i = text.find("CPU ", i + 1)) {
    std::size_t j = i + 4;
    while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == ','))
      ++j;
    out.push_back(text.substr(i, j - i));
  }
  return out;
}

// The geometry of an uncoloured picture: every line the same width, column widths from the
// top border, row heights from the lines between borders.
struct box_geometry {
  std::vector<std::size_t> column_widths;
  std::vector<std::size_t> row_heights;
};
box_geometry parse_boxes(const std::vector<std::string>& lines) {
  box_geometry g;
  REQUIRE(lines.size() >= 3);
  const std::vector<std::string> top = characters(lines.front());
  REQUIRE(top.front() == "\u250c");
  REQUIRE(top.back() == "\u2510");
  std::size_t width = 0;
  for (std::size_t i = 1; i < top.size(); ++i) {
    if (top[i] == "\u252c" || top[i] == "\u2510") {
      g.column_widths.push_back(width);
      width = 0;
    } else {
      REQUIRE(top[i] == "\u2500");
      ++width;
    }
  }
  std::size_t height = 0;
  for (std::size_t l = 1; l < lines.size(); ++l) {
    const std::vector<std::string> chars = characters(lines[l]);
    REQUIRE(chars.size() == top.size());  // a rectangle
    if (chars.front() == "\u251c" || chars.front() == "\u2514") {
      g.row_heights.push_back(height);
      height = 0;
    } else {
      REQUIRE(chars.front() == "\u2502");
      ++height;
    }
  }
  REQUIRE(characters(lines.back()).front() == "\u2514");
  return g;
}

// What the picture of `a` must show, from its addressable shards (not from the layout
// arithmetic visualize uses): the distinct index slices in row-major order with their
// devices, and each row's and column's extent.
struct expected_picture {
  std::vector<std::string> labels;
  std::vector<std::size_t> row_extents, column_extents;
};
template <class Array>
expected_picture expected_from_shards(const Array& a) {
  constexpr std::size_t rank = Array::rank;
  std::map<std::pair<std::size_t, std::size_t>, std::set<std::size_t>> holders;  // by starts
  std::map<std::size_t, std::size_t> rows, cols;                                // start -> extent
  for (const auto& s : a.addressable_shards()) {
    const std::size_t r = rank == 2 ? s.index[0].start : 0;
    const std::size_t c = s.index[rank - 1].start;
    holders[{r, c}].insert(s.device.id);
    rows[r] = rank == 2 ? s.index[0].size() : 1;
    cols[c] = s.index[rank - 1].size();
  }
  expected_picture e;
  for (const auto& [start, ids] : holders) {
    std::string label = "CPU ";
    for (std::size_t id : ids) label += (label.size() > 4 ? "," : "") + std::to_string(id);
    e.labels.push_back(label);
  }
  for (const auto& [start, extent] : rows) e.row_extents.push_back(extent);
  for (const auto& [start, extent] : cols) e.column_extents.push_back(extent);
  return e;
}

// Larger shards never get smaller boxes, equal shards get equal boxes.
void check_proportional(const std::vector<std::size_t>& extents,
                        const std::vector<std::size_t>& sizes) {
  REQUIRE(extents.size() == sizes.size());
  for (std::size_t i = 0; i < extents.size(); ++i)
    for (std::size_t j = 0; j < extents.size(); ++j) {
      INFO("extents " << extents[i] << " and " << extents[j] << ", boxes " << sizes[i] << " and "
                      << sizes[j]);
      if (extents[i] > extents[j]) CHECK(sizes[i] >= sizes[j]);
      if (extents[i] == extents[j]) CHECK(sizes[i] == sizes[j]);
    }
}

template <class Mesh, class Spec, std::size_t Rank>
struct combo {
  using mesh = Mesh;
  using spec = Spec;
  static constexpr std::size_t rank = Rank;
};

using m1 = ts::mesh<ts::axis("x", 1)>;
using m8 = ts::mesh<ts::axis("x", 8)>;
using m2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using m2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;
using m2x2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2), ts::axis("z", 2)>;

using combos = std::tuple<
    combo<m8, ts::spec<"x">, 1>, combo<m8, ts::spec<ts::none>, 1>, combo<m8, ts::spec<"x">, 2>,
    combo<m8, ts::spec<ts::none, "x">, 2>, combo<m2x2, ts::spec<"x", "y">, 2>,
    combo<m2x2, ts::spec<"y", "x">, 2>, combo<m2x2, ts::spec<"x", ts::none>, 2>,
    combo<m2x2, ts::spec<ts::none, "y">, 2>, combo<m2x2, ts::spec<>, 2>,
    combo<m2x2, ts::spec<ts::axes("x", "y")>, 1>, combo<m2x2, ts::spec<ts::none, ts::axes("y", "x")>, 2>,
    combo<m2x4, ts::spec<"x", "y">, 2>, combo<m2x4, ts::spec<ts::axes("y", "x"), ts::none>, 2>,
    combo<m2x2x2, ts::spec<"x", ts::axes("y", "z")>, 2>, combo<m2x2x2, ts::spec<ts::axes("z", "x"), "y">, 2>,
    combo<m1, ts::spec<>, 2>, combo<m1, ts::spec<>, 1>>;

template <class F>
void for_each_combo(F&& f) {
  std::apply([&](auto... c) { (f(c), ...); }, combos{});
}

template <class C>
ts::device_mesh<typename C::mesh> random_mesh(ts::cpu_devices& devices, std::mt19937_64& rng) {
  std::vector<std::size_t> order(8);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), rng);
  order.resize(C::mesh::size);
  return {devices, order};
}

template <class C>
ts::shape<C::rank> random_shape(std::mt19937_64& rng, std::size_t max_extent) {
  ts::shape<C::rank> shape{};
  for (auto& e : shape) e = std::uniform_int_distribution<std::size_t>(0, max_extent)(rng);
  return shape;
}

template <class C>
auto random_array(ts::cpu_devices& devices, std::mt19937_64& rng, std::size_t max_extent) {
  const auto m = random_mesh<C>(devices, rng);
  return ts::device_put<typename C::spec>(m, ts::host_tensor<int, C::rank>(random_shape<C>(rng, max_extent)));
}

// Whether the picture fits the console without squeezing columns (rich would then wrap
// labels): at most twice as wide as tall.
template <class Array>
bool moderate_aspect(const Array& a) {
  if constexpr (Array::rank == 2) return a.extent(1) <= 2 * std::max<std::size_t>(a.extent(0), 1);
  return true;
}

template <class Array>
bool every_shard_nonempty(const Array& a) {
  for (const auto& s : a.addressable_shards())
    for (const auto& sl : s.index)
      if (sl.size() == 0) return false;
  return true;
}

std::string draw(const auto& a, const ts::visualize_options& o) {
  std::ostringstream os;
  ts::visualize(os, a, o);
  return os.str();
}

}  // namespace

TEST_CASE("visualize: boxes are a grid of the shards, labelled by their devices, in proportion",
          "[visualize][property]") {
  const std::uint64_t seed = test_seed();
  INFO("seed " << seed << " (rerun with TYPESHARD_TEST_SEED=" << seed << ")");
  std::mt19937_64 rng(seed);
  ts::cpu_devices devices{8};
  for_each_combo([&](auto c) {
    using C = decltype(c);
    for (int trial = 0; trial < 25; ++trial) {
      // Extents up to 40: uneven shards; aspect ratios stay below the console's limit.
      const auto a = random_array<C>(devices, rng, 40);
      if (!moderate_aspect(a)) continue;
      INFO(C::mesh::to_string() << " " << C::spec::to_string() << " extents "
                                << ts::to_string(a.extents()));
      const std::string text = draw(a, {.use_color = false});
      INFO(text);
      const box_geometry g = parse_boxes(split_lines(text));
      const expected_picture e = expected_from_shards(a);
      using layout = typename std::remove_cvref_t<decltype(a)>::layout_type;
      CHECK(g.column_widths.size() == layout::shards_along(C::rank - 1));
      CHECK(g.row_heights.size() == (C::rank == 2 ? layout::shards_along(0) : 1));
      CHECK(text.find('\x1b') == std::string::npos);
      if (every_shard_nonempty(a)) {  // else several empty shards share a start index
        CHECK(labels_in(text) == e.labels);
        check_proportional(e.column_extents, g.column_widths);
        if constexpr (C::rank == 2) check_proportional(e.row_extents, g.row_heights);
      }
      // The layout alone draws the same picture as the array.
      std::ostringstream os;
      ts::visualize_sharding<typename C::spec>(os, a.device_mesh(), a.extents(), {.use_color = false});
      CHECK(os.str() == text);
    }
  });
}

TEST_CASE("visualize: coloured pictures have no lines, one colour per box, the same labels",
          "[visualize][property]") {
  const std::uint64_t seed = test_seed();
  INFO("seed " << seed << " (rerun with TYPESHARD_TEST_SEED=" << seed << ")");
  std::mt19937_64 rng(seed);
  ts::cpu_devices devices{8};
  for_each_combo([&](auto c) {
    using C = decltype(c);
    for (int trial = 0; trial < 10; ++trial) {
      const auto a = random_array<C>(devices, rng, 40);
      if (!moderate_aspect(a)) continue;
      INFO(C::mesh::to_string() << " " << C::spec::to_string() << " extents "
                                << ts::to_string(a.extents()));
      for (auto palette : {ts::color_system::truecolor, ts::color_system::eight_bit}) {
        const std::string text = draw(a, {.use_color = true, .colors = palette});
        const stripped_text s = strip_ansi(text);
        INFO(s.text);
        // Every character has its box's colours. (Not so when rich has to squeeze columns
        // and labels wrap to different heights: it pads rows with unstyled blanks. Empty
        // shards, drawn min_width wide, can force that.)
        if (every_shard_nonempty(a)) CHECK_FALSE(s.unstyled_text);
        CHECK(s.text.find("\u2502") == std::string::npos);
        const std::size_t boxes = std::remove_cvref_t<decltype(a)>::layout_type::distinct_shards();
        // JAX walks linspace(0, 1, n) in steps of n/2 (+1 if n is even) modulo n, so it
        // visits n / gcd(n, step) of the n colours: all of them, except when n = 2 mod 4,
        // where it visits half (two boxes share one colour: JAX's quirk, kept for byte
        // equality). tab20b has 20 colours; these meshes have at most 8 boxes.
        const std::size_t step = boxes / 2 + (boxes % 2 == 0 ? 1 : 0);
        const std::size_t colours = boxes / std::gcd(boxes, step);
        if (palette == ts::color_system::truecolor) CHECK(s.backgrounds.size() == colours);
        const std::vector<std::string> lines = split_lines(s.text);
        for (const std::string& line : lines) CHECK(characters(line).size() == characters(lines[0]).size());
        if (every_shard_nonempty(a)) CHECK(labels_in(s.text) == expected_from_shards(a).labels);
      }
    }
  });
}

TEST_CASE("visualize: any shape and options draw something that fits the console",
          "[visualize][property]") {
  const std::uint64_t seed = test_seed();
  INFO("seed " << seed << " (rerun with TYPESHARD_TEST_SEED=" << seed << ")");
  std::mt19937_64 rng(seed);
  ts::cpu_devices devices{8};
  for_each_combo([&](auto c) {
    using C = decltype(c);
    for (int trial = 0; trial < 60; ++trial) {
      // Extreme aspect ratios, empty dimensions, narrow consoles: columns collapse and
      // labels wrap or end in "…", as in rich; nothing throws.
      // The layout alone (visualize_sharding): no data for extents this large.
      const auto m = random_mesh<C>(devices, rng);
      const ts::shape<C::rank> shape = random_shape<C>(rng, trial % 2 ? 100000 : 3);
      ts::visualize_options o;
      o.use_color = trial % 3 == 0;
      o.colors = ts::color_system::truecolor;
      o.scale = std::uniform_real_distribution<double>(0.0, 3.0)(rng);
      o.min_width = std::uniform_int_distribution<std::size_t>(0, 30)(rng);
      o.max_width = std::uniform_int_distribution<std::size_t>(1, 120)(rng);
      INFO(C::mesh::to_string() << " " << C::spec::to_string() << " extents "
                                << ts::to_string(shape) << " scale " << o.scale
                                << " min_width " << o.min_width << " max_width " << o.max_width);
      std::ostringstream os;
      REQUIRE_NOTHROW(ts::visualize_sharding<typename C::spec>(os, m, shape, o));
      const std::vector<std::string> lines = split_lines(strip_ansi(os.str()).text);
      CHECK_FALSE(lines.empty());
      for (const std::string& line : lines) CHECK(characters(line).size() <= o.max_width);
    }
  });
}

TEST_CASE("visualize: colours follow the terminal unless the caller decides", "[visualize]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<m2x2> m{devices};
  const auto a = ts::device_put<ts::spec<"x", "y">>(m, ts::host_tensor<float, 2>({4, 4}));
  // A string stream is never a terminal: automatic means boxes, as JAX's output to a pipe.
  CHECK(draw(a, {}) == draw(a, {.use_color = false}));
  CHECK(draw(a, {}).find('\x1b') == std::string::npos);
  CHECK(draw(a, {.use_color = true}).find("\x1b[") != std::string::npos);
  CHECK(draw(a, {.use_color = true, .colors = ts::color_system::truecolor}).find("48;2;") !=
        std::string::npos);
  CHECK(draw(a, {.use_color = true, .colors = ts::color_system::eight_bit}).find("48;5;") !=
        std::string::npos);
}

TEST_CASE("visualize: options out of range are a usage_error that says so", "[visualize]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<m2x2> m{devices};
  std::ostringstream os;
  const ts::shape<2> shape{4, 4};
  for (double scale : {-1.0, std::numeric_limits<double>::quiet_NaN(), 1e9}) {
    INFO("scale " << scale);
    ts::visualize_options o;
    o.scale = scale;
    CHECK_THROWS_WITH(ts::visualize_sharding<ts::spec<"x">>(os, m, shape, o),
                      Catch::StartsWith("typeshard: visualize: scale is") &&
                          Catch::Contains("between 0 and 1000"));
  }
  ts::visualize_options no_width;
  no_width.max_width = 0;
  CHECK_THROWS_AS(ts::visualize_sharding<ts::spec<"x">>(os, m, shape, no_width), ts::usage_error);
  CHECK(os.str().empty());  // nothing half-drawn
}

TEST_CASE("visualize: scale and widths change the picture as in JAX", "[visualize]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<m2x2> m{devices};
  const ts::shape<2> shape{8, 8};
  // (Options set one by one: g++ 12 warns about designated initializers that skip the
  // first member.)
  auto geometry = [&](double scale, std::size_t min_width, std::size_t max_width) {
    ts::visualize_options o;
    o.use_color = false;
    o.scale = scale;
    o.min_width = min_width;
    o.max_width = max_width;
    std::ostringstream os;
    ts::visualize_sharding<ts::spec<"x", "y">>(os, m, shape, o);
    return parse_boxes(split_lines(os.str()));
  };
  // Default: each box int(0.5 * 10 * 2.5) = 12 wide less 2 for the label's padding, and
  // int(0.5 * 10) = 5 tall less 1 (JAX's padding arithmetic).
  CHECK(geometry(1, 9, 80).column_widths == std::vector<std::size_t>{10, 10});
  CHECK(geometry(1, 9, 80).row_heights == std::vector<std::size_t>{4, 4});
  CHECK(geometry(2, 9, 80).row_heights == std::vector<std::size_t>{9, 9});
  CHECK(geometry(2, 9, 80).column_widths == std::vector<std::size_t>{23, 23});
  CHECK(geometry(1, 30, 80).column_widths == std::vector<std::size_t>{28, 28});
  // A console 9 wide: rich squeezes both columns into the 6 cells between the lines.
  CHECK(geometry(1, 9, 9).column_widths == std::vector<std::size_t>{3, 3});
}
