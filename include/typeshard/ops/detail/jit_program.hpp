// typeshard/ops/detail/jit_program.hpp: what ts::jit's lower() records of one call: each
// device's program (its local steps and collectives, in order) and the communication ledger.
// Internal: do not rely on anything in detail/ (the public face is ops/jit.hpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "../../backend/backend.hpp"
#include "../../backend/collective_observer.hpp"
#include "../../backend/detail/call_site.hpp"
#include "../communication_report.hpp"

namespace typeshard {

// jit_step: one step of a device's program. A local step is one operation's part on the
// device (its kernels, between collectives); a collective is one collective it took part in.
struct jit_step {
  bool collective = false;
  collective_kind kind = collective_kind::all_reduce;  // collectives only
  reduce_op op{};
  std::string axes;                // "model", "data,model", or the group's purpose
  std::size_t group_size = 0;
  std::size_t block_bytes = 0;     // as collective_event counts them
  std::size_t bytes_received = 0;
  std::string call_site;           // the user's call that caused it ("file:line"), if known
  double seconds = 0;              // on the recording call, waiting for peers included

  // psum, pmax, pmin, psum_scatter, all_gather, all_to_all, ppermute, move; "local".
  std::string name() const;
};

namespace detail {

// Records one call: a program_listener for the local steps (SPMD on the thread pool) and,
// while it lives, the installed collective observer (the previous one still hears every
// collective). The device of an event is its process on the backend (a device's own, in an
// SPMD program; the rank's, under MPI).
class jit_recorder final : public program_listener, public collective_observer {
 public:
  explicit jit_recorder(backend& b)
      : backend_(&b),
        programs_(b.device_count()),
        previous_(installed_collective_observer.exchange(this, std::memory_order_acq_rel)) {}
  jit_recorder(const jit_recorder&) = delete;
  jit_recorder& operator=(const jit_recorder&) = delete;
  ~jit_recorder() { stop(); }

  void stop() noexcept {
    if (stopped_) return;
    stopped_ = true;
    installed_collective_observer.store(previous_, std::memory_order_release);
  }

  void local_step(std::size_t device, double seconds) override {
    if (device < programs_.size()) programs_[device].push_back(local(seconds));
  }

  void observe(const collective_event& e) override {
    const std::size_t d = backend_->process_index();
    if (d < programs_.size()) programs_[d].push_back(collective(e));
    if (previous_ != nullptr) previous_->observe(e);
  }

  std::vector<std::vector<jit_step>> take() { return std::move(programs_); }

 private:
  static jit_step local(double seconds) {
    jit_step s;
    s.seconds = seconds;
    return s;
  }
  static jit_step collective(const collective_event& e) {
    jit_step s;
    s.collective = true;
    s.kind = e.kind;
    s.op = e.op;
    s.axes = e.axes;
    s.group_size = e.group_size;
    s.block_bytes = e.block_bytes;
    s.bytes_received = e.bytes_received;
    const source_site* site = current_call_site();
    if (site != nullptr) s.call_site = format_call_site(site);
    s.seconds = e.seconds;
    return s;
  }

  backend* backend_;
  // By device; each device's list is appended to by that device's thread alone (an event
  // of a device outside the backend's count is dropped).
  std::vector<std::vector<jit_step>> programs_;
  collective_observer* previous_;
  bool stopped_ = false;
};

}  // namespace detail

inline std::string jit_step::name() const {
  return collective ? detail::collective_plan_name(kind, op) : "local";
}

}  // namespace typeshard
