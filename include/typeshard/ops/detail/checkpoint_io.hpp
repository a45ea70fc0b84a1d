// typeshard/ops/detail/checkpoint_io.hpp: the run-time part of ops/checkpoint.hpp, on values
// (arrays as their boxes and bytes): writing a step's files in parallel and atomically,
// reading index.json, and reading the bytes of the boxes a device needs.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
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
#include "json.hpp"
#include "safetensors.hpp"

namespace typeshard::checkpoint {

// checkpoint_error: a checkpoint that cannot be written or read: a missing, truncated or
// damaged file (file() names it), an unknown array, a dtype or rank other than saved.
class checkpoint_error : public error {
 public:
  checkpoint_error(std::filesystem::path file, const std::string& what)
      : error("typeshard: checkpoint file " + file.string() + ": " + what),
        file_(std::move(file)) {}
  const std::filesystem::path& file() const noexcept { return file_; }

 private:
  std::filesystem::path file_;
};

namespace detail {

namespace fs = std::filesystem;

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

inline std::string box_string(const std::vector<slice>& box) {
  std::string s;
  for (std::size_t d = 0; d < box.size(); ++d) {
    if (d) s += ',';
    s += std::to_string(box[d].start) + ':' + std::to_string(box[d].stop);
  }
  return s;
}

inline std::size_t element_count(const std::vector<slice>& box) {
  std::size_t n = 1;
  for (const slice& s : box) n *= s.size();
  return n;
}

inline std::string shard_file_name(device_id d) {
  return "shards-" + std::to_string(d) + ".safetensors";
}

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

// ---- reading --------------------------------------------------------------------------------

struct saved_shard {
  std::string file, tensor;
  std::vector<slice> box;
};

struct index_entry {
  std::string dtype;
  std::vector<std::size_t> shape;
  std::vector<saved_shard> shards;
};

struct checkpoint_index {
  std::uint64_t step = 0;
  std::map<std::string, index_entry> arrays;
  std::map<std::string, std::uint64_t> file_bytes;  // each file's data section

  const index_entry& array(const fs::path& dir, const std::string& name) const {
    const auto it = arrays.find(name);
    if (it != arrays.end()) return it->second;
    std::string known;
    for (const auto& [n, e] : arrays) known += (known.empty() ? "" : ", ") + n;
    throw checkpoint_error(dir / "index.json",
                           "holds no array named \"" + name + "\" (it holds: " + known + ")");
  }
};

inline std::string read_whole(const fs::path& p) {
  file f(p, O_RDONLY);
  std::string text(f.size(), '\0');
  if (!f.read_at(text.data(), text.size(), 0)) throw io_error("short read of " + p.string());
  return text;
}

inline checkpoint_index read_index(const fs::path& dir) {
  const fs::path path = dir / "index.json";
  try {
    const json j = parse_json(read_whole(path));
    if (j.at("format").string() != "typeshard-checkpoint")
      throw json_error("not a typeshard checkpoint index");
    checkpoint_index out;
    out.step = j.at("step").integer();
    for (const auto& [name, e] : j.at("arrays").fields) {
      index_entry entry;
      entry.dtype = e.at("dtype").string();
      for (const json& x : e.at("shape").list()) entry.shape.push_back(x.integer());
      for (const json& s : e.at("shards").list()) {
        saved_shard sh{s.at("file").string(), s.at("tensor").string(), {}};
        const auto& start = s.at("start").list();
        const auto& stop = s.at("stop").list();
        if (start.size() != entry.shape.size() || stop.size() != entry.shape.size())
          throw json_error("a shard of \"" + name + "\" has a box of another rank");
        for (std::size_t d = 0; d < start.size(); ++d) {
          sh.box.push_back({start[d].integer(), stop[d].integer()});
          if (sh.box[d].start > sh.box[d].stop || sh.box[d].stop > entry.shape[d])
            throw json_error("a shard of \"" + name + "\" lies outside the array");
        }
        entry.shards.push_back(std::move(sh));
      }
      out.arrays[name] = std::move(entry);
    }
    for (const auto& [name, f] : j.at("files").fields)
      out.file_bytes[name] = f.at("data_bytes").integer();
    return out;
  } catch (const json_error& e) {
    throw checkpoint_error(path, e.what());
  } catch (const io_error& e) {
    throw checkpoint_error(path, e.what());
  }
}

inline std::vector<std::uint64_t> complete_steps(const fs::path& root) {
  std::vector<std::uint64_t> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(root)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) {
          return c >= '0' && c <= '9';
        }))
      continue;
    if (name.size() > 19) continue;
    if (fs::exists(e.path() / "index.json")) out.push_back(std::stoull(name));
  }
  std::sort(out.begin(), out.end());
  return out;
}

template <std::size_t Rank>
shape<Rank> check_entry(const fs::path& dir, const std::string& name, const index_entry& e,
                        const std::string& dtype) {
  if (e.shape.size() != Rank)
    throw checkpoint_error(dir / "index.json", "\"" + name + "\" has rank " +
                                                   std::to_string(e.shape.size()) +
                                                   ", not the " + std::to_string(Rank) +
                                                   " asked for");
  if (e.dtype != dtype)
    throw checkpoint_error(dir / "index.json", "\"" + name + "\" holds " + e.dtype +
                                                   " elements, not the " + dtype +
                                                   " asked for");
  shape<Rank> s{};
  for (std::size_t d = 0; d < Rank; ++d) s[d] = e.shape[d];
  return s;
}

// An open shard file with its parsed header, checked against the index.
struct open_shard_file {
  file f;
  parsed_header h;
};

inline open_shard_file open_checked(const fs::path& dir, const std::string& name,
                                    std::uint64_t data_bytes) {
  const fs::path path = dir / name;
  try {
    open_shard_file o{file(path, O_RDONLY), {}};
    o.h = read_header(o.f);
    const std::uint64_t size = o.f.size(), expected = o.h.data_start + data_bytes;
    if (size != expected)
      throw io_error(size < expected ? "truncated: " + std::to_string(size) +
                                           " bytes where the checkpoint wrote " +
                                           std::to_string(expected)
                                     : "has " + std::to_string(size - expected) +
                                           " bytes more than the checkpoint wrote");
    return o;
  } catch (const io_error& e) {
    throw checkpoint_error(path, e.what());
  } catch (const json_error& e) {
    throw checkpoint_error(path, std::string("damaged header: ") + e.what());
  }
}

// Where `tensor` lies in the file (from its header), checked against the expected shape.
inline std::pair<std::uint64_t, std::uint64_t> tensor_range(const open_shard_file& o,
                                                            const fs::path& path,
                                                            const saved_shard& s,
                                                            std::size_t element_size) {
  try {
    const json& t = o.h.header.at(s.tensor);
    const auto& offsets = t.at("data_offsets").list();
    if (offsets.size() != 2) throw json_error("bad data_offsets");
    const std::uint64_t begin = offsets[0].integer(), end = offsets[1].integer();
    if (end < begin || end - begin != element_count(s.box) * element_size)
      throw json_error("tensor \"" + s.tensor + "\" has another size than its box");
    return {o.h.data_start + begin, o.h.data_start + end};
  } catch (const json_error& e) {
    throw checkpoint_error(path, std::string("damaged header: ") + e.what());
  }
}

inline std::uint32_t expected_crc(const open_shard_file& o, const fs::path& path,
                                  const std::string& tensor) {
  try {
    const std::string& hex = o.h.header.at("__metadata__").at("crc32:" + tensor).string();
    return static_cast<std::uint32_t>(std::stoul(hex, nullptr, 16));
  } catch (const std::exception& e) {
    throw checkpoint_error(path, "no checksum for tensor \"" + tensor + "\": " + e.what());
  }
}

// Copies the overlap of box `to` (block at dst, row-major) and saved box `from`, reading
// rows either from memory (src) or from the file at `file_offset`.
inline void copy_overlap(const std::vector<slice>& to, void* dst, const std::vector<slice>& from,
                         const unsigned char* src, const file* f, std::uint64_t file_offset,
                         std::size_t esize) {
  const std::size_t rank = to.size();
  std::vector<slice> o(rank);
  for (std::size_t d = 0; d < rank; ++d) {
    o[d] = {std::max(to[d].start, from[d].start), std::min(to[d].stop, from[d].stop)};
    if (o[d].start >= o[d].stop) return;
  }
  const std::size_t run = o[rank - 1].size() * esize;
  std::vector<std::size_t> at(rank);
  for (std::size_t d = 0; d < rank; ++d) at[d] = o[d].start;
  while (true) {
    std::size_t src_off = 0, dst_off = 0;
    for (std::size_t d = 0; d < rank; ++d) {
      src_off = src_off * from[d].size() + (at[d] - from[d].start);
      dst_off = dst_off * to[d].size() + (at[d] - to[d].start);
    }
    auto* out = static_cast<unsigned char*>(dst) + dst_off * esize;
    if (src)
      std::memcpy(out, src + src_off * esize, run);
    else if (!f->read_at(out, run, file_offset + src_off * esize))
      throw io_error("truncated while reading");
    std::size_t d = rank - 1;
    while (true) {
      if (d == 0) return;
      --d;
      if (++at[d] < o[d].stop) break;
      at[d] = o[d].start;
    }
  }
}

// Fills each addressable position's block (allocated by `block(p, bytes)`, with the box
// `box_of(p)`) from the saved shards that overlap it, one device per position, concurrently.
template <class BoxOf, class Block>
void load_boxes(const fs::path& dir, const index_entry& entry, std::size_t esize, backend& b,
                std::span<const device_id> devices, bool verify, BoxOf&& box_of,
                Block&& block) {
  const checkpoint_index index = read_index(dir);
  std::vector<std::exception_ptr> failures(devices.size());
  b.run(devices, [&](std::size_t p) {
    try {
      const std::vector<slice> box = box_of(p);
      void* dst = block(p, element_count(box) * esize);
      if (element_count(box) == 0) return;
      std::map<std::string, open_shard_file> files;
      std::size_t covered = 0;
      for (const saved_shard& s : entry.shards) {
        bool overlaps = true;
        std::size_t overlap = 1;
        for (std::size_t d = 0; d < box.size(); ++d) {
          const std::size_t lo = std::max(box[d].start, s.box[d].start);
          const std::size_t hi = std::min(box[d].stop, s.box[d].stop);
          overlaps = overlaps && lo < hi;
          overlap *= overlaps ? hi - lo : 0;
        }
        if (!overlaps) continue;
        covered += overlap;
        const fs::path path = dir / s.file;
        auto it = files.find(s.file);
        if (it == files.end()) {
          const auto bytes = index.file_bytes.find(s.file);
          if (bytes == index.file_bytes.end())
            throw checkpoint_error(dir / "index.json", "lists no size for " + s.file);
          it = files.emplace(s.file, open_checked(dir, s.file, bytes->second)).first;
        }
        const open_shard_file& o = it->second;
        const auto [begin, end] = tensor_range(o, path, s, esize);
        try {
          if (verify) {
            std::vector<unsigned char> whole(end - begin);
            if (!o.f.read_at(whole.data(), whole.size(), begin))
              throw io_error("truncated while reading");
            if (crc32(whole.data(), whole.size()) != expected_crc(o, path, s.tensor))
              throw io_error("tensor \"" + s.tensor +
                             "\" does not match its checksum (a torn or damaged write)");
            copy_overlap(box, dst, s.box, whole.data(), nullptr, 0, esize);
          } else {
            copy_overlap(box, dst, s.box, nullptr, &o.f, begin, esize);
          }
        } catch (const io_error& e) {
          throw checkpoint_error(path, e.what());
        }
      }
      if (covered != element_count(box))
        throw checkpoint_error(dir / "index.json",
                               "its shards do not cover the array (a box of " +
                                   std::to_string(element_count(box)) + " elements found " +
                                   std::to_string(covered) + ")");
    } catch (...) {
      failures[p] = std::current_exception();
    }
  });
  for (const std::exception_ptr& f : failures)
    if (f) std::rethrow_exception(f);
}

// Reads every file whole: sizes, headers and each tensor's CRC-32.
inline void verify_files(const fs::path& dir) {
  const checkpoint_index index = read_index(dir);
  for (const auto& [name, bytes] : index.file_bytes) {
    const open_shard_file o = open_checked(dir, name, bytes);
    const fs::path path = dir / name;
    for (const auto& [key, value] : o.h.header.fields) {
      if (key == "__metadata__") continue;
      std::uint64_t begin = 0, end = 0;
      try {
        const auto& offsets = value.at("data_offsets").list();
        if (offsets.size() != 2) throw json_error("bad data_offsets");
        begin = offsets[0].integer();
        end = offsets[1].integer();
        if (end < begin || o.h.data_start + end > o.f.size())
          throw json_error("tensor \"" + key + "\" lies outside the file");
      } catch (const json_error& e) {
        throw checkpoint_error(path, std::string("damaged header: ") + e.what());
      }
      std::vector<unsigned char> data(end - begin);
      if (!o.f.read_at(data.data(), data.size(), o.h.data_start + begin))
        throw checkpoint_error(path, "truncated while reading");
      if (crc32(data.data(), data.size()) != expected_crc(o, path, key))
        throw checkpoint_error(path, "tensor \"" + key + "\" does not match its checksum");
    }
  }
}

}  // namespace detail
}  // namespace typeshard::checkpoint
