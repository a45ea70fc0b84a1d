// typeshard/ops/detail/move_blocks.hpp: moving an array between two device meshes of any mesh
// types, on values: the plan (which box of which source block goes to which target block)
// and, where every block lives in this process's memory, its run: each target device copies
// the boxes it needs straight from the source blocks (thread-pool copies, no host array).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "../../array/detail/copy_box.hpp"
#include "../../array/device_mesh.hpp"
#include "../../array/sharded_array.hpp"
#include "../../array/detail/transfer.hpp"
#include "../../backend/backend.hpp"
#include "../../backend/collective_observer.hpp"
#include "../../core/layout.hpp"
#include "../../array/detail/buffer.hpp"

namespace typeshard {

// move_transfer: one box that goes from a source mesh position's block to a target
// position's block; bytes moved if the two devices differ, kept otherwise.
struct move_transfer {
  std::size_t from_position = 0, to_position = 0;
  device_id from_device = 0, to_device = 0;
  std::vector<slice> box;  // global slices
  std::size_t bytes = 0;

  bool moves() const { return from_device != to_device; }
};

// move_plan: every transfer of a move, grouped by target position. Each target block is
// assembled from the source blocks that overlap it, each box from a replica on the target's
// own device when there is one (so it is not moved), else from replica (target position
// modulo replicas), spreading the sends.
struct move_plan {
  std::vector<move_transfer> transfers;
  std::string from, to;  // the two shardings, for describe()

  std::size_t bytes_moved() const {
    std::size_t n = 0;
    for (const move_transfer& t : transfers) n += t.moves() ? t.bytes : 0;
    return n;
  }
  std::size_t bytes_kept() const {
    std::size_t n = 0;
    for (const move_transfer& t : transfers) n += t.moves() ? 0 : t.bytes;
    return n;
  }
  std::size_t messages() const {
    std::size_t n = 0;
    for (const move_transfer& t : transfers) n += t.moves() ? 1 : 0;
    return n;
  }

  // "move NamedSharding(...) -> NamedSharding(...): 6 transfers, 1024 bytes moved, ..." and
  // one line per transfer: "  device 0 (position 0) -> device 4 (position 2): [0:4, 0:2] 32 B".
  std::string describe() const {
    std::string out = "move " + from + " -> " + to + ": " + std::to_string(transfers.size()) +
                      " transfers, " + std::to_string(messages()) + " between devices, " +
                      std::to_string(bytes_moved()) + " bytes moved, " +
                      std::to_string(bytes_kept()) + " bytes kept on their device\n";
    for (const move_transfer& t : transfers) {
      out += "  device " + std::to_string(t.from_device) + " (position " +
             std::to_string(t.from_position) + ") -> device " + std::to_string(t.to_device) +
             " (position " + std::to_string(t.to_position) + "): [";
      for (std::size_t d = 0; d < t.box.size(); ++d)
        out += (d ? ", " : "") + std::to_string(t.box[d].start) + ":" +
               std::to_string(t.box[d].stop);
      out += "] " + std::to_string(t.bytes) + " B" + (t.moves() ? "\n" : " (kept)\n");
    }
    return out;
  }
};

namespace detail {

// plan_move(from, to, global, element_size): the transfers that build every target block.
template <std::size_t Rank>
move_plan plan_move(const placement<Rank>& from, const placement<Rank>& to,
                    const shape<Rank>& global, std::size_t element_size) {
  // The distinct source boxes, each with the positions holding it (its replicas).
  struct source_box {
    index_slices<Rank> box;
    std::vector<std::size_t> positions;
  };
  std::vector<source_box> boxes;
  for (std::size_t p = 0; p < from.mesh.size; ++p) {
    const index_slices<Rank> ix = index_of(from.mesh, from.spec, global, p);
    auto it = std::find_if(boxes.begin(), boxes.end(),
                           [&](const source_box& b) { return b.box == ix; });
    if (it == boxes.end()) boxes.push_back({ix, {p}});
    else it->positions.push_back(p);
  }
  move_plan plan;
  for (std::size_t q = 0; q < to.mesh.size; ++q) {
    const index_slices<Rank> target = index_of(to.mesh, to.spec, global, q);
    for (const source_box& s : boxes) {
      std::vector<slice> overlap(Rank);
      std::size_t count = 1;
      for (std::size_t d = 0; d < Rank; ++d) {
        overlap[d] = {std::max(target[d].start, s.box[d].start),
                      std::min(target[d].stop, s.box[d].stop)};
        count *= overlap[d].start < overlap[d].stop ? overlap[d].size() : 0;
      }
      if (count == 0) continue;
      std::size_t p = s.positions[q % s.positions.size()];
      for (std::size_t r : s.positions)
        if (from.devices[r] == to.devices[q]) p = r;
      plan.transfers.push_back(
          {p, q, from.devices[p], to.devices[q], std::move(overlap), count * element_size});
    }
  }
  return plan;
}

// Reports target position q's part in a move to the installed observer (ts::communication_
// recorder): a collective_kind::move event of its block's bytes and of those it receives
// from other devices, timed from `start`.
TYPESHARD_COLD TYPESHARD_NOINLINE inline void report_move(
    collective_observer& observer, const move_plan& plan, std::size_t q, std::size_t group_size,
    std::size_t block_bytes, std::chrono::steady_clock::time_point start) {
  collective_event e;
  e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  e.kind = collective_kind::move;
  e.axes = "move to other devices";
  e.position = q;
  e.group_size = group_size;
  e.block_bytes = block_bytes;
  for (const move_transfer& t : plan.transfers)
    if (t.to_position == q && t.moves()) e.bytes_received += t.bytes;
  observer.observe(e);
}

// Runs `plan` where every source block is in this process's memory: each target device
// allocates its block and copies its boxes from the source blocks. With a recorder
// installed, each target device reports a move event (report_move).
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE std::vector<buffer<T>> run_move_in_process(
    const move_plan& plan, const placement<Rank>& from, const placement<Rank>& to,
    const shape<Rank>& global, const std::vector<buffer<T>>& source) {
  std::vector<buffer<T>> out(to.mesh.size);
  collective_observer* const observer =
      installed_collective_observer.load(std::memory_order_acquire);
  to.b.run(to.devices, [&](std::size_t q) {
    const auto start = observer ? std::chrono::steady_clock::now()
                                : std::chrono::steady_clock::time_point{};
    const index_slices<Rank> target = index_of(to.mesh, to.spec, global, q);
    shape<Rank> t_origin{}, t_local{};
    box_of(target, t_origin, t_local);
    std::size_t count = 1;
    for (std::size_t e : t_local) count *= e;
    buffer<T> block(count);
    for (const move_transfer& t : plan.transfers) {
      if (t.to_position != q) continue;
      shape<Rank> s_origin{}, s_local{};
      box_of(index_of(from.mesh, from.spec, global, t.from_position), s_origin, s_local);
      shape<Rank> src_at{}, dst_at{}, extent{};
      for (std::size_t d = 0; d < Rank; ++d) {
        src_at[d] = t.box[d].start - s_origin[d];
        dst_at[d] = t.box[d].start - t_origin[d];
        extent[d] = t.box[d].size();
      }
      copy_box<T, Rank>(source[t.from_position].data(), s_local, src_at, block.data(), t_local,
                        dst_at, extent);
    }
    if (observer) report_move(*observer, plan, q, to.mesh.size, count * sizeof(T), start);
    out[q] = std::move(block);
  });
  return out;
}

// The rounds in which a plan's moving transfers run as messages: in each round a device sends
// at most one box and receives at most one (greedily, in plan order; the same rounds on every
// process, which all compute the plan from the layouts).
inline std::vector<std::vector<std::size_t>> move_rounds(const move_plan& plan) {
  std::vector<std::size_t> remaining;
  for (std::size_t t = 0; t < plan.transfers.size(); ++t)
    if (plan.transfers[t].moves()) remaining.push_back(t);
  std::vector<std::vector<std::size_t>> rounds;
  while (!remaining.empty()) {
    std::vector<std::size_t> round, later;
    std::vector<device_id> senders, receivers;
    for (std::size_t t : remaining) {
      const move_transfer& x = plan.transfers[t];
      const bool busy =
          std::find(senders.begin(), senders.end(), x.from_device) != senders.end() ||
          std::find(receivers.begin(), receivers.end(), x.to_device) != receivers.end();
      if (busy) {
        later.push_back(t);
      } else {
        round.push_back(t);
        senders.push_back(x.from_device);
        receivers.push_back(x.to_device);
      }
    }
    rounds.push_back(std::move(round));
    remaining = std::move(later);
  }
  return rounds;
}

// Runs `plan` on one backend whose devices may live in other processes (MPI): over the union
// of the source and target devices, each round one permute in which a device sends the box
// packed from its source block (one transfer buffer) and receives one into its target block;
// boxes that stay on their device are copied locally. No process holds more than its own
// blocks and one box in flight each way. A recorder sees the rounds' permutes ("move to other
// devices"), whose bytes received add up, per device, to report_move's.
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE std::vector<buffer<T>> run_move_by_messages(
    const move_plan& plan, const placement<Rank>& from, const placement<Rank>& to,
    const shape<Rank>& global, const std::vector<buffer<T>>& source) {
  std::vector<device_id> devices(from.devices.begin(), from.devices.end());
  for (device_id d : to.devices)
    if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
  std::vector<std::size_t> members(devices.size());
  for (std::size_t i = 0; i < members.size(); ++i) members[i] = i;
  auto member_of = [&](device_id d) {
    return static_cast<std::size_t>(std::find(devices.begin(), devices.end(), d) -
                                    devices.begin());
  };
  const std::vector<std::vector<std::size_t>> rounds = move_rounds(plan);
  std::vector<buffer<T>> out(to.mesh.size);
  auto box_in = [&](const placement<Rank>& at, std::size_t position, shape<Rank>& origin,
                    shape<Rank>& local) {
    box_of(index_of(at.mesh, at.spec, global, position), origin, local);
  };
  from.b.run(devices, [&](std::size_t i) {
    const device_id d = devices[i];
    std::size_t q = to.mesh.size;  // this device's target position, if any
    for (std::size_t k = 0; k < to.mesh.size; ++k)
      if (to.devices[k] == d) q = k;
    shape<Rank> t_origin{}, t_local{};
    buffer<T> block;
    if (q < to.mesh.size) {
      box_in(to, q, t_origin, t_local);
      std::size_t count = 1;
      for (std::size_t e : t_local) count *= e;
      block = buffer<T>(count);
    }
    // Copies box t.box from `src` (whose box starts at s_origin, extents s_local) to `dst`.
    auto copy = [&](const move_transfer& t, const T* src, const shape<Rank>& s_origin,
                    const shape<Rank>& s_local, T* dst, const shape<Rank>& d_origin,
                    const shape<Rank>& d_local) {
      shape<Rank> src_at{}, dst_at{}, extent{};
      for (std::size_t k = 0; k < Rank; ++k) {
        src_at[k] = t.box[k].start - s_origin[k];
        dst_at[k] = t.box[k].start - d_origin[k];
        extent[k] = t.box[k].size();
      }
      copy_box<T, Rank>(src, s_local, src_at, dst, d_local, dst_at, extent);
    };
    for (const move_transfer& t : plan.transfers)  // what stays on this device
      if (!t.moves() && t.to_device == d) {
        shape<Rank> s_origin{}, s_local{};
        box_in(from, t.from_position, s_origin, s_local);
        copy(t, source[t.from_position].data(), s_origin, s_local, block.data(), t_origin,
             t_local);
      }
    buffer<T> send_buffer, recv_buffer;
    for (const std::vector<std::size_t>& round : rounds) {
      const move_transfer* sending = nullptr;
      const move_transfer* receiving = nullptr;
      for (std::size_t k : round) {
        if (plan.transfers[k].from_device == d) sending = &plan.transfers[k];
        if (plan.transfers[k].to_device == d) receiving = &plan.transfers[k];
      }
      std::size_t send_count = 0, recv_count = 0;
      if (sending) {
        shape<Rank> s_origin{}, s_local{}, zero{}, extent{};
        box_in(from, sending->from_position, s_origin, s_local);
        for (std::size_t k = 0; k < Rank; ++k) {
          zero[k] = sending->box[k].start;  // the packed box's own origin
          extent[k] = sending->box[k].size();
        }
        send_count = sending->bytes / sizeof(T);
        if (send_buffer.size() < send_count) send_buffer = buffer<T>(send_count);
        copy(*sending, source[sending->from_position].data(), s_origin, s_local,
             send_buffer.data(), zero, extent);
      }
      if (receiving) {
        recv_count = receiving->bytes / sizeof(T);
        if (recv_buffer.size() < recv_count) recv_buffer = buffer<T>(recv_count);
      }
      from.b.permute(collective_group{members, i, {}, "move to other devices"},
                     element_type_of<T>, send_buffer.data(), send_count,
                     sending ? member_of(sending->to_device) : no_peer, recv_buffer.data(),
                     recv_count, receiving ? member_of(receiving->from_device) : no_peer);
      if (receiving) {
        shape<Rank> r_origin{}, r_local{};
        for (std::size_t k = 0; k < Rank; ++k) {
          r_origin[k] = receiving->box[k].start;
          r_local[k] = receiving->box[k].size();
        }
        copy(*receiving, recv_buffer.data(), r_origin, r_local, block.data(), t_origin,
             t_local);
      }
    }
    if (q < to.mesh.size) out[q] = std::move(block);
  });
  return out;
}

// Whether every device of b lives in this process (the thread pool; MPI with one rank).
inline bool in_process(const backend& b) { return b.process_count() == 1; }

// move_array<Spec>(a, target): a (fully reduced) on target, sharded by Spec, any mesh type.
// In one process: the plan's copies, each target device assembling its own block. Across
// processes on one backend (MPI): the plan's transfers as messages, in rounds of permutes
// over the union of the two device sets, which every device of that union takes part in.
// Between two backends across processes: through the host (to_host, then device_put), which
// every process calls.
template <spec_like Spec, class T, class Mesh, class S, class E, mesh_like Target>
sharded_array<T, Target, Spec, E> move_array(const sharded_array<T, Mesh, S, E>& a,
                                             const device_mesh<Target>& target) {
  using result = sharded_array<T, Target, Spec, E>;
  constexpr std::size_t Rank = E::rank;
  const placement<Rank> from = a.placement();
  const placement<Rank> to = placement_of<Target, typename result::spec, Rank>(target);
  if (in_process(from.b) && in_process(to.b)) {
    const move_plan plan = plan_move<Rank>(from, to, a.extents(), sizeof(T));
    return result(adopt_shards, target, a.extents(),
                  run_move_in_process<T, Rank>(plan, from, to, a.extents(), *a.shared_shards()));
  }
  if (&from.b == &to.b) {
    const move_plan plan = plan_move<Rank>(from, to, a.extents(), sizeof(T));
    return result(adopt_shards, target, a.extents(),
                  run_move_by_messages<T, Rank>(plan, from, to, a.extents(),
                                                *a.shared_shards()));
  }
  return device_put<Spec, E>(target, to_host(a));
}

}  // namespace detail
}  // namespace typeshard
