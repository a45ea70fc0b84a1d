// examples/support/print.hpp: what the examples share: numpy-style printing, a mismatch
// counter, section headers, argument parsing and a median timer.
//
// Not part of the library: the seeds print arrays with numpy, so the examples print them the
// same way, to be compared with the notebooks line by line.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <iostream>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace examples {

namespace ts = typeshard;

// ---- numpy's printing ---------------------------------------------------------------------

// The elements of a row formatted as numpy does by default: integers right-aligned to a
// common width; floats in numpy's "maxprec" mode (at most 8 decimals, trailing zeros dropped
// but each column padded on the right to the longest fraction, so "0." and "0.25" line up).
template <class T>
std::vector<std::string> numpy_cells(std::span<const T> values) {
  std::vector<std::string> cells;
  if constexpr (std::is_floating_point_v<T>) {
    std::vector<std::string> whole, fraction;
    std::size_t whole_width = 0, fraction_width = 0;
    for (T v : values) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.8f", static_cast<double>(v));
      std::string s = buf;
      const std::size_t dot = s.find('.');
      std::string f = s.substr(dot);  // ".25000000"
      while (f.size() > 1 && f.back() == '0') f.pop_back();
      whole.push_back(s.substr(0, dot));
      fraction.push_back(f);
      whole_width = std::max(whole_width, whole.back().size());
      fraction_width = std::max(fraction_width, f.size());
    }
    for (std::size_t i = 0; i < whole.size(); ++i)
      cells.push_back(std::string(whole_width - whole[i].size(), ' ') + whole[i] + fraction[i] +
                      std::string(fraction_width - fraction[i].size(), ' '));
  } else {
    std::size_t width = 0;
    for (T v : values) {
      cells.push_back(std::to_string(v));
      width = std::max(width, cells.back().size());
    }
    for (std::string& c : cells) c.insert(0, width - c.size(), ' ');
  }
  return cells;
}

// "[3 9 5 2]"
template <class T>
std::string numpy_str(std::span<const T> values) {
  std::string out = "[";
  const std::vector<std::string> cells = numpy_cells(values);
  for (std::size_t i = 0; i < cells.size(); ++i) out += (i ? " " : "") + cells[i];
  return out + "]";
}

// "[[152. 158.]\n [504. 526.]]": a matrix, its columns aligned across rows as numpy does.
template <class T>
std::string numpy_str(std::span<const T> values, std::size_t rows, std::size_t cols) {
  const std::vector<std::string> cells = numpy_cells(values);
  std::string out = "[";
  for (std::size_t r = 0; r < rows; ++r) {
    out += (r ? "\n [" : "[");
    for (std::size_t c = 0; c < cols; ++c) out += (c ? " " : "") + cells[r * cols + c];
    out += "]";
  }
  return out + "]";
}

template <class T>
std::string numpy_str(const ts::host_tensor<T, 1>& t) {
  return numpy_str(t.values());
}
template <class T>
std::string numpy_str(const ts::host_tensor<T, 2>& t) {
  return numpy_str(t.values(), t.extent(0), t.extent(1));
}

// The top-left rows x cols corner of a matrix, numpy's C[:rows, :cols].
template <class T>
ts::host_tensor<T, 2> corner(const ts::host_tensor<T, 2>& t, std::size_t rows, std::size_t cols) {
  ts::host_tensor<T, 2> out({rows, cols});
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) out(r, c) = t(r, c);
  return out;
}

// "(i,) = (0,)" / "(x, y) = (0, 1)": a device's mesh coordinates, as shard_map's debug
// printing shows them.
template <class Mesh>
std::string mesh_coordinates(std::size_t position) {
  const auto c = Mesh::coordinates(position);
  std::string names = "(", values = "(";
  for (std::size_t i = 0; i < Mesh::rank; ++i) {
    names += (i ? ", " : "") + std::string(Mesh::axes[i].name.view());
    values += (i ? ", " : "") + std::to_string(c[i]);
  }
  if (Mesh::rank == 1) {
    names += ",";
    values += ",";
  }
  return names + ") = " + values + ")";
}

// ---- checking -----------------------------------------------------------------------------

// Counts mismatches; an example returns exit_code() from main, non-zero if any check failed.
class checker {
 public:
  // Records the outcome of one check; a failure is reported on stderr with `what`.
  bool operator()(bool ok, const std::string& what) {
    if (!ok) {
      ++failures_;
      std::cerr << "MISMATCH: " << what << "\n";
    }
    return ok;
  }

  int exit_code(std::string_view program) const {
    if (failures_ != 0) {
      std::cerr << program << ": " << failures_ << " check(s) failed\n";
      return 1;
    }
    std::cout << "\n" << program << ": every result matches its serial computation\n";
    return 0;
  }

 private:
  int failures_ = 0;
};

// The largest |got - want| relative to 1 + |want|, for float results computed in a different
// order than the serial reference (sums over shards, blocked GEMM).
template <class T, std::size_t Rank>
double max_relative_error(const ts::host_tensor<T, Rank>& got,
                          const ts::host_tensor<T, Rank>& want) {
  if (got.extents() != want.extents()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got.data()[i]), w = static_cast<double>(want.data()[i]);
    worst = std::max(worst, std::abs(g - w) / (1.0 + std::abs(w)));
  }
  return worst;
}

// jnp.allclose with float32 tolerances, in the relative form above.
template <class T, std::size_t Rank>
bool allclose(const ts::host_tensor<T, Rank>& got, const ts::host_tensor<T, Rank>& want,
              double tolerance = 1e-5) {
  return max_relative_error(got, want) <= tolerance;
}

// The serial reference: C = A . B with a plain triple loop, accumulated in double.
template <class T>
ts::host_tensor<T, 2> serial_matmul(const ts::host_tensor<T, 2>& a,
                                    const ts::host_tensor<T, 2>& b) {
  ts::host_tensor<T, 2> c({a.extent(0), b.extent(1)});
  for (std::size_t i = 0; i < a.extent(0); ++i)
    for (std::size_t k = 0; k < b.extent(1); ++k) {
      double acc = 0;
      for (std::size_t j = 0; j < a.extent(1); ++j)
        acc += static_cast<double>(a(i, j)) * static_cast<double>(b(j, k));
      c(i, k) = static_cast<T>(acc);
    }
  return c;
}

// ---- program structure --------------------------------------------------------------------

// "=== 2.2 Inspecting sharded matrices ===": the examples' section headers. docs/generate.py
// splits an example's output at these lines and finds a section by its first word.
inline void section(std::string_view key, std::string_view title) {
  std::cout << "\n=== " << key << " " << title << " ===\n";
}

// The command line every example accepts: --large runs the seeds' full sizes where the
// default is smaller; --eager runs the training steps op by op instead of as one SPMD program
// per device (ts::jit). `exit` is set when main should return at once with that code (--help,
// an unknown argument).
struct options {
  bool large = false;
  bool eager = false;
  int exit = -1;
};
inline options parse_options(int argc, char** argv, std::string_view what_large_does) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--large") {
      o.large = true;
      continue;
    }
    if (arg == "--eager") {
      o.eager = true;
      continue;
    }
    const bool help = arg == "--help" || arg == "-h";
    if (!help) std::cerr << argv[0] << ": unknown argument '" << arg << "'\n";
    (help ? std::cout : std::cerr) << "usage: " << argv[0] << " [--large] [--eager]\n  --large  "
                                   << what_large_does
                                   << "\n  --eager  train op by op, not through ts::jit\n";
    o.exit = help ? 0 : 2;
    return o;
  }
  return o;
}

// "830.9 ms": a time printed to a tenth of a millisecond (more digits would be noise).
inline std::string format_ms(double ms) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f ms", ms);
  return buf;
}

// The median wall-clock time of `runs` calls of f, in milliseconds (the median, not the mean:
// the first run pays for page faults on fresh buffers, and a busy machine adds outliers).
template <class F>
double median_ms(std::size_t runs, F&& f) {
  std::vector<double> ms;
  for (std::size_t r = 0; r < runs; ++r) {
    const auto start = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
}

}  // namespace examples
