// typeshard/backend/collective_observer.hpp: a hook that sees every collective the backends run.
//
// Every collective of every backend passes through the non-virtual entry points of
// ts::backend (all_gather, reduce_scatter, all_reduce, all_to_all, permute). When an
// observer is installed, each device's part in each collective is reported to it, with the
// mesh axes the collective ran over, the bytes involved and the time the device spent in it.
// ts::communication_recorder (ops/communication_report.hpp) is the observer users hold;
// with none installed the cost is one relaxed atomic load per collective.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

namespace typeshard {

// Defined in backend.hpp; declared here because backend.hpp's implementation includes this
// header (it reports to the observer), so this header cannot include backend.hpp.
enum class reduce_op : unsigned char;

// collective_kind: which backend primitive ran; move: a device's part in a move between
// device meshes in one process (ops/move.hpp: copies of the boxes it needs, no collective).
enum class collective_kind : unsigned char {
  all_gather, reduce_scatter, all_reduce, all_to_all, permute, move
};

constexpr const char* to_string(collective_kind k) {
  switch (k) {
    case collective_kind::all_gather: return "all_gather";
    case collective_kind::reduce_scatter: return "reduce_scatter";
    case collective_kind::all_reduce: return "all_reduce";
    case collective_kind::all_to_all: return "all_to_all";
    case collective_kind::permute: return "permute";
    case collective_kind::move: return "move";
  }
  return "?";
}

// collective_event: one device's part in one collective.
struct collective_event {
  collective_kind kind = collective_kind::all_reduce;
  reduce_op op{};                 // all_reduce and reduce_scatter only (else sum)
  std::string axes;               // "model", "data,model", or the group's purpose ("to_host")
  std::size_t position = 0;       // the device's index in its run: its mesh position
  std::size_t group_size = 0;
  // The device's block the collective acts on: all_reduce its whole block, all_gather the
  // gathered block, reduce_scatter the block before it is scattered, all_to_all and permute
  // the block sent, move the target block assembled.
  std::size_t block_bytes = 0;
  // What the device receives with a bandwidth-optimal algorithm (the scaling book's
  // counts): (n-1)/n of the block for all_gather, reduce_scatter and all_to_all, 2(n-1)/n for
  // all_reduce, the received piece for permute, for move the bytes of its target block that
  // come from other devices (change owner). The backend's actual algorithm may move more.
  std::size_t bytes_received = 0;
  double seconds = 0;  // from the call to its return on this device, waiting for peers included
};

// collective_observer: receives events from the device threads, concurrently.
class collective_observer {
 public:
  virtual void observe(const collective_event& e) = 0;

 protected:
  ~collective_observer() = default;
};

namespace detail {
// The installed observer, if any (one per process; ts::communication_recorder chains nested
// recorders itself).
inline std::atomic<collective_observer*> installed_collective_observer{nullptr};
}  // namespace detail

}  // namespace typeshard
