// typeshard/ops/checkpoint.hpp: save sharded arrays, each device (or MPI rank) writing its own
// shards in parallel, and restore them onto any mesh, spec, device count or backend, each
// device reading only the bytes of its own shard (Orbax's and PyTorch Distributed
// Checkpoint's save on N, load on M).
//
//   ts::checkpoint::save(root, step, {{"w1", W1}, {"adam/m/w1", M1}});   // root/<step>/
//   auto step = ts::checkpoint::latest_step(root);                          // the newest whole one
//   auto dir = ts::checkpoint::step_path(root, *step);
//   auto W = ts::checkpoint::load<ts::spec<ts::none, "y">, float, 2>(dir, "w1", other_mesh);
//
// The format (docs/checkpoints.md): a directory root/<step> holding one safetensors file per
// writing device, shards-<device>.safetensors, with that device's primary shards as tensors
// named "<array>@<start>:<stop>,..." and a CRC-32 of each in the file's __metadata__, and
// index.json: the step and, per array, its dtype, global shape, spec, mesh and which file
// holds each box. A save writes into root/<step>.tmp, fsyncs every file, and renames it to
// root/<step> only when every device has written: a crash leaves the previous steps intact.
// A truncated, torn or missing file is a checkpoint_error naming the file.
//
// Not included by typeshard.hpp (as backend/mpi.hpp is not): <filesystem> and the file I/O
// add ~0.6 s of g++ time to every translation unit that parses the umbrella; include this
// header where a program saves or loads.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../array/device_mesh.hpp"
#include "../array/sharded_array.hpp"
#include "../backend/backend.hpp"
#include "../core/diagnostics.hpp"
#include "../core/errors.hpp"
#include "../core/extents.hpp"
#include "../core/layout.hpp"
#include "../core/mesh.hpp"
#include "../core/spec.hpp"
#include "detail/checkpoint_io.hpp"

namespace typeshard::checkpoint {

// item: one named array of a checkpoint (any element type with a safetensors dtype, any
// mesh, spec and rank; fully reduced: rule 3). Keeps the array's shards alive until the save
// ends.
class item {
 public:
  template <sharded_array_like A>
  item(std::string name, const A& a) {
    if constexpr (!A::unreduced_type::empty) {
      static_assert(typeshard::detail::require<
                    false, diagnostic::checkpoint_unreduced<typename A::unreduced_type>>::value);
    } else {
      init(std::move(name), a);
    }
  }

  const detail::saved_array& saved() const { return s_; }

 private:
  template <sharded_array_like A>
  void init(std::string name, const A& a) {
    using T = typename A::value_type;
    using Mesh = typename A::mesh_type;
    constexpr std::size_t Rank = A::rank;
    s_.name = std::move(name);
    s_.dtype = detail::dtype_name(element_type_of<T>);
    s_.element_size = sizeof(T);
    s_.spec = typeshard::detail::spec_string(A::layout_type::entries);
    s_.mesh = Mesh::to_string();
    s_.extents.assign(a.extents().begin(), a.extents().end());
    s_.b = &a.device_mesh().get_backend();
    s_.keep = a.shared_shards();
    const typeshard::detail::mesh_value mv = typeshard::detail::mesh_value_of<Mesh>();
    for (std::size_t p = 0; p < Mesh::size; ++p) {
      detail::piece pc;
      pc.device = a.device_mesh().device_at(p);
      const index_slices<Rank> ix = a.index(p);
      pc.box.assign(ix.begin(), ix.end());
      pc.replica = typeshard::detail::replica_index_of(mv, A::layout_type::entries, p);
      const std::span<const T> data = a.local_data(p);
      pc.data = data.data();
      pc.bytes = data.size_bytes();
      s_.pieces.push_back(std::move(pc));
    }
  }

  detail::saved_array s_;
};

// step_path(root, step): the directory of a step's checkpoint, root/<step>.
[[nodiscard]] inline std::filesystem::path step_path(const std::filesystem::path& root,
                                                     std::uint64_t step) {
  return root / std::to_string(step);
}

// save(root, step, items): writes root/<step> atomically (see above). Every device that holds
// a primary shard writes its own file, concurrently; under MPI every process must call it
// (root on a file system they share). Replaces an existing root/<step>. Throws
// checkpoint_error (the file that failed) or usage_error (no items, names repeated or empty,
// arrays on different backends, an element type without a safetensors dtype).
inline void save(const std::filesystem::path& root, std::uint64_t step,
                 const std::vector<item>& items) {
  std::vector<const detail::saved_array*> arrays;
  for (const item& i : items) arrays.push_back(&i.saved());
  detail::save_arrays(root, step, arrays);
}

// steps(root): the steps with a whole checkpoint under root, ascending (root/<step> holding
// an index.json; leftover root/<step>.tmp directories of interrupted saves are ignored).
[[nodiscard]] inline std::vector<std::uint64_t> steps(const std::filesystem::path& root) {
  return detail::complete_steps(root);
}

// latest_step(root): the newest whole checkpoint's step, if any.
[[nodiscard]] inline std::optional<std::uint64_t> latest_step(const std::filesystem::path& root) {
  const std::vector<std::uint64_t> s = detail::complete_steps(root);
  if (s.empty()) return std::nullopt;
  return s.back();
}

// step_of(dir): the step a checkpoint directory was saved with.
[[nodiscard]] inline std::uint64_t step_of(const std::filesystem::path& dir) {
  return detail::read_index(dir).step;
}

// names(dir): the arrays a checkpoint holds, sorted.
[[nodiscard]] inline std::vector<std::string> names(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& [name, a] : detail::read_index(dir).arrays) out.push_back(name);
  return out;
}

// verify(dir): reads every file of the checkpoint whole and checks its size and each
// tensor's CRC-32; throws checkpoint_error naming the first bad file.
inline void verify(const std::filesystem::path& dir) { detail::verify_files(dir); }

// load_options: verify_checksums reads each saved shard a device needs whole and checks its
// CRC-32 (the default); without it a device reads only the bytes of its own box (file sizes
// are still checked, so truncation is still caught).
struct load_options {
  bool verify_checksums = true;
};

// load<Spec, T, Rank>(dir, name, m): the array `name` of the checkpoint in dir, sharded by
// Spec on device mesh m (any mesh, spec, device count or backend, whatever it was saved on);
// each device reads only the saved shards that overlap its own. Throws checkpoint_error for
// a missing or damaged file, an unknown name, or a dtype or rank other than saved.
template <spec_like Spec, class T, std::size_t Rank, mesh_like Mesh>
[[nodiscard]] sharded_array<T, Mesh, Spec, dextents<Rank>> load(
    const std::filesystem::path& dir, const std::string& name, const device_mesh<Mesh>& m,
    load_options options = {}) {
  using array_type = sharded_array<T, Mesh, Spec, dextents<Rank>>;
  const detail::index_entry entry = detail::read_index(dir).array(dir, name);
  const shape<Rank> global =
      detail::check_entry<Rank>(dir, name, entry, detail::dtype_name(element_type_of<T>));
  std::vector<typeshard::detail::buffer<T>> blocks(Mesh::size);
  const auto at = typeshard::detail::placement_of<Mesh, typename array_type::spec, Rank>(m);
  detail::load_boxes(
      dir, entry, sizeof(T), at.b, at.devices, options.verify_checksums,
      [&](std::size_t p) {
        const index_slices<Rank> ix = typeshard::detail::index_of(at.mesh, at.spec, global, p);
        return std::vector<slice>(ix.begin(), ix.end());
      },
      [&](std::size_t p, std::size_t bytes) {
        blocks[p] = typeshard::detail::buffer<T>(bytes / sizeof(T));
        return static_cast<void*>(blocks[p].data());
      });
  return array_type(adopt_shards, m, global, std::move(blocks));
}

}  // namespace typeshard::checkpoint
