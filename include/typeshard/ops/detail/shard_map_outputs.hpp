// typeshard/ops/detail/shard_map_outputs.hpp: the blocks a shard_mapped function returned,
// one per device, assembled into the result's sharded_array without a copy (global extents
// from the blocks' shapes, checked equal on every device this process addresses).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../../array/detail/transfer.hpp"
#include "../../array/device_mesh.hpp"
#include "../../array/sharded_array.hpp"
#include "../../backend/backend.hpp"
#include "../../core/config.hpp"
#include "../../core/detail/mesh_value.hpp"
#include "../../core/errors.hpp"
#include "../../core/extents.hpp"
#include "../../core/layout.hpp"
#include "../../array/detail/buffer.hpp"

namespace typeshard::detail {

// What the devices return for one output: a buffer and a shape per mesh position.
template <class B>
struct output_parts {
  std::vector<buffer<typename B::value_type>> buffers;
  std::vector<shape<B::rank>> shapes;
  explicit output_parts(std::size_t n) : buffers(n), shapes(n) {}
};

[[noreturn]] TYPESHARD_COLD inline void throw_unequal_output_blocks(std::size_t output,
                                                                  std::size_t first,
                                                                  const std::string& first_shape,
                                                                  std::size_t p,
                                                                  const std::string& shape) {
  throw shape_error("typeshard: shard_map: output " + std::to_string(output) +
                    ": the device at mesh position " + std::to_string(first) +
                    " returned a block of shape " + first_shape + " but the one at position " +
                    std::to_string(p) + " one of shape " + shape +
                    "; every device must return blocks of equal shape");
}

// The global extents of an output of spec `spec` from the shapes of its blocks, checked to
// be equal: on values, one instantiation per rank.
template <std::size_t R>
TYPESHARD_NOINLINE shape<R> assembled_extents(backend& b, std::span<const device_id> devices,
                                              const mesh_value& m, const spec_array<R>& spec,
                                              const std::vector<shape<R>>& shapes,
                                              std::size_t output) {
  // Only the devices this process addresses returned blocks (all of them on the thread
  // pool, one per rank on MPI): compare those, and size the result from the first.
  std::size_t first = m.size;
  for (std::size_t p = 0; p < m.size; ++p) {
    if (!b.is_addressable(devices[p])) continue;
    if (first == m.size) first = p;
    if (shapes[p] != shapes[first])
      throw_unequal_output_blocks(output, first, to_string(shapes[first]), p,
                                  to_string(shapes[p]));
  }
  shape<R> global{};
  if (first < m.size)
    for (std::size_t d = 0; d < R; ++d) global[d] = shapes[first][d] * shards_of(m, spec[d]);
  // With several processes (MPI) and a mesh that leaves some out, those ran no block and
  // cannot size the result: the mesh's first device sends them its extents, decided alike on
  // every process as to_host's broadcast is (so their to_host of it matches the others').
  if (b.process_count() > 1 && m.size < b.device_count()) {
    host_tensor<std::uint64_t, 1> extents(shape<1>{R});
    for (std::size_t d = 0; d < R; ++d) extents.data()[d] = global[d];
    broadcast_host_tensor(b, devices[0], extents);
    for (std::size_t d = 0; d < R; ++d) global[d] = static_cast<std::size_t>(extents.data()[d]);
  }
  return global;
}

template <class Mesh, class Spec, class B>
auto assemble_output(const device_mesh<Mesh>& m, output_parts<B>& parts, std::size_t output) {
  constexpr std::size_t R = B::rank;
  const shape<R> global = assembled_extents<R>(
      m.get_backend(), std::span<const device_id>(m.devices()), mesh_value_of<Mesh>(),
      layout<Mesh, Spec, R>::entries, parts.shapes, output);
  return sharded_array<typename B::value_type, Mesh, Spec, dextents<R>>(
      adopt_shards, m, global, std::move(parts.buffers));
}

}  // namespace typeshard::detail
