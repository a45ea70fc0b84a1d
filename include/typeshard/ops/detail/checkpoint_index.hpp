// typeshard/ops/detail/checkpoint_index.hpp: what a checkpoint step holds, as values: the
// error type, the boxes of saved shards and their file names, index.json read back, the
// steps present under a root, and an array's entry checked against the type asked for.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
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

}  // namespace detail
}  // namespace typeshard::checkpoint
