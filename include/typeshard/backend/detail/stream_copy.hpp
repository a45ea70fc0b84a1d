// typeshard/backend/detail/stream_copy.hpp: copies that bypass the cache, for collectives
// whose output is too large to stay in it. Internal: do not rely on anything in detail/.
//
// A collective that pushes results into its peers' large outputs in small chunks (the
// thread pool's all_reduce) would otherwise read every destination line before writing
// it (read-for-ownership): a third memory stream beside the reads and the writes. glibc's
// memcpy streams only for single copies of several MiB; these copies are a few KiB each.
// On x86-64 (SSE2 is part of the base ISA) stream_copy uses non-temporal stores and
// stream_fence orders them before the barrier that publishes the result; elsewhere both
// fall back to memcpy and nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "../../core/config.hpp"

namespace typeshard::detail {

// Output sizes from which streaming pays: beyond what the caches would keep anyway.
inline constexpr std::size_t stream_threshold_bytes = std::size_t{8} << 20;

TYPESHARD_DEFERRED
inline void stream_copy(void* dst, const void* src, std::size_t bytes) {
#if defined(__SSE2__)
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (reinterpret_cast<std::uintptr_t>(d) % 16 == 0 &&
      reinterpret_cast<std::uintptr_t>(s) % 16 == 0) {
    std::size_t i = 0;
    for (; i + 16 <= bytes; i += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i),
                       _mm_load_si128(reinterpret_cast<const __m128i*>(s + i)));
    if (i < bytes) std::memcpy(d + i, s + i, bytes - i);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

// Makes the streamed stores visible before whatever synchronisation follows.
TYPESHARD_DEFERRED
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace typeshard::detail
