// typeshard/ops/detail/checkpoint_save.hpp: writing a checkpoint step, on values (arrays as
// their boxes and bytes): each device writes its primary shards into its own safetensors file
// in parallel, the first process writes index.json, and the step appears by one rename.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "../../backend/backend.hpp"
#include "../../core/errors.hpp"
#include "../../core/layout.hpp"
#include "checkpoint_index.hpp"
#include "json.hpp"
#include "safetensors.hpp"

namespace typeshard::checkpoint::detail {

// Test hook: when >= 0, a save throws checkpoint_error after writing this many more shards
// (counted over all writing devices), as a crash between shards would stop it.
inline std::atomic<std::int64_t> fault_after_shards{-1};

// One mesh position's block of an array being saved.
struct piece {
  device_id device = 0;
  std::vector<slice> box;
  std::size_t replica = 0;
  const void* data = nullptr;  // null where this process does not address the device
  std::size_t bytes = 0;
};

// An array being saved, as values.
struct saved_array {
  std::string name, dtype, spec, mesh;
  std::size_t element_size = 0;
  std::vector<std::size_t> extents;
  backend* b = nullptr;
  std::vector<piece> pieces;
  std::shared_ptr<const void> keep;
};

// What every process can compute from the layouts alone: per writing device, the shards it
// writes (primary replicas with at least one element), in a fixed order.
struct shard_ref {
  std::size_t array = 0;
  std::size_t piece = 0;
  std::string tensor;
};

inline std::map<device_id, std::vector<shard_ref>> writers_of(
    const std::vector<const saved_array*>& arrays) {
  std::map<device_id, std::vector<shard_ref>> out;
  for (std::size_t a = 0; a < arrays.size(); ++a)
    for (std::size_t p = 0; p < arrays[a]->pieces.size(); ++p) {
      const piece& pc = arrays[a]->pieces[p];
      if (pc.replica != 0 || element_count(pc.box) == 0) continue;
      out[pc.device].push_back({a, p, arrays[a]->name + "@" + box_string(pc.box)});
    }
  return out;
}

// Every device of b runs body (a barrier when body ends in a collective over all of them).
inline void all_devices_min(backend& b, std::vector<int>& flags) {
  const std::size_t n = b.device_count();
  std::vector<device_id> devices(n);
  std::vector<std::size_t> members(n);
  for (std::size_t i = 0; i < n; ++i) devices[i] = members[i] = i;
  b.run(devices, [&](std::size_t i) {
    int v = flags[i];
    b.all_reduce(collective_group{members, i, {}, "checkpoint barrier"}, element_type_of<int>,
                 reduce_op::min, &v, &v, 1);
    flags[i] = v;
  });
}

// Whether every flag of this process's devices is still 1 (after all_devices_min: whether
// every device of every process kept it).
inline bool all_addressable_set(const backend& b, const std::vector<int>& flags) {
  for (std::size_t i = 0; i < flags.size(); ++i)
    if (b.is_addressable(i) && flags[i] == 0) return false;
  return true;
}

// Writes device d's file into dir; the shards' CRC-32s go in its __metadata__.
inline void write_shard_file(const fs::path& dir, const std::vector<const saved_array*>& arrays,
                             device_id d, const std::vector<shard_ref>& shards) {
  const fs::path path = dir / shard_file_name(d);
  std::vector<tensor_entry> tensors;
  json metadata = json::object();
  metadata.fields["format"] = json("typeshard-shards");
  for (const shard_ref& s : shards) {
    const saved_array& a = *arrays[s.array];
    const piece& pc = a.pieces[s.piece];
    tensor_entry t{s.tensor, a.dtype, {}, pc.data, pc.bytes};
    for (const slice& sl : pc.box) t.shape.push_back(sl.size());
    metadata.fields["crc32:" + s.tensor] = json(hex32(crc32(pc.data, pc.bytes)));
    tensors.push_back(std::move(t));
  }
  const std::string header = safetensors_header(tensors, metadata);
  try {
    file f(path, O_WRONLY | O_CREAT | O_TRUNC);
    f.write_all(header.data(), header.size());
    for (const tensor_entry& t : tensors) {
      if (fault_after_shards.load() >= 0 && fault_after_shards.fetch_sub(1) == 0)
        throw checkpoint_error(path, "injected fault between shards (test hook)");
      f.write_all(t.data, t.bytes);
    }
    f.sync();
  } catch (const io_error& e) {
    throw checkpoint_error(path, e.what());
  }
}

inline json index_json(const std::vector<const saved_array*>& arrays, std::uint64_t step,
                       const std::map<device_id, std::vector<shard_ref>>& writers) {
  json index = json::object();
  index.fields["format"] = json("typeshard-checkpoint");
  index.fields["version"] = json(std::uint64_t{1});
  index.fields["step"] = json(step);
  json arrays_json = json::object();
  for (const saved_array* a : arrays) {
    json e = json::object();
    e.fields["dtype"] = json(a->dtype);
    json shape = json::array();
    for (std::size_t x : a->extents) shape.items.push_back(json(std::uint64_t{x}));
    e.fields["shape"] = shape;
    e.fields["spec"] = json(a->spec);
    e.fields["mesh"] = json(a->mesh);
    e.fields["shards"] = json::array();
    arrays_json.fields[a->name] = e;
  }
  json files = json::object();
  for (const auto& [device, shards] : writers) {
    std::uint64_t bytes = 0;
    for (const shard_ref& s : shards) {
      const saved_array& a = *arrays[s.array];
      const piece& pc = a.pieces[s.piece];
      json sh = json::object();
      sh.fields["file"] = json(shard_file_name(device));
      sh.fields["tensor"] = json(s.tensor);
      json start = json::array(), stop = json::array();
      for (const slice& sl : pc.box) {
        start.items.push_back(json(std::uint64_t{sl.start}));
        stop.items.push_back(json(std::uint64_t{sl.stop}));
      }
      sh.fields["start"] = start;
      sh.fields["stop"] = stop;
      arrays_json.fields[a.name].fields["shards"].items.push_back(sh);
      bytes += element_count(pc.box) * a.element_size;
    }
    json f = json::object();
    f.fields["data_bytes"] = json(bytes);
    files.fields[shard_file_name(device)] = f;
  }
  index.fields["arrays"] = arrays_json;
  index.fields["files"] = files;
  return index;
}

inline void save_arrays(const fs::path& root, std::uint64_t step,
                        const std::vector<const saved_array*>& arrays) {
  if (arrays.empty()) throw usage_error("typeshard: checkpoint::save needs at least one array");
  backend& b = *arrays[0]->b;
  std::set<std::string> seen;
  for (const saved_array* a : arrays) {
    if (a->name.empty()) throw usage_error("typeshard: checkpoint::save: an array has no name");
    if (!seen.insert(a->name).second)
      throw usage_error("typeshard: checkpoint::save: the name \"" + a->name +
                        "\" is given twice; name each array once");
    if (a->b != &b)
      throw usage_error("typeshard: checkpoint::save: \"" + a->name +
                        "\" lives on another backend than \"" + arrays[0]->name +
                        "\"; save the arrays of each backend separately");
    if (a->dtype.empty())
      throw usage_error("typeshard: checkpoint::save: \"" + a->name +
                        "\" has an element type without a safetensors dtype (use float, "
                        "double or a fixed-size integer)");
  }
  const fs::path final_dir = root / std::to_string(step);
  const fs::path tmp = root / (std::to_string(step) + ".tmp");
  const bool leader = b.process_index() == 0;
  const std::size_t n = b.device_count();
  std::vector<int> flags(n, 1);
  std::exception_ptr leader_failure;
  if (leader) {
    try {
      fs::create_directories(root);
      fs::remove_all(tmp);  // a leftover of an interrupted save of this step
      fs::create_directory(tmp);
    } catch (const fs::filesystem_error& e) {
      leader_failure = std::make_exception_ptr(checkpoint_error(tmp, e.what()));
      std::fill(flags.begin(), flags.end(), 0);
    }
  }
  all_devices_min(b, flags);  // the others wait for the directory
  if (!all_addressable_set(b, flags)) {
    if (leader_failure) std::rethrow_exception(leader_failure);
    throw checkpoint_error(tmp, "the first process could not create the directory");
  }

  const std::map<device_id, std::vector<shard_ref>> writers = writers_of(arrays);
  std::vector<std::exception_ptr> failures(n);
  {
    std::vector<device_id> devices(n);
    std::vector<std::size_t> members(n);
    for (std::size_t i = 0; i < n; ++i) devices[i] = members[i] = i;
    b.run(devices, [&](std::size_t i) {
      int ok = 1;
      try {
        const auto w = writers.find(i);
        if (w != writers.end()) write_shard_file(tmp, arrays, i, w->second);
      } catch (...) {
        failures[i] = std::current_exception();
        ok = 0;
      }
      b.all_reduce(collective_group{members, i, {}, "checkpoint barrier"}, element_type_of<int>,
                   reduce_op::min, &ok, &ok, 1);
      flags[i] = ok;
    });
  }
  if (!all_addressable_set(b, flags)) {
    if (leader) {
      std::error_code ignored;
      fs::remove_all(tmp, ignored);  // best effort: the previous steps are untouched anyway
    }
    for (const std::exception_ptr& f : failures)
      if (f) std::rethrow_exception(f);
    throw checkpoint_error(tmp, "another process failed to write its shards");
  }

  std::fill(flags.begin(), flags.end(), 1);
  if (leader) {
    try {
      const std::string text = to_json(index_json(arrays, step, writers));
      {
        file f(tmp / "index.json", O_WRONLY | O_CREAT | O_TRUNC);
        f.write_all(text.data(), text.size());
        f.sync();
      }
      sync_directory(tmp);
      const fs::path old = root / (std::to_string(step) + ".old");
      fs::remove_all(old);
      if (fs::exists(final_dir)) fs::rename(final_dir, old);
      fs::rename(tmp, final_dir);
      sync_directory(root);
      fs::remove_all(old);
    } catch (const io_error& e) {
      leader_failure = std::make_exception_ptr(checkpoint_error(tmp / "index.json", e.what()));
    } catch (const fs::filesystem_error& e) {
      leader_failure = std::make_exception_ptr(checkpoint_error(final_dir, e.what()));
    }
    if (leader_failure) std::fill(flags.begin(), flags.end(), 0);
  }
  all_devices_min(b, flags);  // nobody returns before the rename
  if (leader_failure) std::rethrow_exception(leader_failure);
  if (!all_addressable_set(b, flags))
    throw checkpoint_error(final_dir, "the first process could not publish the checkpoint");
}

}  // namespace typeshard::checkpoint::detail
