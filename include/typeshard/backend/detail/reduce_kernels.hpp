// typeshard/backend/detail/reduce_kernels.hpp: elementwise reductions over raw buffers,
// dispatched on a backend's element_type tag. Internal: do not rely on anything in detail/.
//
// Used by the thread-pool backend's all_reduce and reduce_scatter. max and min are
// kernels/functors.hpp's (NaN-aware, as XLA's), the ones elementwise operations use. Loops
// are plain, over contiguous runs, so the compiler vectorises them.
#pragma once

#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "../../core/config.hpp"
#include "../backend.hpp"
#include "../../core/errors.hpp"
#include "../../kernels/functors.hpp"

namespace typeshard::detail {

template <class T>
inline void reduce_into(T* acc, const T* x, std::size_t n, reduce_op op) {
  switch (op) {
    case reduce_op::sum:
      for (std::size_t i = 0; i < n; ++i) acc[i] += x[i];
      return;
    case reduce_op::max:
      if constexpr (requires(T a, T b) { a < b; })
        for (std::size_t i = 0; i < n; ++i)
          acc[i] = fn::maximum(acc[i], x[i]);
      return;
    case reduce_op::min:
      if constexpr (requires(T a, T b) { a < b; })
        for (std::size_t i = 0; i < n; ++i)
          acc[i] = fn::minimum(acc[i], x[i]);
      return;
  }
}

// acc[i] += x[i] for n elements.
template <class T>
inline void add_into(T* acc, const T* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) acc[i] += x[i];
}

// acc[i] = op(acc[i], x[i]) for n elements of type t (which backend::all_reduce and
// reduce_scatter have checked to be reducible with op). Sums share their loops: integers
// add alike whatever their sign (here in unsigned arithmetic, which wraps where a signed sum
// would overflow), and a complex sum is the sum of its real and imaginary parts, so six
// loops serve the twelve element types, fewer for every TU to compile.
TYPESHARD_DEFERRED
inline void reduce_into(element_type t, void* acc, const void* x, std::size_t n, reduce_op op) {
  if (op == reduce_op::sum) {
    switch (t.kind) {
      case element_kind::int8:
      case element_kind::uint8: return add_into(static_cast<std::uint8_t*>(acc), static_cast<const std::uint8_t*>(x), n);
      case element_kind::int16:
      case element_kind::uint16: return add_into(static_cast<std::uint16_t*>(acc), static_cast<const std::uint16_t*>(x), n);
      case element_kind::int32:
      case element_kind::uint32: return add_into(static_cast<std::uint32_t*>(acc), static_cast<const std::uint32_t*>(x), n);
      case element_kind::int64:
      case element_kind::uint64: return add_into(static_cast<std::uint64_t*>(acc), static_cast<const std::uint64_t*>(x), n);
      case element_kind::float32: return add_into(static_cast<float*>(acc), static_cast<const float*>(x), n);
      case element_kind::complex64: return add_into(static_cast<float*>(acc), static_cast<const float*>(x), 2 * n);
      case element_kind::float64: return add_into(static_cast<double*>(acc), static_cast<const double*>(x), n);
      case element_kind::complex128: return add_into(static_cast<double*>(acc), static_cast<const double*>(x), 2 * n);
      case element_kind::opaque: return;
    }
    return;
  }
  switch (t.kind) {
    case element_kind::int8: return reduce_into(static_cast<std::int8_t*>(acc), static_cast<const std::int8_t*>(x), n, op);
    case element_kind::uint8: return reduce_into(static_cast<std::uint8_t*>(acc), static_cast<const std::uint8_t*>(x), n, op);
    case element_kind::int16: return reduce_into(static_cast<std::int16_t*>(acc), static_cast<const std::int16_t*>(x), n, op);
    case element_kind::uint16: return reduce_into(static_cast<std::uint16_t*>(acc), static_cast<const std::uint16_t*>(x), n, op);
    case element_kind::int32: return reduce_into(static_cast<std::int32_t*>(acc), static_cast<const std::int32_t*>(x), n, op);
    case element_kind::uint32: return reduce_into(static_cast<std::uint32_t*>(acc), static_cast<const std::uint32_t*>(x), n, op);
    case element_kind::int64: return reduce_into(static_cast<std::int64_t*>(acc), static_cast<const std::int64_t*>(x), n, op);
    case element_kind::uint64: return reduce_into(static_cast<std::uint64_t*>(acc), static_cast<const std::uint64_t*>(x), n, op);
    case element_kind::float32: return reduce_into(static_cast<float*>(acc), static_cast<const float*>(x), n, op);
    case element_kind::float64: return reduce_into(static_cast<double*>(acc), static_cast<const double*>(x), n, op);
    // complex: sum only (check_reducible), handled above
    case element_kind::complex64:
    case element_kind::complex128:
    case element_kind::opaque: return;
  }
}

}  // namespace typeshard::detail
