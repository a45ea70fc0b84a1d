// typeshard/backend/impl/threads_collectives.ipp: the thread pool's collectives (see
// threads.hpp): the members of a group meet in one rendezvous (basic_cpu_devices::collective,
// threads.ipp) and each reads its peers' buffers in place; sums run in group-rank order.
// Included by threads.ipp (header-only) or compiled once into typeshard::runtime.
#pragma once

#include <algorithm>
#include <cstring>

#include "../../core/errors.hpp"
#include "../detail/reduce_kernels.hpp"
#include "../detail/stream_copy.hpp"
#include "../detail/thread_run.hpp"
#include "../threads.hpp"
#include "backend.ipp"  // detail::sum_of

namespace typeshard {

namespace detail {

// The reductions' unit of work: small enough to stay in L1 while inputs stream past.
inline constexpr std::size_t thread_chunk_bytes = 8192;
TYPESHARD_DEFERRED
inline std::size_t thread_chunk_elements(element_type t) {
  return t.size >= thread_chunk_bytes ? 1 : thread_chunk_bytes / t.size;
}

// The pool reduces with the element type's own loop (element_type::reduce), which only
// element_type_of<T> sets: an element_type spelled by hand has none.
TYPESHARD_DEFERRED
[[noreturn]] TYPESHARD_COLD TYPESHARD_NOINLINE void throw_no_reduce_kernel(element_kind k) {
  throw usage_error(message({"typeshard: cpu_devices cannot reduce elements of type ",
                             element_kind_name(k), " given without their reduction loop "
                             "(element_type::reduce); pass element_type_of<T>"}));
}
TYPESHARD_DEFERRED
inline void check_reduce_kernel(element_type t) {
  if (t.reduce == nullptr) throw_no_reduce_kernel(t.kind);
}

// Copies piece `send_member` of a send layout to piece `recv_member` of a receive layout.
// The two may cut the same elements into runs of different lengths.
TYPESHARD_DEFERRED
inline void copy_piece(element_type t, const unsigned char* src, const strided_pieces& sp,
                       std::size_t send_member, unsigned char* dst, const strided_pieces& rp,
                       std::size_t recv_member) {
  const std::size_t total = sp.elements();
  if (total == 0) return;  // src and dst may be null: no pointer arithmetic on them
  const unsigned char* s_base = src + send_member * sp.member_stride * t.size;
  unsigned char* d_base = dst + recv_member * rp.member_stride * t.size;
  std::size_t s_row = 0, s_col = 0, d_row = 0, d_col = 0;
  for (std::size_t done = 0; done < total;) {
    const std::size_t n = std::min(sp.run - s_col, rp.run - d_col);
    std::memcpy(d_base + (d_row * rp.stride + d_col) * t.size,
                s_base + (s_row * sp.stride + s_col) * t.size, n * t.size);
    done += n;
    if ((s_col += n) == sp.run) s_col = 0, ++s_row;
    if ((d_col += n) == rp.run) d_col = 0, ++d_row;
  }
}

}  // namespace detail

template <class Unused>
void basic_cpu_devices<Unused>::do_all_gather(const collective_group& g,
                                              element_type t, const void* send,
                                              void* recv, std::size_t rows,
                                              std::span<const std::size_t> counts,
                                              std::uint64_t signature) {
  collective(g, signature, send, recv, {0, 0, collective_kind::all_gather},
             [&](std::span<const detail::thread_call> calls) {
    // Pull: this member copies every member's pieces into its own output.
    const std::size_t total = detail::sum_of(counts);
    std::size_t offset = 0;
    for (std::size_t j = 0; j < g.size(); ++j) {
      const auto* src = static_cast<const unsigned char*>(calls[j].send);
      auto* dst = static_cast<unsigned char*>(recv);
      const std::size_t bytes = counts[j] * t.size;
      if (bytes != 0)
        for (std::size_t r = 0; r < rows; ++r)
          std::memcpy(dst + (r * total + offset) * t.size, src + r * bytes, bytes);
      offset += counts[j];
    }
  });
}

template <class Unused>
void basic_cpu_devices<Unused>::do_reduce_scatter(const collective_group& g,
                                                  element_type t, reduce_op op,
                                                  const void* send, void* recv,
                                                  std::size_t rows,
                                                  std::span<const std::size_t> counts,
                                                  std::uint64_t signature) {
  detail::check_reduce_kernel(t);
  collective(g, signature, send, recv, {0, 0, collective_kind::reduce_scatter},
             [&](std::span<const detail::thread_call> calls) {
    // This member reduces its own piece of every row, chunk by chunk so the partial
    // result stays in cache while the members' inputs stream past it.
    const std::size_t total = detail::sum_of(counts);
    const std::size_t chunk = detail::thread_chunk_elements(t);
    std::size_t offset = 0;
    for (std::size_t j = 0; j < g.rank; ++j) offset += counts[j];
    const std::size_t mine = counts[g.rank];
    if (mine == 0) return;  // nothing to reduce (rows may be huge when a piece is empty)
    auto* dst = static_cast<unsigned char*>(recv);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < mine; c += chunk) {
        const std::size_t n = std::min(chunk, mine - c);
        unsigned char* out = dst + (r * mine + c) * t.size;
        const std::size_t at = (r * total + offset + c) * t.size;
        std::memcpy(out, static_cast<const unsigned char*>(calls[0].send) + at, n * t.size);
        for (std::size_t j = 1; j < g.size(); ++j)
          t.reduce(out, static_cast<const unsigned char*>(calls[j].send) + at, n, op);
      }
  });
}

template <class Unused>
void basic_cpu_devices<Unused>::do_all_reduce(const collective_group& g,
                                              element_type t, reduce_op op,
                                              const void* send, void* recv,
                                              std::size_t count,
                                              std::uint64_t signature) {
  detail::check_reduce_kernel(t);
  collective(g, signature, send, recv, {0, 0, collective_kind::all_reduce},
             [&](std::span<const detail::thread_call> calls) {
    // Member r reduces slice r of every input (in rank order, so every member gets the
    // same bits) into a cache-sized scratch, then writes it to every member's output.
    // Slice r is read and written by member r alone, so send == recv is safe.
    const std::size_t n = g.size();
    const std::size_t per = (count + n - 1) / n;
    const std::size_t begin = std::min(count, g.rank * per);
    const std::size_t end = std::min(count, begin + per);
    const std::size_t chunk = detail::thread_chunk_elements(t);
    // Large outputs are written with streaming stores (detail/stream_copy.hpp).
    const bool stream = count * t.size >= detail::stream_threshold_bytes;
    alignas(64) unsigned char scratch[detail::thread_chunk_bytes];
    for (std::size_t c = begin; c < end; c += chunk) {
      const std::size_t len = std::min(chunk, end - c);
      const std::size_t at = c * t.size;
      std::memcpy(scratch, static_cast<const unsigned char*>(calls[0].send) + at, len * t.size);
      for (std::size_t j = 1; j < n; ++j)
        t.reduce(scratch, static_cast<const unsigned char*>(calls[j].send) + at, len, op);
      for (std::size_t j = 0; j < n; ++j) {
        unsigned char* out = static_cast<unsigned char*>(calls[j].recv) + at;
        if (stream)
          detail::stream_copy(out, scratch, len * t.size);
        else
          std::memcpy(out, scratch, len * t.size);
      }
    }
    if (stream) detail::stream_fence();
  });
}

template <class Unused>
void basic_cpu_devices<Unused>::do_all_to_all(const collective_group& g,
                                              element_type t, const void* send,
                                              void* recv,
                                              const strided_pieces& send_pieces,
                                              const strided_pieces& recv_pieces,
                                              std::uint64_t signature) {
  collective(g, signature, send, recv, {0, 0, collective_kind::all_to_all},
             [&](std::span<const detail::thread_call> calls) {
    // Pull: this member (r) copies piece r of every member i's input to its piece i.
    for (std::size_t i = 0; i < g.size(); ++i)
      detail::copy_piece(t, static_cast<const unsigned char*>(calls[i].send), send_pieces,
                         g.rank, static_cast<unsigned char*>(recv), recv_pieces, i);
  });
}

template <class Unused>
void basic_cpu_devices<Unused>::do_permute(const collective_group& g, element_type t,
                                           const void* send, std::size_t send_count,
                                           std::size_t send_to, void* recv,
                                           std::size_t recv_count,
                                           std::size_t recv_from,
                                           std::uint64_t signature) {
  collective(g, signature, send, recv, {send_to, send_count, collective_kind::permute},
             [&](std::span<const detail::thread_call> calls) {
    for (std::size_t j = 0; j < g.size(); ++j)
      if (calls[j].peer == g.rank && j != recv_from) throw_not_a_permutation(j, g.rank, recv_from);
    if (recv_from != no_peer &&
        (calls[recv_from].peer != g.rank || calls[recv_from].count != recv_count))
      throw_permute_count_mismatch(g.rank, recv_count, recv_from, calls[recv_from].count,
                                   calls[recv_from].peer);
    if (recv_count == 0) return;
    if (recv_from == no_peer)
      std::memset(recv, 0, recv_count * t.size);
    else
      std::memcpy(recv, calls[recv_from].send, recv_count * t.size);
  });
}

}  // namespace typeshard
