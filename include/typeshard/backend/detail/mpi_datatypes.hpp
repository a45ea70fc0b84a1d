// typeshard/backend/detail/mpi_datatypes.hpp: what the MPI backend tells MPI about its
// buffers: element types, reduction ops, strided piece types, int counts, error codes.
// Internal: do not rely on anything in detail/. Needs <mpi.h> (typeshard::mpi).
#pragma once

#include <mpi.h>

#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "../backend.hpp"
#include "../../core/errors.hpp"

namespace typeshard::detail {

// Throws typeshard::error naming the MPI call that failed (typeshard's communicators use
// MPI_ERRORS_RETURN, so a failure becomes an exception, and inside a per-device function
// the MPI backend's clear abort, rather than MPI's own terse one).
inline void mpi_check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  const std::size_t n = length > 0 ? static_cast<std::size_t>(length) : 0;
  throw error(std::string("typeshard: ") + call + " failed: " + std::string(text, n) +
              " (MPI error " + std::to_string(rc) +
              "); every rank must call the same collectives with the same sizes");
}

// n as an MPI count: MPI's counts are int.
inline int mpi_count(std::size_t n, const char* what) {
  if (n > static_cast<std::size_t>(INT_MAX))
    throw usage_error(std::string("typeshard: MPI backend: ") + what + " moves " +
                      std::to_string(n) + " elements in one piece, more than MPI's int count (" +
                      std::to_string(INT_MAX) +
                      "); shard the array over more devices or split the operation");
  return static_cast<int>(n);
}

// MPI_SUM on 8- and 16-bit integers, wrapping as C++ (and the thread pool) does. Open MPI
// 4.1's vectorised reductions saturate those sums instead (open-mpi/ompi#8045, closed as
// won't fix), so typeshard brings its own op for them.
template <class T>
void mpi_wrapping_add(void* in, void* inout, int n) {
  const T* x = static_cast<const T*>(in);
  T* acc = static_cast<T*>(inout);
  for (int i = 0; i < n; ++i) acc[i] = static_cast<T>(acc[i] + x[i]);
}
inline void mpi_wrapping_sum(void* in, void* inout, int* len, MPI_Datatype* type) {
  if (*type == MPI_INT8_T) mpi_wrapping_add<std::int8_t>(in, inout, *len);
  else if (*type == MPI_UINT8_T) mpi_wrapping_add<std::uint8_t>(in, inout, *len);
  else if (*type == MPI_INT16_T) mpi_wrapping_add<std::int16_t>(in, inout, *len);
  else if (*type == MPI_UINT16_T) mpi_wrapping_add<std::uint16_t>(in, inout, *len);
}
inline bool is_narrow_integer(element_kind k) {
  return k == element_kind::int8 || k == element_kind::uint8 || k == element_kind::int16 ||
         k == element_kind::uint16;
}

// bfloat16's reductions, as the thread pool's (reduce_kernels.hpp): MPI has no bfloat16, so
// its elements travel as 2 bytes (a contiguous MPI_BYTE type) and reduce through these ops.
inline void mpi_bfloat16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_elements<bfloat16>(inout, in, static_cast<std::size_t>(*len), reduce_op::sum);
}
inline void mpi_bfloat16_max(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_elements<bfloat16>(inout, in, static_cast<std::size_t>(*len), reduce_op::max);
}
inline void mpi_bfloat16_min(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_elements<bfloat16>(inout, in, static_cast<std::size_t>(*len), reduce_op::min);
}

// The predefined datatype of an element kind; MPI_DATATYPE_NULL for opaque.
inline MPI_Datatype mpi_predefined(element_kind k) {
  switch (k) {
    case element_kind::int8: return MPI_INT8_T;
    case element_kind::uint8: return MPI_UINT8_T;
    case element_kind::int16: return MPI_INT16_T;
    case element_kind::uint16: return MPI_UINT16_T;
    case element_kind::int32: return MPI_INT32_T;
    case element_kind::uint32: return MPI_UINT32_T;
    case element_kind::int64: return MPI_INT64_T;
    case element_kind::uint64: return MPI_UINT64_T;
    case element_kind::float32: return MPI_FLOAT;
    case element_kind::float64: return MPI_DOUBLE;
    // std::complex<T> has the layout of T[2], as C's T _Complex does.
    case element_kind::complex64: return MPI_C_FLOAT_COMPLEX;
    case element_kind::complex128: return MPI_C_DOUBLE_COMPLEX;
    case element_kind::bfloat16:  // MPI has none: 2 bytes (mpi_types::element)
    case element_kind::opaque: break;
  }
  return MPI_DATATYPE_NULL;
}

// mpi_types: the derived datatypes (and the one op) a backend uses, made on first use and
// kept (building and committing a type per call would cost more than a small collective).
class mpi_types {
 public:
  mpi_types() = default;
  mpi_types(const mpi_types&) = delete;
  mpi_types& operator=(const mpi_types&) = delete;
  ~mpi_types() { release(); }

  // The datatype of one element: predefined, or (opaque) a contiguous run of its bytes.
  MPI_Datatype element(element_type t) {
    if (MPI_Datatype p = mpi_predefined(t.kind); p != MPI_DATATYPE_NULL) return p;
    auto it = bytes_.find(t.size);
    if (it != bytes_.end()) return it->second;
    MPI_Datatype d = MPI_DATATYPE_NULL;
    mpi_check(MPI_Type_contiguous(mpi_count(t.size, "an element"), MPI_BYTE, &d),
              "MPI_Type_contiguous");
    mpi_check(MPI_Type_commit(&d), "MPI_Type_commit");
    return bytes_.emplace(t.size, d).first->second;
  }

  // The MPI op of a reduction on elements of kind k.
  MPI_Op op(reduce_op r, element_kind k) {
    if (k == element_kind::bfloat16) {
      const std::size_t i = static_cast<std::size_t>(r);
      MPI_User_function* const fns[3] = {&mpi_bfloat16_sum, &mpi_bfloat16_max,
                                         &mpi_bfloat16_min};
      if (bfloat16_ops_[i] == MPI_OP_NULL)
        mpi_check(MPI_Op_create(fns[i], 1, &bfloat16_ops_[i]), "MPI_Op_create");
      return bfloat16_ops_[i];
    }
    switch (r) {
      case reduce_op::max: return MPI_MAX;
      case reduce_op::min: return MPI_MIN;
      case reduce_op::sum: break;
    }
    if (!is_narrow_integer(k)) return MPI_SUM;
    if (wrapping_sum_ == MPI_OP_NULL)
      mpi_check(MPI_Op_create(&mpi_wrapping_sum, 1, &wrapping_sum_), "MPI_Op_create");
    return wrapping_sum_;
  }

  // `rows` runs of `run` elements, `stride` elements apart (MPI_Type_vector), resized to an
  // extent of `extent` elements so that piece j of a collective starts at j * extent.
  MPI_Datatype strided(element_type t, std::size_t rows, std::size_t run, std::size_t stride,
                       std::size_t extent) {
    const std::array<std::size_t, 6> key{static_cast<std::size_t>(t.kind), t.size, rows, run,
                                         stride, extent};
    auto it = strided_.find(key);
    if (it != strided_.end()) return it->second;
    // Types live until the backend goes; a program cycling through many shapes would keep
    // piling them up, so start over past a bound (none is in use between calls).
    if (strided_.size() >= max_strided) free_strided();
    const MPI_Datatype e = element(t);
    MPI_Datatype vec = MPI_DATATYPE_NULL, resized = MPI_DATATYPE_NULL;
    mpi_check(MPI_Type_vector(mpi_count(rows, "a piece's rows"), mpi_count(run, "a piece's run"),
                              mpi_count(stride, "a piece's stride"), e, &vec),
              "MPI_Type_vector");
    const MPI_Aint bytes = static_cast<MPI_Aint>(extent * t.size);
    const int rc = MPI_Type_create_resized(vec, 0, bytes, &resized);
    MPI_Type_free(&vec);  // the resized type keeps what it needs
    mpi_check(rc, "MPI_Type_create_resized");
    mpi_check(MPI_Type_commit(&resized), "MPI_Type_commit");
    return strided_.emplace(key, resized).first->second;
  }

  // Frees every derived type (before MPI_Finalize; a no-op once MPI is finalized).
  void release() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) {
      bytes_.clear();
      strided_.clear();
      wrapping_sum_ = MPI_OP_NULL;
      bfloat16_ops_.fill(MPI_OP_NULL);
      return;
    }
    if (wrapping_sum_ != MPI_OP_NULL) MPI_Op_free(&wrapping_sum_);
    for (MPI_Op& o : bfloat16_ops_)
      if (o != MPI_OP_NULL) MPI_Op_free(&o);
    free_strided();
    for (auto& [size, d] : bytes_) MPI_Type_free(&d);
    bytes_.clear();
  }

 private:
  static constexpr std::size_t max_strided = 256;

  void free_strided() {
    for (auto& [key, d] : strided_) MPI_Type_free(&d);
    strided_.clear();
  }

  std::map<std::size_t, MPI_Datatype> bytes_;
  std::map<std::array<std::size_t, 6>, MPI_Datatype> strided_;
  MPI_Op wrapping_sum_ = MPI_OP_NULL;
  std::array<MPI_Op, 3> bfloat16_ops_{MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};  // sum, max, min
};

}  // namespace typeshard::detail
