// examples/support/blocks.hpp: every device's block of an array, on every process that holds
// a device of its mesh, so that an example prints the same per-device listing on the thread
// backend and under MPI (where addressable_shards() holds one rank's block only).
//
// Not part of the library: the seeds print what each device holds, which a multi-process
// program can only do by moving the blocks (JAX's multihost_utils.process_allgather of the
// per-device data). Unreduced arrays too: their blocks are the partial values.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace examples {

namespace ts = typeshard;

// blocks[p] is the block at mesh position p, as a host tensor of its local shape. Collective:
// every process holding a device of a's mesh must call it; a process holding none of them
// gets an empty vector.
template <class Array>
std::vector<ts::host_tensor<typename Array::value_type, Array::rank>> every_block(const Array& a) {
  using T = typename Array::value_type;
  constexpr std::size_t size = Array::mesh_type::size;
  const auto& m = a.device_mesh();
  ts::backend& b = m.get_backend();
  std::vector<std::size_t> members(size), counts(size);
  std::size_t total = 0;
  for (std::size_t p = 0; p < size; ++p) {
    members[p] = p;
    counts[p] = ts::host_tensor<T, Array::rank>::element_count(a.local_shape(p));
    total += counts[p];
  }
  std::size_t first = size;  // the first position this process holds keeps the gathered blocks
  for (std::size_t p = size; p-- > 0;)
    if (b.is_addressable(m.device_at(p))) first = p;
  if (first == size) return {};
  std::vector<T> all(total);
  b.run(m.devices(), [&](std::size_t p) {
    std::vector<T> received(total);
    b.all_gather(ts::collective_group{members, p}, ts::element_type_of<T>, a.local_data(p).data(),
                 received.data(), 1, counts);
    if (p == first) all = std::move(received);
  });
  std::vector<ts::host_tensor<T, Array::rank>> out;
  std::size_t offset = 0;
  for (std::size_t p = 0; p < size; ++p) {
    out.emplace_back(a.local_shape(p),
                     std::vector<T>(all.begin() + static_cast<std::ptrdiff_t>(offset),
                                    all.begin() + static_cast<std::ptrdiff_t>(offset + counts[p])));
    offset += counts[p];
  }
  return out;
}

}  // namespace examples
