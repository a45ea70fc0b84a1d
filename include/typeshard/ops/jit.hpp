// typeshard/ops/jit.hpp: a whole step run as one SPMD program per device (JAX's jax.jit).
//
//   auto step = ts::jit([&](const auto& params, const auto& state, const auto& batch) {
//     auto [loss, grads] = ts::value_and_grad(loss_fn)(params, batch);
//     auto s = state;
//     auto p = ts::adam_update(params, grads, s, {.lr = 1e-3});
//     return std::tuple(loss, p, s);
//   });
//   auto [loss, params2, state2] = step(params, state, batch);   // as f would return them
//   std::cout << step.lower(params, state, batch);               // program and ledger
//
// Eagerly, every operation is one multi-device run: the caller plans it, wakes every device
// thread, and waits for all of them. A jit function runs f once per device instead, all at
// once, each on its device's thread, as an MPI job runs it once per rank: each device sees
// the backend as a rank sees its job (is_addressable(d) for its own device only), runs each
// operation's part for its device inline, and meets the others only in collectives. The same
// operations run with the same plans, so every compile-time rule is checked exactly as in
// eager mode and the results are bitwise those of eager mode. The global result is assembled
// from the devices' results: each array takes each mesh position's block from the result of
// that position's device (ops/detail/jit_outputs.hpp); other values are the first device's.
//
// f takes its arguments by const reference (or by value) and must not touch state outside
// them that another device's copy of f also touches (a captured optimizer updated in place):
// f runs concurrently, once per device (so its host-side effects, printing, happen once per
// device, as under MPI once per rank). Arguments and results are arrays, parameter trees
// (ops/tree.hpp), std::pair, optimizer states (ops/optim.hpp) and plain values, nested.
// Inside f, ts::to_host and other process-collective operations behave as under MPI (every
// device must call them). The backend is that of the first array among the arguments; with
// none, or on a backend without an SPMD mode (MPI, whose ranks already run one program
// each), f is called as it is. An exception in a device's program is rethrown as eager mode
// throws it (a kernel's failure as a device_error naming the device); the other devices are
// released from any collective they wait in, never left hanging.
//
// lower(args...) runs the step once and returns what each device ran (jit_lowered): its
// program (local steps and collectives, in order) and the communication ledger (each
// collective's kind, axes, bytes and the user's call site).
#pragma once

#include <cstddef>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backend/backend.hpp"
#include "detail/jit_outputs.hpp"
#include "detail/jit_program.hpp"

namespace typeshard {

// jit_lowered: what every device ran in one recorded call of a jit function.
class jit_lowered {
 public:
  jit_lowered() = default;
  explicit jit_lowered(std::vector<std::vector<jit_step>> programs)
      : programs_(std::move(programs)) {}

  std::size_t devices() const { return programs_.size(); }
  // Device d's steps in order (empty for a device whose program this process did not see).
  const std::vector<jit_step>& program(std::size_t d) const { return programs_.at(d); }
  // Device d's collectives in order: the communication ledger.
  std::vector<jit_step> ledger(std::size_t d = 0) const {
    std::vector<jit_step> out;
    for (const jit_step& s : programs_.at(d))
      if (s.collective) out.push_back(s);
    return out;
  }
  std::size_t local_steps(std::size_t d = 0) const {
    std::size_t n = 0;
    for (const jit_step& s : programs_.at(d)) n += s.collective ? 0 : 1;
    return n;
  }

  // Device 0's program (consecutive local steps folded into one line), each device's counts,
  // and the ledger.
  std::string to_string() const;

 private:
  std::vector<std::vector<jit_step>> programs_;
};

inline std::ostream& operator<<(std::ostream& os, const jit_lowered& l) {
  return os << l.to_string();
}

// jit_function<F>: f compiled as one SPMD program per device (see the top of this file).
template <class F>
class jit_function {
 public:
  explicit jit_function(F f) : f_(std::move(f)) {}

  template <class... Args>
  [[nodiscard]] auto operator()(const Args&... args) const {
    return call(nullptr, args...);
  }

  // Runs the step once (its results are discarded) and returns what each device ran.
  template <class... Args>
  [[nodiscard]] jit_lowered lower(const Args&... args) const {
    backend* b = find_backend(args...);
    if (b == nullptr) return {};
    detail::jit_recorder rec(*b);
    (void)call(&rec, args...);
    rec.stop();
    return jit_lowered(rec.take());
  }

 private:
  template <class... Args>
  static backend* find_backend(const Args&... args) {
    backend* b = nullptr;
    ((b = b != nullptr ? b : detail::jit_backend_of(args)), ...);
    return b;
  }

  template <class... Args>
  auto call(detail::program_listener* listener, const Args&... args) const {
    // A reference f returns is copied: each device makes the result for its own blocks.
    using R = std::remove_cvref_t<std::invoke_result_t<const F&, const Args&...>>;
    backend* b = find_backend(args...);
    if (b == nullptr) return R(f_(args...));
    if constexpr (std::is_void_v<R>) {
      if (!b->run_program([&](std::size_t) { f_(args...); }, listener)) f_(args...);
    } else {
      std::vector<std::optional<R>> outs(b->device_count());
      if (!b->run_program([&](std::size_t d) { outs[d].emplace(f_(args...)); }, listener))
        return R(f_(args...));
      R result = std::move(*outs[0]);
      std::vector<R*> each(outs.size());
      each[0] = &result;
      for (std::size_t d = 1; d < outs.size(); ++d) each[d] = &*outs[d];
      detail::jit_merge<R>(result, std::span<R* const>(each));
      return result;
    }
  }

  F f_;
};

// jit(f): f as one SPMD program per device (see the top of this file).
template <class F>
[[nodiscard]] jit_function<std::decay_t<F>> jit(F&& f) {
  return jit_function<std::decay_t<F>>(std::forward<F>(f));
}

inline std::string jit_lowered::to_string() const {
  std::string out = "jit program on " + std::to_string(programs_.size()) + " devices\n";
  for (std::size_t d = 0; d < programs_.size(); ++d)
    out += "  device " + std::to_string(d) + ": " + std::to_string(local_steps(d)) +
           " local steps, " + std::to_string(ledger(d).size()) + " collectives\n";
  if (programs_.empty()) return out;
  out += "device 0's program:\n";
  std::size_t run = 0;
  double run_seconds = 0;
  const auto flush = [&] {
    if (run == 0) return;
    out += "  local x" + std::to_string(run) + " (" +
           std::to_string(static_cast<long long>(run_seconds * 1e6)) + " us)\n";
    run = 0;
    run_seconds = 0;
  };
  for (const jit_step& s : programs_[0]) {
    if (!s.collective) {
      ++run;
      run_seconds += s.seconds;
      continue;
    }
    flush();
    out += "  " + s.name() + " over \"" + s.axes + "\"\n";
  }
  flush();
  out += "communication ledger (device 0): kind, axes, group, block bytes, bytes received, "
         "call site\n";
  std::size_t i = 0;
  for (const jit_step& s : ledger(0))
    out += "  " + std::to_string(i++) + ". " + s.name() + " \"" + s.axes + "\" " +
           std::to_string(s.group_size) + " " + std::to_string(s.block_bytes) + " " +
           std::to_string(s.bytes_received) + " " +
           (s.call_site.empty() ? std::string("(unknown)") : s.call_site) + "\n";
  return out;
}

}  // namespace typeshard
