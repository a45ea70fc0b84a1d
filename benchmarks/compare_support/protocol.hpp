// benchmarks/compare_support/protocol.hpp: what every C++ contender of benchmarks/compare
// shares: the line protocol the driver speaks, the workloads' shapes, the input data and the
// result samples the driver compares across contenders.
//
// Protocol (one request per line on stdin, one reply per line on stdout):
//   setup <workload> key=value ...   build the inputs, run once (warm-up), sample the result
//                                    -> "ok check=v,v,... info=<text>" | "skip <why>" | "error
//                                    <why>"
//   run                              run once -> "time <seconds>" (steady_clock, wall time)
//   free                             drop the workload's data -> "ok"
//   quit (or end of input)           exit
// Anything a contender prints for people goes to stderr.
//
// Data: element i (row-major index into the global array) of input `seed` is
//   float(((i * 7919 + seed * 104729) mod 65521) / 32760.5 - 1.0)        in [-1, 1)
// the same formula as jax_contender.py's, so every contender multiplies the same numbers.
// Checks: the values of the global result at sample_positions(total) (16 positions).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace compare {

// ---- data ------------------------------------------------------------------------------------

inline float value(std::uint64_t seed, std::uint64_t i) {
  const std::uint64_t h = (i * 7919u + seed * 104729u) % 65521u;
  return static_cast<float>(static_cast<double>(h) / 32760.5 - 1.0);
}

// Fills out[0, n) with elements [offset, offset + n) of input `seed`, times `scale`.
inline void fill(float* out, std::size_t n, std::uint64_t seed, std::uint64_t offset = 0,
                 float scale = 1.0f) {
  for (std::size_t k = 0; k < n; ++k) out[k] = value(seed, offset + k) * scale;
}

inline std::vector<float> make(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  fill(v.data(), n, seed, 0, scale);
  return v;
}

inline constexpr std::size_t check_count = 16;

// The global row-major indices the checks sample, for an array of `total` elements.
inline std::vector<std::size_t> sample_positions(std::size_t total) {
  std::vector<std::size_t> p(check_count);
  for (std::size_t j = 0; j < check_count; ++j)
    p[j] = static_cast<std::size_t>((std::uint64_t(j) * 2654435761u + 12345u) % total);
  return p;
}

// Samples a global row-major array held in one piece.
inline std::vector<double> sample(const float* global, std::size_t total) {
  std::vector<double> out;
  for (std::size_t p : sample_positions(total)) out.push_back(global[p]);
  return out;
}

// ---- the workloads' parameters -----------------------------------------------------------------

struct params {
  std::map<std::string, std::string> kv;
  std::size_t get(const std::string& key) const {
    auto it = kv.find(key);
    if (it == kv.end()) throw std::runtime_error("missing parameter " + key);
    return static_cast<std::size_t>(std::stoull(it->second));
  }
  double real(const std::string& key) const {
    auto it = kv.find(key);
    if (it == kv.end()) throw std::runtime_error("missing parameter " + key);
    return std::stod(it->second);
  }
};

// The MLP of seed 002: layer sizes [784, hidden, hidden, hidden, 10]. Layer l's W is
// input seed 10 + l scaled by 1 / sqrt(n_in), its b input seed 20 + l; the batch's inputs are
// seed 1, its targets seed 2.
struct mlp_shape {
  std::vector<std::size_t> sizes;
  std::size_t batch = 0;
  float step = 0;
  explicit mlp_shape(const params& p)
      : sizes{784, p.get("hidden"), p.get("hidden"), p.get("hidden"), 10},
        batch(p.get("batch")),
        step(static_cast<float>(p.real("step"))) {}
  std::size_t layers() const { return sizes.size() - 1; }
  float w_scale(std::size_t l) const { return 1.0f / std::sqrt(static_cast<float>(sizes[l])); }
};

// The training step's check: the weight gradients dW of layers 0 and 3 of the first step
// (the warm-up), sampled (16 values each, layer 0 first). Sampling the gradients rather than
// W after - W before keeps the float rounding of W out of the comparison.
inline constexpr std::size_t checked_layers[] = {0, 3};

// ---- the server ---------------------------------------------------------------------------------

// One workload, set up: run() is what is timed; check() samples the result of the last run.
class instance {
 public:
  virtual ~instance() = default;
  virtual void run() = 0;
  virtual std::vector<double> check() = 0;
  // A line for people: the plan, the library's version, the thread count.
  virtual std::string info() { return ""; }
};

using factory = std::function<std::unique_ptr<instance>(const params&)>;

inline std::string join(const std::vector<double>& v) {
  std::ostringstream s;
  s.precision(9);
  for (std::size_t i = 0; i < v.size(); ++i) s << (i ? "," : "") << v[i];
  return s.str();
}

inline std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

// Serves the protocol for `workloads` (the others are answered "skip").
inline int serve(const std::map<std::string, factory>& workloads) {
  std::unique_ptr<instance> current;
  std::string line;
  std::ios::sync_with_stdio(false);
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    try {
      if (cmd == "setup") {
        current.reset();
        std::string name;
        in >> name;
        params p;
        for (std::string kv; in >> kv;) {
          const auto eq = kv.find('=');
          if (eq != std::string::npos) p.kv[kv.substr(0, eq)] = kv.substr(eq + 1);
        }
        auto it = workloads.find(name);
        if (it == workloads.end()) {
          std::cout << "skip not implemented by this contender" << std::endl;
          continue;
        }
        current = it->second(p);
        current->run();  // the warm-up, whose result the check samples
        std::cout << "ok check=" << join(current->check()) << " info=" << one_line(current->info())
                  << std::endl;
      } else if (cmd == "run") {
        if (!current) throw std::runtime_error("run before setup");
        const auto t0 = std::chrono::steady_clock::now();
        current->run();
        const auto t1 = std::chrono::steady_clock::now();
        std::cout << "time " << std::chrono::duration<double>(t1 - t0).count() << std::endl;
      } else if (cmd == "free") {
        current.reset();
        std::cout << "ok" << std::endl;
      } else if (cmd == "quit") {
        break;
      } else if (!cmd.empty()) {
        std::cout << "error unknown command " << cmd << std::endl;
      }
    } catch (const std::exception& e) {
      current.reset();
      std::cout << "error " << one_line(e.what()) << std::endl;
    }
  }
  return 0;
}

}  // namespace compare
