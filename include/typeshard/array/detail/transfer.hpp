// typeshard/array/detail/transfer.hpp: moving an array's blocks between the host and the
// devices, with the mesh and spec as values. Internal: do not rely on anything in detail/.
//
// ts::device_put, ts::to_host and addressable_shards are thin typed wrappers (they check the
// types at compile time) around these functions, which take the mesh as a value
// (core/detail/mesh_value.hpp) and the spec as a spec_array: templates of the element type
// and rank only, so one instantiation serves every mesh and spec of a program (a program
// with many shardings otherwise compiled a copy of each per array type), kept out of line
// (TYPESHARD_NOINLINE), and compiled once in typeshard::runtime for the common element types
// and ranks (extern template below).
#pragma once

#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "../../backend/backend.hpp"
#include "../../backend/detail/function_ref.hpp"
#include "../../core/config.hpp"
#include "../../core/detail/mesh_value.hpp"
#include "../../core/errors.hpp"
#include "../../core/layout.hpp"
#include "buffer.hpp"
#include "../host_tensor.hpp"
#include "copy_box.hpp"

namespace typeshard::detail {

// Which devices hold an array's blocks, and how: what the run-time code needs of its type.
template <std::size_t Rank>
struct placement {
  backend& b;
  std::span<const device_id> devices;  // by mesh position
  mesh_value mesh;
  spec_array<Rank> spec;
};

// Where a block sits in the global array: its first element, and its extents.
template <std::size_t Rank>
void box_of(const index_slices<Rank>& ix, shape<Rank>& origin, shape<Rank>& local) {
  for (std::size_t d = 0; d < Rank; ++d) {
    origin[d] = ix[d].start;
    local[d] = ix[d].size();
  }
}

// device_put's failure, out of line: a function of values, one copy per TU.
[[noreturn]] TYPESHARD_COLD inline void throw_make_block_shape(const std::string& got,
                                                               const std::string& slices,
                                                               std::size_t p,
                                                               const std::string& want) {
  throw shape_error("typeshard: device_put: make_block returned a block of shape " + got +
                    " for the slices " + slices + " of mesh position " + std::to_string(p) +
                    ", which have shape " + want + "; return exactly the slices asked for");
}

// Each device copies its slices of `host` (device_put of host data).
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE std::vector<buffer<T>> blocks_from_host(const placement<Rank>& at,
                                                           const host_tensor<T, Rank>& host) {
  std::vector<buffer<T>> out(at.mesh.size);
  at.b.run(at.devices, [&](std::size_t p) {
    shape<Rank> origin{}, local{};
    box_of(index_of(at.mesh, at.spec, host.extents(), p), origin, local);
    buffer<T> blk(host_tensor<T, Rank>::element_count(local));
    copy_box(host.data(), host.extents(), origin, blk.data(), local, shape<Rank>{}, local);
    out[p] = std::move(blk);
  });
  return out;
}

// Each device's block from make_block(its slices), checked to have their shape (device_put
// with a callback).
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE std::vector<buffer<T>> blocks_from_callback(
    const placement<Rank>& at, const shape<Rank>& global,
    function_ref<host_tensor<T, Rank>(const index_slices<Rank>&)> make_block) {
  std::vector<buffer<T>> out(at.mesh.size);
  at.b.run(at.devices, [&](std::size_t p) {
    const index_slices<Rank> ix = index_of(at.mesh, at.spec, global, p);
    const shape<Rank> local = local_shape_of(at.mesh, at.spec, global, p);
    const host_tensor<T, Rank> block = make_block(ix);
    if (block.extents() != local)
      throw_make_block_shape(to_string(block.extents()), to_string(ix), p, to_string(local));
    buffer<T> blk(block.size());
    if (block.size() != 0) std::memcpy(blk.data(), block.data(), block.size() * sizeof(T));
    out[p] = std::move(blk);
  });
  return out;
}

// to_host where this process does not address every device (MPI): the primary blocks are
// all-gathered over the whole mesh (JAX's process_allgather), then placed.
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE void gather_blocks_to_host(const placement<Rank>& at,
                                              const std::vector<buffer<T>>& blocks,
                                              host_tensor<T, Rank>& out) {
  const std::size_t n = at.mesh.size;
  const shape<Rank> global = out.extents();
  std::size_t first = n;  // the first addressable position places the result
  for (std::size_t p = n; p-- > 0;)
    if (at.b.is_addressable(at.devices[p])) first = p;
  if (first == n) return;  // a process outside the mesh gets it by broadcast_host_tensor
  std::vector<std::size_t> everyone(n), counts(n), offsets(n);
  std::size_t total = 0;
  for (std::size_t p = 0; p < n; ++p) {
    everyone[p] = p;
    counts[p] = replica_index_of(at.mesh, at.spec, p) == 0
                    ? host_tensor<T, Rank>::element_count(local_shape_of(at.mesh, at.spec,
                                                                         global, p))
                    : 0;  // replicas hold the same slices: send each once
    offsets[p] = total;
    total += counts[p];
  }
  at.b.run(at.devices, [&](std::size_t p) {
    buffer<T> all(total);
    at.b.all_gather(collective_group{everyone, p, {}, "to_host"}, element_type_of<T>,
                    blocks[p].data(), all.data(), 1, counts);
    if (p != first) return;
    for (std::size_t q = 0; q < n; ++q) {
      if (counts[q] == 0) continue;
      shape<Rank> origin{}, local{};
      box_of(index_of(at.mesh, at.spec, global, q), origin, local);
      copy_box(all.data() + offsets[q], local, shape<Rank>{}, out.data(), global, origin,
               local);
    }
  });
}

// After gather_blocks_to_host: the whole array from the mesh's first device to every device
// of the backend (an all-gather in which only that device contributes, i.e. a broadcast over
// all processes). Needed when the mesh holds only some of the devices, so that to_host works
// on every process of an SPMD program, as jax.experimental.multihost_utils.process_allgather
// does; it makes to_host collective over all processes in that case.
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE void broadcast_host_tensor(backend& b, device_id source,
                                              host_tensor<T, Rank>& out) {
  const std::size_t n = b.device_count();
  std::vector<device_id> all(n);
  std::vector<std::size_t> members(n), counts(n, 0);
  for (std::size_t d = 0; d < n; ++d) all[d] = members[d] = d;
  counts[source] = host_tensor<T, Rank>::element_count(out.extents());
  b.run(std::span<const device_id>(all), [&](std::size_t p) {
    buffer<T> received(counts[source]);
    b.all_gather(collective_group{members, p, {}, "to_host broadcast"}, element_type_of<T>,
                 p == source ? out.data() : nullptr, received.data(), 1, counts);
    if (p != source && counts[source] != 0)
      std::memcpy(out.data(), received.data(), counts[source] * sizeof(T));
  });
}

// The whole array in host memory (ts::to_host): each primary block copies itself in place
// when this process holds every block (the thread pool), else the blocks are gathered; with
// several processes, those outside the mesh then receive it by a broadcast, decided the same
// way on every process.
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE host_tensor<T, Rank> host_from_blocks(const placement<Rank>& at,
                                                         const shape<Rank>& global,
                                                         const std::vector<buffer<T>>& blocks) {
  host_tensor<T, Rank> out(global);
  bool all_here = true;
  for (device_id d : at.devices) all_here = all_here && at.b.is_addressable(d);
  if (!all_here) {
    gather_blocks_to_host<T, Rank>(at, blocks, out);
  } else {
    at.b.run(at.devices, [&](std::size_t p) {
      if (replica_index_of(at.mesh, at.spec, p) != 0) return;  // replicas hold the same slices
      shape<Rank> origin{}, local{};
      box_of(index_of(at.mesh, at.spec, global, p), origin, local);
      copy_box(blocks[p].data(), local, shape<Rank>{}, out.data(), global, origin, local);
    });
  }
  if (at.b.process_count() > 1 && at.mesh.size < at.b.device_count())
    broadcast_host_tensor<T, Rank>(at.b, at.devices[0], out);
  return out;
}

#if defined(TYPESHARD_SEPARATE_COMPILATION)
// With the separately compiled runtime (core/config.hpp), compiled once in typeshard::runtime.
#define TYPESHARD_TRANSFER_INSTANCE(prefix, T, R)                                              \
  prefix std::vector<buffer<T>> blocks_from_host<T, R>(const placement<R>&,                    \
                                                       const host_tensor<T, R>&);              \
  prefix std::vector<buffer<T>> blocks_from_callback<T, R>(                                    \
      const placement<R>&, const shape<R>&,                                                    \
      function_ref<host_tensor<T, R>(const index_slices<R>&)>);                                \
  prefix void gather_blocks_to_host<T, R>(const placement<R>&, const std::vector<buffer<T>>&,  \
                                          host_tensor<T, R>&);                                 \
  prefix void broadcast_host_tensor<T, R>(backend&, device_id, host_tensor<T, R>&);            \
  prefix host_tensor<T, R> host_from_blocks<T, R>(const placement<R>&, const shape<R>&,        \
                                                  const std::vector<buffer<T>>&);
TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(TYPESHARD_TRANSFER_INSTANCE, extern template)
#endif

}  // namespace typeshard::detail
