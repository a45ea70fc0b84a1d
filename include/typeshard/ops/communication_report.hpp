// typeshard/ops/communication_report.hpp: which collectives a region of a program ran.
//
//   ts::communication_recorder rec;                  // records from here...
//   auto [loss, grads] = ts::value_and_grad<0, 1>(step)(W1, W2, X, Y);
//   const ts::communication_report r = rec.report();  // ...to here
//   std::cout << r;                                   // one line a collective
//   assert(r.count(ts::step_kind::psum, "model") == 2);
//
// Plans say at compile time which collectives an operation runs; a recorder shows what a
// whole region ran: every collective of every operation (reshards, matmuls and einsums,
// reductions, softmax, shard_map's collectives, to_host), in order, with the mesh axes it
// ran over, the bytes of the block it acted on, the bytes a device receives in it and the
// time the device spent in it. A test can assert a program's communication budget with it.
//
// What one device saw: the program is SPMD, so each device runs the same collectives; the
// report lists those of the lowest mesh position this process observed (position 0 on the
// thread pool; under MPI, this rank's device). Totals sum over every device observed.
// Recorders nest (an inner one's collectives are also the outer one's); destroy them in
// reverse order of construction, as scopes do.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <mutex>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "../backend/backend.hpp"
#include "../backend/collective_observer.hpp"
#include "../plan/step.hpp"

namespace typeshard {

namespace detail {
// The plan vocabulary's name of a collective (psum, pmax, pmin, psum_scatter, ppermute; the
// others by to_string), as communication reports and ts::jit's ledger print it.
constexpr const char* collective_plan_name(collective_kind k, reduce_op op) {
  switch (k) {
    case collective_kind::all_reduce:
      return op == reduce_op::sum ? "psum" : op == reduce_op::max ? "pmax" : "pmin";
    case collective_kind::reduce_scatter: return "psum_scatter";
    case collective_kind::permute: return "ppermute";
    default: return to_string(k);
  }
}
}  // namespace detail

// communication_record: one collective, as one device ran it (see collective_event).
struct communication_record {
  collective_kind kind = collective_kind::all_reduce;
  reduce_op op{};
  std::string axes;
  std::size_t group_size = 0;
  std::size_t block_bytes = 0;
  std::size_t bytes_received = 0;
  double seconds = 0;

  // The plan vocabulary's name for it (psum, pmax, psum_scatter, ...; permute is ppermute).
  std::string name() const { return detail::collective_plan_name(kind, op); }
};

// communication_report: the collectives of a region, in the order they ran.
class communication_report {
 public:
  communication_report() = default;
  communication_report(std::vector<communication_record> collectives, std::size_t position,
                       std::size_t devices, std::size_t total_bytes_received)
      : collectives_(std::move(collectives)),
        position_(position),
        devices_(devices),
        total_bytes_received_(total_bytes_received) {}

  // The collectives the reporting device ran, in order.
  const std::vector<communication_record>& collectives() const { return collectives_; }
  std::size_t size() const { return collectives_.size(); }
  bool empty() const { return collectives_.empty(); }

  // How many ran of this kind over exactly these axes ("model", "data,model"; an empty
  // string_view: over any axes).
  std::size_t count(collective_kind kind, std::string_view axes = {}) const {
    return count_if([&](const communication_record& r) { return r.kind == kind; }, axes);
  }
  // The same in the plans' vocabulary: psum, pmax and pmin are all-reduces, psum_scatter a
  // reduce-scatter; local steps never communicate (0).
  std::size_t count(step_kind kind, std::string_view axes = {}) const {
    return count_if(
        [&](const communication_record& r) {
          switch (kind) {
            case step_kind::psum:
              return r.kind == collective_kind::all_reduce && r.op == reduce_op::sum;
            case step_kind::pmax:
              return r.kind == collective_kind::all_reduce && r.op == reduce_op::max;
            case step_kind::pmin:
              return r.kind == collective_kind::all_reduce && r.op == reduce_op::min;
            case step_kind::psum_scatter: return r.kind == collective_kind::reduce_scatter;
            case step_kind::all_gather: return r.kind == collective_kind::all_gather;
            case step_kind::all_to_all: return r.kind == collective_kind::all_to_all;
            default: return false;
          }
        },
        axes);
  }

  // The mesh position whose collectives are listed, and how many devices were observed.
  std::size_t position() const { return position_; }
  std::size_t devices_observed() const { return devices_; }

  // Sums over the listed collectives (the reporting device).
  std::size_t bytes_received() const {
    std::size_t n = 0;
    for (const communication_record& r : collectives_) n += r.bytes_received;
    return n;
  }
  double seconds() const {
    double s = 0;
    for (const communication_record& r : collectives_) s += r.seconds;
    return s;
  }
  // What every observed device received, together.
  std::size_t total_bytes_received() const { return total_bytes_received_; }

  // One line a collective, then the totals.
  friend std::ostream& operator<<(std::ostream& os, const communication_report& r) {
    os << r.collectives_.size() << " collectives, as run by the device at mesh position "
       << r.position_ << " (" << r.devices_ << " devices observed):\n";
    char line[160];
    std::snprintf(line, sizeof line, "  %3s  %-13s %-12s %5s %12s %12s %10s\n", "#",
                  "collective", "axes", "group", "block", "received", "time");
    os << line;
    std::size_t i = 0;
    for (const communication_record& c : r.collectives_) {
      std::snprintf(line, sizeof line, "  %3zu  %-13s %-12s %5zu %12s %12s %7.3f ms\n", ++i,
                    c.name().c_str(), c.axes.c_str(), c.group_size,
                    bytes_text(c.block_bytes).c_str(), bytes_text(c.bytes_received).c_str(),
                    c.seconds * 1e3);
      os << line;
    }
    std::snprintf(line, sizeof line,
                  "  this device received %s in %.3f ms; all %zu devices received %s\n",
                  bytes_text(r.bytes_received()).c_str(), r.seconds() * 1e3, r.devices_,
                  bytes_text(r.total_bytes_received_).c_str());
    return os << line;
  }

 private:
  template <class Pred>
  std::size_t count_if(Pred pred, std::string_view axes) const {
    return static_cast<std::size_t>(std::count_if(
        collectives_.begin(), collectives_.end(), [&](const communication_record& r) {
          return pred(r) && (axes.empty() || r.axes == axes);
        }));
  }

  static std::string bytes_text(std::size_t b) {
    char s[32];
    if (b < 10 * 1024) std::snprintf(s, sizeof s, "%zu B", b);
    else if (b < 10 * 1024 * 1024)
      std::snprintf(s, sizeof s, "%.1f KiB", static_cast<double>(b) / 1024);
    else std::snprintf(s, sizeof s, "%.1f MiB", static_cast<double>(b) / (1024 * 1024));
    return s;
  }

  std::vector<communication_record> collectives_;
  std::size_t position_ = 0;
  std::size_t devices_ = 0;
  std::size_t total_bytes_received_ = 0;
};

// communication_recorder: records every collective run while it is alive (a scope object).
//
// It is basic_communication_recorder<>, a class template of an unused parameter, as the
// thread pool is (backend/threads.hpp): every collective calls the installed observer
// through a virtual call, and g++ compiles each final overrider it can see (observe, with
// its vectors of events) into every TU that runs a collective, to devirtualise the call
// speculatively. As a template it is compiled only where a recorder is made. Spell it
// communication_recorder.
template <class Unused = void>
class basic_communication_recorder final : public collective_observer {
 public:
  basic_communication_recorder()
      : previous_(
            detail::installed_collective_observer.exchange(this, std::memory_order_acq_rel)) {}
  ~basic_communication_recorder() {
    detail::installed_collective_observer.store(previous_, std::memory_order_release);
  }
  basic_communication_recorder(const basic_communication_recorder&) = delete;
  basic_communication_recorder& operator=(const basic_communication_recorder&) = delete;

  // What was recorded so far (the recorder keeps recording).
  communication_report report() const {
    const std::lock_guard lock(mutex_);
    std::size_t first = by_position_.size(), devices = 0, total = 0;
    for (std::size_t p = by_position_.size(); p-- > 0;) {
      if (by_position_[p].empty()) continue;
      first = p;
      ++devices;
      for (const collective_event& e : by_position_[p]) total += e.bytes_received;
    }
    if (devices == 0) return {};
    std::vector<communication_record> list;
    list.reserve(by_position_[first].size());
    for (const collective_event& e : by_position_[first])
      list.push_back({e.kind, e.op, e.axes, e.group_size, e.block_bytes, e.bytes_received,
                      e.seconds});
    return communication_report(std::move(list), first, devices, total);
  }

  // Forgets what was recorded (a loop can record one iteration at a time).
  void clear() {
    const std::lock_guard lock(mutex_);
    by_position_.clear();
  }

  void observe(const collective_event& e) override {
    {
      const std::lock_guard lock(mutex_);
      if (by_position_.size() <= e.position) by_position_.resize(e.position + 1);
      by_position_[e.position].push_back(e);
    }
    if (previous_ != nullptr) previous_->observe(e);
  }

 private:
  collective_observer* previous_;
  mutable std::mutex mutex_;
  std::vector<std::vector<collective_event>> by_position_;  // by mesh position
};

using communication_recorder = basic_communication_recorder<>;

}  // namespace typeshard
