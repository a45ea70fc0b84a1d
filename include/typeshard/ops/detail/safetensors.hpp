// typeshard/ops/detail/safetensors.hpp: the safetensors file format (Hugging Face's
// safetensors: an 8-byte little-endian header length N, N bytes of JSON, then the tensors'
// raw little-endian bytes), CRC-32 (zlib's, as Python's zlib.crc32), and the POSIX file
// calls a checkpoint needs (write, fsync, rename, pread).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "../../backend/backend.hpp"
#include "json.hpp"

namespace typeshard::checkpoint::detail {

// crc32(data, n, crc): zlib's CRC-32 (reflected polynomial 0xEDB88320), continuing from crc;
// eight bytes per step through eight tables ("slicing-by-8").
inline std::uint32_t crc32(const void* data, std::size_t n, std::uint32_t crc = 0) {
  using tables = std::array<std::array<std::uint32_t, 256>, 8>;
  static const tables t = [] {
    tables out{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      out[0][i] = c;
    }
    for (std::size_t s = 1; s < 8; ++s)
      for (std::uint32_t i = 0; i < 256; ++i)
        out[s][i] = (out[s - 1][i] >> 8) ^ out[0][out[s - 1][i] & 0xFF];
    return out;
  }();
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    const std::uint32_t lo = crc ^ (std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 |
                                    std::uint32_t{p[2]} << 16 | std::uint32_t{p[3]} << 24);
    crc = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
          t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
  }
  for (; n > 0; --n, ++p) crc = t[0][(crc ^ *p) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

inline std::string hex32(std::uint32_t v) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(8, '0');
  for (int d = 7; d >= 0; --d, v >>= 4) out[std::size_t(d)] = hex[v & 0xF];
  return out;
}

// The safetensors dtype of an element type ("F32", "I64", ...), or "" if it has none.
inline std::string dtype_name(element_type t) {
  switch (t.kind) {
    case element_kind::float32: return "F32";
    case element_kind::float64: return "F64";
    case element_kind::bfloat16: return "BF16";
    case element_kind::int8: return "I8";
    case element_kind::uint8: return "U8";
    case element_kind::int16: return "I16";
    case element_kind::uint16: return "U16";
    case element_kind::int32: return "I32";
    case element_kind::uint32: return "U32";
    case element_kind::int64: return "I64";
    case element_kind::uint64: return "U64";
    default: return "";
  }
}

// One tensor of a safetensors file: its name, dtype, shape and bytes.
struct tensor_entry {
  std::string name;
  std::string dtype;
  std::vector<std::size_t> shape;
  const void* data = nullptr;
  std::size_t bytes = 0;
};

// The header of a file holding `tensors` in order (data offsets consecutive), with the
// metadata given (string values), padded with spaces to a multiple of 8 bytes as the format
// recommends. Returns the 8 length bytes followed by the JSON.
inline std::string safetensors_header(const std::vector<tensor_entry>& tensors,
                                      const json& metadata) {
  json h = json::object();
  std::uint64_t offset = 0;
  for (const tensor_entry& t : tensors) {
    json e = json::object();
    e.fields["dtype"] = json(t.dtype);
    json shape = json::array();
    for (std::size_t s : t.shape) shape.items.push_back(json(std::uint64_t{s}));
    e.fields["shape"] = shape;
    json offsets = json::array();
    offsets.items.push_back(json(offset));
    offsets.items.push_back(json(offset + t.bytes));
    e.fields["data_offsets"] = offsets;
    h.fields[t.name] = e;
    offset += t.bytes;
  }
  h.fields["__metadata__"] = metadata;
  std::string text = to_json(h);
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  std::uint64_t n = text.size();
  for (int b = 0; b < 8; ++b, n >>= 8) out[std::size_t(b)] = static_cast<char>(n & 0xFF);
  return out + text;
}

// ---- files ----------------------------------------------------------------------------------

struct io_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void throw_io(const std::string& what, const std::filesystem::path& p) {
  throw io_error(what + " " + p.string() + ": " + std::strerror(errno));
}

// An open file descriptor, closed on destruction.
class file {
 public:
  file() = default;
  file(const std::filesystem::path& p, int flags) : path_(p) {
    fd_ = ::open(p.c_str(), flags | O_CLOEXEC, 0644);
    if (fd_ < 0) throw_io("cannot open", p);
  }
  file(file&& o) noexcept : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)) {}
  file& operator=(file&& o) noexcept {
    std::swap(fd_, o.fd_);
    std::swap(path_, o.path_);
    return *this;
  }
  ~file() {
    if (fd_ >= 0) ::close(fd_);
  }

  void write_all(const void* data, std::size_t n) {
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        throw_io("cannot write", path_);
      }
      p += w;
      n -= std::size_t(w);
    }
  }
  void sync() {
    if (::fsync(fd_) != 0) throw_io("cannot fsync", path_);
  }
  // Reads exactly n bytes at offset; false if the file ends first.
  bool read_at(void* data, std::size_t n, std::uint64_t offset) const {
    auto* p = static_cast<char*>(data);
    while (n > 0) {
      const ssize_t r = ::pread(fd_, p, n, static_cast<off_t>(offset));
      if (r < 0) {
        if (errno == EINTR) continue;
        throw_io("cannot read", path_);
      }
      if (r == 0) return false;
      p += r;
      n -= std::size_t(r);
      offset += std::uint64_t(r);
    }
    return true;
  }
  std::uint64_t size() const {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw_io("cannot stat", path_);
    return std::uint64_t(st.st_size);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  int fd_ = -1;
  std::filesystem::path path_;
};

// fsync of a directory, so that the names created or renamed in it are durable.
inline void sync_directory(const std::filesystem::path& dir) {
  file d(dir, O_RDONLY | O_DIRECTORY);
  d.sync();
}

// A parsed safetensors header: the JSON and where the data section starts.
struct parsed_header {
  json header;
  std::uint64_t data_start = 0;
};

// Reads and parses f's header; throws json_error or io_error describing what is wrong.
inline parsed_header read_header(const file& f) {
  unsigned char len[8];
  if (!f.read_at(len, 8, 0)) throw io_error("the file ends inside its header length");
  std::uint64_t n = 0;
  for (int b = 7; b >= 0; --b) n = (n << 8) | len[b];
  if (n > (std::uint64_t{1} << 30) || n + 8 > f.size())
    throw io_error("the header length " + std::to_string(n) + " exceeds the file");
  std::string text(n, '\0');
  if (!f.read_at(text.data(), n, 8)) throw io_error("the file ends inside its header");
  return {parse_json(text), 8 + n};
}

}  // namespace typeshard::checkpoint::detail
