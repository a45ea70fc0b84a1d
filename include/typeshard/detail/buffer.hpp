// typeshard/detail/buffer.hpp: the memory of one shard.
// Internal: do not rely on anything in detail/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <type_traits>

#include "../errors.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace typeshard::detail {

// Cache-line alignment keeps two devices' shards off each other's lines and suits SIMD.
inline constexpr std::size_t shard_alignment = 64;

// Asks Linux for transparent huge pages over the 2 MiB-aligned inside of a large block.
// Where THP is in "madvise" mode (a common default) a plain allocation gets 4 KiB pages, so
// first touching a 64 MiB shard takes 16384 page faults (32 with huge pages): most of the
// time of a collective whose output is fresh memory (benchmarks/compare measured about 5x
// less CPU time to allocate, touch and free such blocks). Only advice: nothing changes if
// the kernel declines.
inline void advise_huge_pages([[maybe_unused]] void* p, [[maybe_unused]] std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t huge = std::uintptr_t{2} << 20;
  if (bytes < 2 * huge) return;
  const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(p) + huge - 1) & ~(huge - 1);
  const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(p) + bytes) & ~(huge - 1);
  if (end > begin) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#endif
}

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
        size_(n) {
    if (n != 0) advise_huge_pages(data_.get(), n * sizeof(T));
  }

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
