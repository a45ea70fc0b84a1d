// typeshard/detail/impl/buffer.ipp: the shard allocator's implementation (see buffer.hpp).
// Included by buffer.hpp (header-only) or compiled once into typeshard::runtime.
#pragma once

#include <iterator>
#include <mutex>
#include <new>

#include "../buffer.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace typeshard::detail {

// The system's side of a block: a mapping of its own for large blocks (see
// mapped_block_bytes in buffer.hpp), else
// aligned operator new.
TYPESHARD_RUNTIME_DEF void* system_allocate_block(std::size_t bytes) {
#if defined(TYPESHARD_DETAIL_MAPPED_BLOCKS)
  if (bytes >= mapped_block_bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
    (void)::madvise(p, bytes, MADV_HUGEPAGE);  // advice only: the kernel may decline
#endif
    return p;
  }
#endif
  return ::operator new[](bytes, std::align_val_t{shard_alignment});
}

TYPESHARD_RUNTIME_DEF void system_free_block(void* p,
                                             [[maybe_unused]] std::size_t bytes) noexcept {
#if defined(TYPESHARD_DETAIL_MAPPED_BLOCKS)
  if (bytes >= mapped_block_bytes) {
    ::munmap(p, bytes);
    return;
  }
#endif
  ::operator delete[](p, std::align_val_t{shard_alignment});
}

TYPESHARD_RUNTIME_DEF block_pool& block_pool::instance() {
  static block_pool* pool = new block_pool;
  return *pool;
}

TYPESHARD_RUNTIME_DEF void* block_pool::take(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  const auto [first, last] = by_size_.equal_range(bytes);
  if (first == last) return nullptr;
  const auto newest = std::prev(last);
  const auto entry = newest->second;
  void* p = entry->pointer;
  by_size_.erase(newest);
  by_age_.erase(entry);
  kept_ -= bytes;
  return p;
}

TYPESHARD_RUNTIME_DEF bool block_pool::keep(void* p, std::size_t bytes) noexcept {
  if (bytes > max_kept_) return false;
  try {
    std::lock_guard lock(mutex_);
    while (kept_ + bytes > max_kept_) {
      const kept_block oldest = by_age_.front();
      by_size_.erase(oldest.index);
      by_age_.pop_front();
      kept_ -= oldest.bytes;
      system_free_block(oldest.pointer, oldest.bytes);
    }
    by_age_.push_back({p, bytes, {}});
    try {
      by_age_.back().index = by_size_.emplace(bytes, std::prev(by_age_.end()));
    } catch (...) {
      by_age_.pop_back();
      throw;
    }
    kept_ += bytes;
    return true;
  } catch (...) {  // no memory for the pool's own nodes: free the block instead
    return false;
  }
}

TYPESHARD_RUNTIME_DEF std::size_t block_pool::kept_bytes() const {
  std::lock_guard lock(mutex_);
  return kept_;
}

TYPESHARD_RUNTIME_DEF void* allocate_block(std::size_t bytes) {
#if !defined(TYPESHARD_DETAIL_ASAN)
  if (bytes >= block_pool::min_bytes)
    if (void* p = block_pool::instance().take(bytes)) return p;
#endif
  return system_allocate_block(bytes);
}

TYPESHARD_RUNTIME_DEF void free_block(void* p, std::size_t bytes) {
#if !defined(TYPESHARD_DETAIL_ASAN)
  if (bytes >= block_pool::min_bytes && block_pool::instance().keep(p, bytes)) return;
#endif
  system_free_block(p, bytes);
}

}  // namespace typeshard::detail
