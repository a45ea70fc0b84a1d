// typeshard/backend/detail/mpi_collectives.hpp: how the MPI backend runs the
// collective primitives of backend.hpp on a group's communicator (see
// backend/mpi.hpp). Internal: do not rely on anything here.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstring>
#include <span>
#include <vector>

#include "../backend.hpp"
#include "mpi_datatypes.hpp"

namespace typeshard::detail {

// What the collectives reuse between calls: MPI's int counts and displacements,
// and a staging area grown as needed (never shrunk: the sizes repeat).
struct mpi_scratch {
  std::vector<int> counts, displs;
  std::vector<unsigned char> staging;
  unsigned char* stage(std::size_t bytes) {
    if (staging.size() < bytes) staging.resize(bytes);
    return staging.data();
  }
};

inline int mpi_elements(std::size_t n) { return mpi_count(n, "a collective"); }

inline std::size_t mpi_total(std::span<const std::size_t> counts) {
  std::size_t total = 0;
  for (std::size_t c : counts) total += c;
  return total;
}

inline bool mpi_all_equal(std::span<const std::size_t> counts) {
  for (std::size_t c : counts)
    if (c != counts[0]) return false;
  return true;
}

// MPI_Allgather (one row, or rows as a resized MPI_Type_vector); MPI_Allgatherv
// for unequal pieces (several rows: staged member-major, then placed).
inline void mpi_all_gather(MPI_Comm c, mpi_types& types, mpi_scratch& scratch,
                           const collective_group& g, element_type t, const void* send, void* recv,
                           std::size_t rows, std::span<const std::size_t> counts) {
  const std::size_t total = mpi_total(counts);
  if (rows == 0 || total == 0) return;
  const MPI_Datatype e = types.element(t);
  if (mpi_all_equal(counts)) {
    const std::size_t k = counts[0];
    if (rows == 1)
      mpi_check(MPI_Allgather(send, mpi_elements(k), e, recv, mpi_elements(k), e, c),
                "MPI_Allgather");
    else  // member j's piece: `rows` runs of k elements, `total` apart, from column j * k
      mpi_check(MPI_Allgather(send, mpi_elements(rows * k), e, recv, 1,
                              types.strided(t, rows, k, total, k), c),
                "MPI_Allgather");
    return;
  }
  // Unequal pieces (uneven shards): MPI_Allgatherv of contiguous pieces. One
  // row lands in place; several rows are staged member-major, then placed row
  // by row.
  const std::size_t n = g.size();
  scratch.counts.resize(n);
  scratch.displs.resize(n);
  std::size_t offset = 0;
  for (std::size_t j = 0; j < n; ++j) {
    scratch.counts[j] = mpi_elements(rows * counts[j]);
    scratch.displs[j] = mpi_elements(rows * offset);
    offset += counts[j];
  }
  if (rows == 1) {
    mpi_check(MPI_Allgatherv(send, scratch.counts[g.rank], e, recv, scratch.counts.data(),
                             scratch.displs.data(), e, c),
              "MPI_Allgatherv");
    return;
  }
  unsigned char* stage = scratch.stage(rows * total * t.size);
  mpi_check(MPI_Allgatherv(send, scratch.counts[g.rank], e, stage, scratch.counts.data(),
                           scratch.displs.data(), e, c),
            "MPI_Allgatherv");
  auto* out = static_cast<unsigned char*>(recv);
  offset = 0;
  for (std::size_t j = 0; j < n; ++j) {
    const std::size_t bytes = counts[j] * t.size;
    if (bytes != 0)
      for (std::size_t r = 0; r < rows; ++r)
        std::memcpy(out + (r * total + offset) * t.size,
                    stage + (rows * offset + r * counts[j]) * t.size, bytes);
    offset += counts[j];
  }
}

// MPI_Reduce_scatter_block, or MPI_Reduce_scatter for unequal pieces (several
// rows: the input is first laid out member-major, as MPI scatters contiguous
// segments).
inline void mpi_reduce_scatter(MPI_Comm c, mpi_types& types, mpi_scratch& scratch,
                               const collective_group& g, element_type t, reduce_op op,
                               const void* send, void* recv, std::size_t rows,
                               std::span<const std::size_t> counts) {
  const std::size_t total = mpi_total(counts);
  if (rows == 0 || total == 0) return;
  const MPI_Datatype e = types.element(t);
  const MPI_Op o = types.op(op, t.kind);
  const std::size_t n = g.size();
  // MPI scatters contiguous segments of the input: with several rows, lay the
  // input out member-major first ([member][rows][counts[j]]).
  const void* in = send;
  if (rows > 1) {
    unsigned char* stage = scratch.stage(rows * total * t.size);
    const auto* src = static_cast<const unsigned char*>(send);
    std::size_t offset = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t bytes = counts[j] * t.size;
      if (bytes != 0)
        for (std::size_t r = 0; r < rows; ++r)
          std::memcpy(stage + (rows * offset + r * counts[j]) * t.size,
                      src + (r * total + offset) * t.size, bytes);
      offset += counts[j];
    }
    in = stage;
  }
  if (mpi_all_equal(counts)) {
    mpi_check(MPI_Reduce_scatter_block(in, recv, mpi_elements(rows * counts[0]), e, o, c),
              "MPI_Reduce_scatter_block");
    return;
  }
  scratch.counts.resize(n);
  for (std::size_t j = 0; j < n; ++j) scratch.counts[j] = mpi_elements(rows * counts[j]);
  mpi_check(MPI_Reduce_scatter(in, recv, scratch.counts.data(), e, o, c), "MPI_Reduce_scatter");
}

// MPI_Allreduce (MPI_IN_PLACE when send == recv).
inline void mpi_all_reduce(MPI_Comm c, mpi_types& types, element_type t, reduce_op op,
                           const void* send, void* recv, std::size_t n) {
  if (n == 0) return;
  mpi_check(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, mpi_elements(n),
                          types.element(t), types.op(op, t.kind), c),
            "MPI_Allreduce");
}

// MPI_Alltoall, a piece being a resized MPI_Type_vector on each side (plain
// counts when the pieces are consecutive runs).
inline void mpi_all_to_all(MPI_Comm c, mpi_types& types, element_type t, const void* send,
                           void* recv, const strided_pieces& send_pieces,
                           const strided_pieces& recv_pieces) {
  if (send_pieces.elements() == 0) return;
  const auto plain = [](const strided_pieces& l) {  // piece j is elements [j*k, (j+1)*k)
    return l.rows == 1 && l.member_stride == l.run;
  };
  if (plain(send_pieces) && plain(recv_pieces)) {
    const int k = mpi_elements(send_pieces.run);
    const MPI_Datatype e = types.element(t);
    mpi_check(MPI_Alltoall(send, k, e, recv, k, e, c), "MPI_Alltoall");
    return;
  }
  const MPI_Datatype s = types.strided(t, send_pieces.rows, send_pieces.run, send_pieces.stride,
                                       send_pieces.member_stride);
  const MPI_Datatype r = types.strided(t, recv_pieces.rows, recv_pieces.run, recv_pieces.stride,
                                       recv_pieces.member_stride);
  mpi_check(MPI_Alltoall(send, 1, s, recv, 1, r, c), "MPI_Alltoall");
}

}  // namespace typeshard::detail
