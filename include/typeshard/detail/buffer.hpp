// typeshard/detail/buffer.hpp: the memory of one shard.
// Internal: do not rely on anything in detail/.
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <type_traits>

#include "../errors.hpp"

namespace typeshard::detail {

// Cache-line alignment keeps two devices' shards off each other's lines and suits SIMD.
inline constexpr std::size_t shard_alignment = 64;

// buffer<T>: n elements, 64-byte aligned, uninitialised until written. Allocated by the
// device that owns it (inside that device's function), so its pages are first touched
// there.
template <class T>
class buffer {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "typeshard: sharded arrays hold trivially copyable element types "
                "(arithmetic types, std::complex, plain structs)");

 public:
  buffer() = default;
  explicit buffer(std::size_t n)
      : data_(n == 0 ? nullptr
                     : static_cast<T*>(::operator new[](bytes(n),
                                                       std::align_val_t{shard_alignment}))),
        size_(n) {}

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  std::span<T> span() { return {data(), size_}; }
  std::span<const T> span() const { return {data(), size_}; }

 private:
  // n * sizeof(T), or a shape_error if that overflows size_t (n * sizeof(T) would wrap to
  // a small allocation that the n elements then overrun).
  static std::size_t bytes(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T))
      throw shape_error("typeshard: a block of " + std::to_string(n) + " elements of " +
                        std::to_string(sizeof(T)) +
                        " bytes needs more bytes than size_t can count (the size overflows "
                        "size_t); use smaller extents");
    return n * sizeof(T);
  }

  struct aligned_delete {
    void operator()(T* p) const { ::operator delete[](p, std::align_val_t{shard_alignment}); }
  };
  std::unique_ptr<T, aligned_delete> data_;
  std::size_t size_ = 0;
};

}  // namespace typeshard::detail
