// typeshard/array/detail/impl/buffer.ipp: the shard allocator's implementation (see buffer.hpp).
// Included by buffer.hpp (header-only) or compiled once into typeshard::runtime.
#pragma once

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
  for (auto it = by_age_.end(); it != by_age_.begin();) {
    if ((--it)->bytes != bytes) continue;
    void* p = it->pointer;
    by_age_.erase(it);
    kept_ -= bytes;
    return p;
  }
  return nullptr;
}

TYPESHARD_RUNTIME_DEF bool block_pool::keep(void* p, std::size_t bytes) noexcept {
  if (bytes > max_kept_) return false;
  try {
    std::lock_guard lock(mutex_);
    // The oldest blocks that must go to make room, given back together.
    auto last = by_age_.begin();
    for (; kept_ + bytes > max_kept_; ++last) {
      kept_ -= last->bytes;
      system_free_block(last->pointer, last->bytes);
    }
    by_age_.erase(by_age_.begin(), last);
    by_age_.push_back({p, bytes});
    kept_ += bytes;
    return true;
  } catch (...) {  // no memory for the pool's own entries: free the block instead
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
