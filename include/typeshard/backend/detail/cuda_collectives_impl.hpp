// typeshard/backend/detail/cuda_collectives_impl.hpp: cuda_devices' collectives (included by
// backend/cuda.hpp after cuda_devices_impl.hpp): the members of a group meet in the group's
// rendezvous (cuda_devices_impl.hpp), then each reads its peers' device buffers after their
// streams' events; NCCL moves the bytes of groups with one device per GPU. Sums run in
// group-rank order, so results equal cpu_devices'. Internal: do not rely on anything in
// detail/.
#pragma once

#include <algorithm>
#include <vector>

#include "../cuda.hpp"
#include "cuda_devices_impl.hpp"

namespace typeshard {

namespace detail {
inline const unsigned char* bytes_at(const void* p, std::size_t offset) {
  return static_cast<const unsigned char*>(p) + offset;
}
inline unsigned char* bytes_at(void* p, std::size_t offset) {
  return static_cast<unsigned char*>(p) + offset;
}
inline std::vector<std::size_t> cuda_offsets(std::span<const std::size_t> counts) {
  std::vector<std::size_t> off(counts.size() + 1, 0);
  for (std::size_t j = 0; j < counts.size(); ++j) off[j + 1] = off[j] + counts[j];
  return off;
}
}  // namespace detail

inline void cuda_devices::do_all_gather(const collective_group& g, element_type t,
                                        const void* send, void* recv, std::size_t rows,
                                        std::span<const std::size_t> counts,
                                        std::uint64_t signature) {
  device_state& me = here();
  const std::size_t sz = t.size, n = g.size();
  const std::vector<std::size_t> off = detail::cuda_offsets(counts);
  const std::size_t total = off[n];
  const std::span<const call> calls = meet(g, {send, recv, signature});
  auto place = [&](std::size_t j, const void* piece) {
    cuda_detail::copy2d_async(detail::bytes_at(recv, off[j] * sz), total * sz, piece,
                              counts[j] * sz, counts[j] * sz, rows, me.stream);
  };
  if (nccl_group(g, t)) {
    void* tmp = cuda_detail::alloc_async(rows * total * sz, me.pool, me.stream);
    std::vector<const void*> s(n, send);
    std::vector<std::size_t> sb(n, rows * counts[g.rank] * sz), rb(n);
    std::vector<void*> r(n);
    for (std::size_t j = 0; j < n; ++j) {
      r[j] = detail::bytes_at(tmp, rows * off[j] * sz);
      rb[j] = rows * counts[j] * sz;
    }
    exchange(g, s, sb, r, rb);
    for (std::size_t j = 0; j < n; ++j) place(j, j == g.rank ? send : r[j]);
    cuda_detail::free_async(tmp, me.stream);
    return;
  }
  for (std::size_t j = 0; j < n; ++j) {
    if (j != g.rank) cuda_detail::stream_wait(me.stream, devices_[calls[j].device].ready);
    place(j, calls[j].send);
  }
  finish(g, calls);
}

inline void cuda_devices::do_reduce_scatter(const collective_group& g, element_type t,
                                            reduce_op op, const void* send, void* recv,
                                            std::size_t rows,
                                            std::span<const std::size_t> counts,
                                            std::uint64_t signature) {
  device_state& me = here();
  const std::size_t sz = t.size, n = g.size(), r = g.rank;
  const std::vector<std::size_t> off = detail::cuda_offsets(counts);
  const std::size_t total = off[n], mine = counts[r];
  const auto kind = static_cast<unsigned>(t.kind), o = static_cast<unsigned>(op);
  const std::span<const call> calls = meet(g, {send, recv, signature});
  if (nccl_group(g, t)) {
    // Pack this member's columns of every member j (P[j]), receive every member's columns
    // of this member (R[i]), reduce R in rank order.
    void* packed = cuda_detail::alloc_async(rows * total * sz, me.pool, me.stream);
    void* got = cuda_detail::alloc_async(n * rows * mine * sz, me.pool, me.stream);
    std::vector<const void*> s(n);
    std::vector<void*> rv(n);
    std::vector<std::size_t> sb(n), rb(n, rows * mine * sz);
    for (std::size_t j = 0; j < n; ++j) {
      void* p = detail::bytes_at(packed, rows * off[j] * sz);
      cuda_detail::copy2d_async(p, counts[j] * sz, detail::bytes_at(send, off[j] * sz),
                                total * sz, counts[j] * sz, rows, me.stream);
      s[j] = p;
      sb[j] = rows * counts[j] * sz;
      rv[j] = detail::bytes_at(got, j * rows * mine * sz);
    }
    exchange(g, s, sb, rv, rb);
    auto from = [&](std::size_t i) { return i == r ? s[r] : static_cast<const void*>(rv[i]); };
    cuda_detail::copy_async(recv, from(0), rows * mine * sz, me.stream);
    for (std::size_t i = 1; i < n; ++i)
      cuda_detail::reduce2d_async(kind, o, recv, mine, from(i), mine, rows, mine, me.stream);
    cuda_detail::free_async(got, me.stream);
    cuda_detail::free_async(packed, me.stream);
    return;
  }
  for (std::size_t j = 0; j < n; ++j)
    if (j != r) cuda_detail::stream_wait(me.stream, devices_[calls[j].device].ready);
  cuda_detail::copy2d_async(recv, mine * sz, detail::bytes_at(calls[0].send, off[r] * sz),
                            total * sz, mine * sz, rows, me.stream);
  for (std::size_t i = 1; i < n; ++i) {
    const view v =
        readable(calls[i], detail::bytes_at(calls[i].send, off[r] * sz), total, rows, mine, sz);
    cuda_detail::reduce2d_async(kind, o, recv, mine, v.ptr, v.ld, rows, mine, me.stream);
    cuda_detail::free_async(v.staged, me.stream);
  }
  finish(g, calls);
}

inline void cuda_devices::do_all_reduce(const collective_group& g, element_type t,
                                        reduce_op op, const void* send, void* recv,
                                        std::size_t count, std::uint64_t signature) {
  device_state& me = here();
  const std::size_t sz = t.size, n = g.size(), bytes = count * sz;
  const auto kind = static_cast<unsigned>(t.kind), o = static_cast<unsigned>(op);
  const std::span<const call> calls = meet(g, {send, recv, signature});
  // The sum (in rank order) is made in `acc`, then copied to recv: send may be recv.
  void* acc = cuda_detail::alloc_async(bytes, me.pool, me.stream);
  if (nccl_group(g, t)) {
    void* got = cuda_detail::alloc_async(n * bytes, me.pool, me.stream);
    std::vector<const void*> s(n, send);
    std::vector<void*> rv(n);
    std::vector<std::size_t> b(n, bytes);
    for (std::size_t i = 0; i < n; ++i) rv[i] = detail::bytes_at(got, i * bytes);
    exchange(g, s, b, rv, b);
    auto from = [&](std::size_t i) { return i == g.rank ? send : static_cast<const void*>(rv[i]); };
    cuda_detail::copy_async(acc, from(0), bytes, me.stream);
    for (std::size_t i = 1; i < n; ++i)
      cuda_detail::reduce2d_async(kind, o, acc, count, from(i), count, 1, count, me.stream);
    cuda_detail::copy_async(recv, acc, bytes, me.stream);
    cuda_detail::free_async(got, me.stream);
    cuda_detail::free_async(acc, me.stream);
    return;
  }
  for (std::size_t j = 0; j < n; ++j)
    if (j != g.rank) cuda_detail::stream_wait(me.stream, devices_[calls[j].device].ready);
  {
    const view v0 = readable(calls[0], calls[0].send, count, 1, count, sz);
    cuda_detail::copy_async(acc, v0.ptr, bytes, me.stream);
    cuda_detail::free_async(v0.staged, me.stream);
  }
  for (std::size_t i = 1; i < n; ++i) {
    const view v = readable(calls[i], calls[i].send, count, 1, count, sz);
    cuda_detail::reduce2d_async(kind, o, acc, count, v.ptr, count, 1, count, me.stream);
    cuda_detail::free_async(v.staged, me.stream);
  }
  finish(g, calls);  // every peer has read this member's send: recv may be overwritten
  cuda_detail::copy_async(recv, acc, bytes, me.stream);
  cuda_detail::free_async(acc, me.stream);
}

namespace detail {
// Copies one all_to_all piece between two strided layouts of equal element counts (in
// row-major order), through a contiguous staging buffer where the runs differ.
inline void cuda_copy_piece(void* dst, const strided_pieces& dl, const void* src,
                            const strided_pieces& sl, std::size_t sz, cuda_api::pool pool,
                            cuda_api::stream s) {
  if (dl.elements() == 0) return;
  if (dl.run == sl.run) {
    cuda_api::copy2d_async(dst, dl.stride * sz, src, sl.stride * sz, sl.run * sz, sl.rows, s);
    return;
  }
  void* tmp = cuda_api::alloc_async(sl.elements() * sz, pool, s);
  cuda_api::copy2d_async(tmp, sl.run * sz, src, sl.stride * sz, sl.run * sz, sl.rows, s);
  cuda_api::copy2d_async(dst, dl.stride * sz, tmp, dl.run * sz, dl.run * sz, dl.rows, s);
  cuda_api::free_async(tmp, s);
}
}  // namespace detail

inline void cuda_devices::do_all_to_all(const collective_group& g, element_type t,
                                        const void* send, void* recv,
                                        const strided_pieces& sp, const strided_pieces& rp,
                                        std::uint64_t signature) {
  device_state& me = here();
  const std::size_t sz = t.size, n = g.size(), r = g.rank, e = sp.elements();
  call mine{send, recv, signature};
  mine.pieces = sp;
  const std::span<const call> calls = meet(g, mine);
  const strided_pieces packed_layout{1, e, e, e};
  if (nccl_group(g, t)) {
    void* out = cuda_detail::alloc_async(n * e * sz, me.pool, me.stream);
    void* in = cuda_detail::alloc_async(n * e * sz, me.pool, me.stream);
    std::vector<const void*> s(n);
    std::vector<void*> rv(n);
    std::vector<std::size_t> b(n, e * sz);
    for (std::size_t j = 0; j < n; ++j) {
      void* p = detail::bytes_at(out, j * e * sz);
      detail::cuda_copy_piece(p, packed_layout, detail::bytes_at(send, j * sp.member_stride * sz),
                              sp, sz, me.pool, me.stream);
      s[j] = p;
      rv[j] = detail::bytes_at(in, j * e * sz);
    }
    exchange(g, s, b, rv, b);
    for (std::size_t i = 0; i < n; ++i)
      detail::cuda_copy_piece(detail::bytes_at(recv, i * rp.member_stride * sz), rp,
                              i == r ? s[r] : rv[i], packed_layout, sz, me.pool, me.stream);
    cuda_detail::free_async(in, me.stream);
    cuda_detail::free_async(out, me.stream);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (i != r) cuda_detail::stream_wait(me.stream, devices_[calls[i].device].ready);
    const strided_pieces& from = calls[i].pieces;
    detail::cuda_copy_piece(detail::bytes_at(recv, i * rp.member_stride * sz), rp,
                            detail::bytes_at(calls[i].send, r * from.member_stride * sz), from,
                            sz, me.pool, me.stream);
  }
  finish(g, calls);
}

inline void cuda_devices::do_permute(const collective_group& g, element_type t,
                                     const void* send, std::size_t send_count,
                                     std::size_t send_to, void* recv, std::size_t recv_count,
                                     std::size_t recv_from, std::uint64_t signature) {
  device_state& me = here();
  const std::size_t sz = t.size, n = g.size(), r = g.rank;
  call mine{send, recv, signature, send_to, send_count, recv_from};
  mine.recv_count = recv_count;
  const std::span<const call> calls = meet(g, mine);
  // Every member checks every member's pairing (the thread pool's checks, for all receivers
  // k), so all throw the same error or none does: none is left inside NCCL waiting for a peer.
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t from = calls[k].recv_from;
    for (std::size_t j = 0; j < n; ++j)
      if (calls[j].peer == k && j != from) throw_not_a_permutation(j, k, from);
    if (from != no_peer && (calls[from].peer != k || calls[from].count != calls[k].recv_count))
      throw_permute_count_mismatch(k, calls[k].recv_count, from, calls[from].count,
                                   calls[from].peer);
  }
  if (nccl_group(g, t)) {
    std::vector<const void*> s(n, nullptr);
    std::vector<void*> rv(n, nullptr);
    std::vector<std::size_t> sb(n, 0), rb(n, 0);
    if (send_to != no_peer && send_to != r) s[send_to] = send, sb[send_to] = send_count * sz;
    if (recv_from != no_peer && recv_from != r) {
      rv[recv_from] = recv;
      rb[recv_from] = recv_count * sz;
    }
    exchange(g, s, sb, rv, rb);
    if (recv_from == r) cuda_detail::copy_async(recv, send, recv_count * sz, me.stream);
    if (recv_from == no_peer) cuda_detail::zero_async(recv, recv_count * sz, me.stream);
    return;
  }
  if (recv_from == no_peer) {
    cuda_detail::zero_async(recv, recv_count * sz, me.stream);
  } else {
    if (recv_from != r)
      cuda_detail::stream_wait(me.stream, devices_[calls[recv_from].device].ready);
    cuda_detail::copy_async(recv, calls[recv_from].send, recv_count * sz, me.stream);
  }
  finish(g, calls);
}

}  // namespace typeshard
