// typeshard/backend/detail/reduce_kernels.hpp: elementwise reductions over raw buffers, the
// loops element_type_of<T>.reduce points at. Internal: do not rely on anything in detail/.
//
// Used by the thread-pool backend's all_reduce and reduce_scatter. max and min are
// kernels/functors.hpp's (NaN-aware, as XLA's), the ones elementwise operations use. Loops
// are plain, over contiguous runs, so the compiler vectorises them.
#pragma once

#include <cstddef>
#include <type_traits>

#include "../../kernels/functors.hpp"
#include "../backend.hpp"

namespace typeshard::detail {

// acc[i] += x[i] for n elements.
template <class T>
inline void add_into(T* acc, const T* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) acc[i] += x[i];
}

// acc[i] = max(acc[i], x[i]) or min(acc[i], x[i]) for n elements (op is max or min).
template <class T>
inline void extremum_into(T* acc, const T* x, std::size_t n, reduce_op op) {
  if (op == reduce_op::max)
    for (std::size_t i = 0; i < n; ++i) acc[i] = fn::maximum(acc[i], x[i]);
  else
    for (std::size_t i = 0; i < n; ++i) acc[i] = fn::minimum(acc[i], x[i]);
}

// element_type_of<T>.reduce (backend.hpp): acc[i] = op(acc[i], x[i]) for n elements of T,
// an arithmetic or complex type that backend::all_reduce and reduce_scatter have checked to
// be reducible with op (complex: sum only, check_reducible). Instantiated for the element
// types a TU passes to collectives (element_type_of<T> names it), so a TU compiles their
// loops only. bfloat16 adds in float and rounds each element's sum. Integers add in
// unsigned arithmetic, which wraps where a signed sum would overflow; a complex sum is the
// sum of its real and imaginary parts.
template <class T>
void reduce_elements(void* acc, const void* x, std::size_t n, reduce_op op) {
  if constexpr (std::is_same_v<T, bfloat16>) {  // each sum in float, rounded once
    if (op != reduce_op::sum)
      return extremum_into(static_cast<bfloat16*>(acc), static_cast<const bfloat16*>(x), n, op);
    bfloat16* a = static_cast<bfloat16*>(acc);
    const bfloat16* b = static_cast<const bfloat16*>(x);
    for (std::size_t i = 0; i < n; ++i) a[i] = bfloat16(float(a[i]) + float(b[i]));
  } else if constexpr (std::is_arithmetic_v<T>) {
    if (op != reduce_op::sum)
      return extremum_into(static_cast<T*>(acc), static_cast<const T*>(x), n, op);
    using S = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>,
                                          std::type_identity<T>>::type;
    add_into(static_cast<S*>(acc), static_cast<const S*>(x), n);
  } else {
    using R = typename T::value_type;  // std::complex<R>
    add_into(static_cast<R*>(acc), static_cast<const R*>(x), 2 * n);
  }
}

}  // namespace typeshard::detail
