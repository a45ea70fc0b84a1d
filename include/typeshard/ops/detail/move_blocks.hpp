// typeshard/ops/detail/move_blocks.hpp: moving an array between two device meshes of any mesh
// types, on values: the plan (which box of which source block goes to which target block)
// and, where every block lives in this process's memory, its run: each target device copies
// the boxes it needs straight from the source blocks (thread-pool copies, no host array).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "../../array/detail/copy_box.hpp"
#include "../../array/device_mesh.hpp"
#include "../../array/sharded_array.hpp"
#include "../../array/detail/transfer.hpp"
#include "../../backend/backend.hpp"
#include "../../core/layout.hpp"
#include "../../detail/buffer.hpp"

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
    return static_cast<std::size_t>(std::count_if(transfers.begin(), transfers.end(),
                                                  [](const move_transfer& t) { return t.moves(); }));
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

// Runs `plan` where every source block is in this process's memory: each target device
// allocates its block and copies its boxes from the source blocks.
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE std::vector<buffer<T>> run_move_in_process(
    const move_plan& plan, const placement<Rank>& from, const placement<Rank>& to,
    const shape<Rank>& global, const std::vector<buffer<T>>& source) {
  std::vector<buffer<T>> out(to.mesh.size);
  to.b.run(to.devices, [&](std::size_t q) {
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
    out[q] = std::move(block);
  });
  return out;
}

// Whether every device of b lives in this process (the thread pool; MPI with one rank).
inline bool in_process(const backend& b) { return b.process_count() == 1; }

// move_array<Spec>(a, target): a (fully reduced) on target, sharded by Spec, any mesh type.
// In one process: the plan's copies, each target device assembling its own block. Across
// processes (MPI): through the host (to_host, then device_put), which every process calls.
template <spec_type Spec, class T, class Mesh, class S, class E, mesh_type Target>
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
  return device_put<Spec, E>(target, to_host(a));
}

}  // namespace detail
}  // namespace typeshard
