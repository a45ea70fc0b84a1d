// typeshard/ops/detail/checkpoint_load.hpp: reading a checkpoint step, on values: the shard
// files opened and checked against index.json, the bytes of the saved boxes that overlap a
// device's block copied into it (CRC-32 checked on request), and a whole-step verification.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <span>
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

}  // namespace typeshard::checkpoint::detail
