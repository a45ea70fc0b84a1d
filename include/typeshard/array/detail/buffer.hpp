// typeshard/array/detail/buffer.hpp: the memory of one shard.
// Internal: do not rely on anything in detail/.
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../../core/config.hpp"
#include "../../core/detail/diagnose.hpp"
#include "../../core/rules/elements.hpp"
#include "../../core/errors.hpp"


namespace typeshard::detail {

// Cache-line alignment keeps two devices' shards off each other's lines and suits SIMD.
inline constexpr std::size_t shard_alignment = 64;

// Large blocks (32 MiB and more, on Linux) get an anonymous mapping of their own, advised to
// use transparent huge pages, and unmapped when freed (unless the pool below keeps them).
// glibc's malloc maps blocks that large afresh on every allocation anyway (32 MiB is the
// ceiling of its dynamic mmap threshold on 64-bit), with 4 KiB pages where THP is in
// "madvise" mode (a common default): first touching a fresh 64 MiB shard then takes 16384
// page faults, most of the time of a collective whose output is fresh memory. With huge
// pages, psum, all_gather and psum_scatter of 64 MiB ran 3-4x faster (benchmarks/compare).
// Smaller blocks stay with malloc: fresh mappings for them too (tried from 4 MiB up) made a
// training step that reallocates 4-16 MiB blocks 37-39% slower. Not under AddressSanitizer,
// which checks operator new's blocks.
inline constexpr std::size_t mapped_block_bytes = std::size_t{32} << 20;

#if defined(__SANITIZE_ADDRESS__)
#define TYPESHARD_DETAIL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TYPESHARD_DETAIL_ASAN 1
#endif
#endif
#if defined(__linux__) && !defined(TYPESHARD_DETAIL_ASAN)
#define TYPESHARD_DETAIL_MAPPED_BLOCKS 1
#endif

// The system's side of a block: a mapping of its own for large blocks (see above), else
// aligned operator new.
void* system_allocate_block(std::size_t bytes);
void system_free_block(void* p, std::size_t bytes) noexcept;

// block_pool: freed blocks of 64 KiB and more, kept (up to 1 GiB in all) and handed out again
// for an allocation of the same size, as XLA's and PyTorch's allocators do. A sharded
// program allocates the same shapes every step, and a fresh block costs page faults and
// the kernel's clearing of every page on first touch, which malloc pays again whenever it
// has given the memory back (it trims its heaps, and maps large blocks afresh): with the
// pool, seed 001's case 3 ran 10% faster, a data-parallel training step 20%, a batched
// matmul 18% and psum of 64 MiB on 8 devices 1.9x (benchmarks/compare, alternating runs).
// When a block does not fit, the blocks kept longest ago go back to the system first, so a
// program whose shapes change (a new phase, another model) gets the pool's benefit for its
// new shapes instead of the pool staying full of shapes no longer used (which made
// all_gather of 64 MiB on 8 devices 2.7x slower after other workloads had run).
// The pool keeps blocks of 64 KiB and more: a transformer's per-device blocks are 64-512 KiB
// (activations of a few rows, attention scores per head), which malloc trims and faults in
// again on every op; with them pooled, examples/transformer.cpp's benchmark step
// (benchmarks/compare) runs 21% faster than with a 1 MiB floor (123 -> 97 ms, page faults
// 350k -> 53k over 16 steps). Smaller blocks stay in malloc's own free lists.
// A reused block may have been first touched by another device's thread. Never destroyed
// (buffers in static objects may be freed during exit); off under AddressSanitizer, which
// must see every block freed.
class block_pool {
 public:
  static constexpr std::size_t min_bytes = std::size_t{64} << 10;
  static constexpr std::size_t default_max_kept_bytes = std::size_t{1} << 30;

  explicit block_pool(std::size_t max_kept_bytes = default_max_kept_bytes)
      : max_kept_(max_kept_bytes) {}
  block_pool(const block_pool&) = delete;
  block_pool& operator=(const block_pool&) = delete;

  // The process's pool.
  static block_pool& instance();

  // The most recently kept block of exactly `bytes` (its pages the likeliest still in
  // cache), or nullptr.
  void* take(std::size_t bytes);

  // Keeps the block, giving the oldest kept blocks back to the system to make room; false
  // (the caller must free it) if the block alone is larger than the pool.
  bool keep(void* p, std::size_t bytes) noexcept;

  std::size_t kept_bytes() const;

 private:
  struct kept_block {
    void* pointer;
    std::size_t bytes;
  };

  mutable std::mutex mutex_;
  // Oldest first; take() scans from the newest end. A take and keep cost 29-42 ns with 30
  // blocks kept and 25-225 ns with 300 (a size index, a multimap beside a list in age
  // order: 78-152 ns), up to 2.4 us when the size wanted is the oldest of 3000
  // (267 ns), about the time of filling one 64 KiB block once. The index cost every program
  // that allocates shards 0.28 G instructions of g++ to compile (issue 15's budget). At most
  // 16384 blocks are kept (1 GiB by default, at least 64 KiB each).
  std::vector<kept_block> by_age_;
  std::size_t kept_ = 0;
  std::size_t max_kept_;
};

// A block of `bytes` for a shard (from the pool when it holds one of that size), and its
// release (into the pool, or back to the system).
void* allocate_block(std::size_t bytes);
void free_block(void* p, std::size_t bytes);

// buffer<T>::bytes's failure, out of line: a function of values, one copy per TU.
[[noreturn]] TYPESHARD_COLD inline void throw_block_too_large(std::size_t n, std::size_t size) {
  throw shape_error(message({"typeshard: a block of ", n, " elements of ", size,
                             " bytes needs more bytes than size_t can count (the size "
                             "overflows size_t); use smaller extents"}));
}

// buffer<T>: n elements, 64-byte aligned, uninitialised until written. Allocated by the
// device that owns it (inside that device's function), so its pages are first touched
// there, unless the block is one the pool (above) recycles.
template <class T>
class buffer {
  // Through detail::require: the failing static_assert sits in the diagnostic, not in this
  // class, so clang does not mark buffer<T> invalid and report every use of it again.
  static_assert(detail::require<std::is_trivially_copyable_v<T> &&
                                    std::is_trivially_destructible_v<T>,
                                diagnostic::element_not_trivially_copyable<T>>::value);

 public:
  buffer() = default;
  explicit buffer(std::size_t n)
      : data_(n == 0 ? nullptr : static_cast<T*>(allocate_block(bytes(n))), block_delete{bytes(n)}),
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
      throw_block_too_large(n, sizeof(T));
    return n * sizeof(T);
  }

  struct block_delete {
    std::size_t bytes = 0;
    void operator()(T* p) const { free_block(p, bytes); }
  };
  std::unique_ptr<T, block_delete> data_;
  std::size_t size_ = 0;
};

}  // namespace typeshard::detail

#if !defined(TYPESHARD_SEPARATE_COMPILATION)
#include "impl/buffer.ipp"
#endif
