// typeshard/array/detail/copy_box.hpp: copy an n-dimensional box between row-major arrays.
// Internal: do not rely on anything in detail/.
#pragma once

#include <array>
#include <cstddef>
#include <cstring>

#include "../../core/config.hpp"

namespace typeshard::detail {

// Row-major strides of a shape, in elements.
template <std::size_t Rank>
constexpr std::array<std::size_t, Rank> strides_of(const std::array<std::size_t, Rank>& s) {
  std::array<std::size_t, Rank> st{};
  std::size_t acc = 1;
  for (std::size_t d = Rank; d-- > 0;) {
    st[d] = acc;
    acc *= s[d];
  }
  return st;
}

// next_row(i, box): advances the index i to the next row of `box` (row-major over every
// dimension but the last, which the caller's inner loop covers); false after the last row.
template <std::size_t Rank>
constexpr bool next_row(std::array<std::size_t, Rank>& i,
                        const std::array<std::size_t, Rank>& box) {
  for (std::size_t d = Rank; d-- > 1;) {
    if (++i[d - 1] < box[d - 1]) return true;
    i[d - 1] = 0;
  }
  return false;
}

// Copies the box of extents `box` starting at `src_origin` in src (of shape src_shape) to
// `dst_origin` in dst (of shape dst_shape): one memcpy per innermost row.
template <class T, std::size_t Rank>
void copy_box(const T* src, const std::array<std::size_t, Rank>& src_shape,
              const std::array<std::size_t, Rank>& src_origin, T* dst,
              const std::array<std::size_t, Rank>& dst_shape,
              const std::array<std::size_t, Rank>& dst_origin,
              const std::array<std::size_t, Rank>& box) {
  if constexpr (Rank == 0) {  // a rank-0 box is its one element
    (void)src_shape, (void)src_origin, (void)dst_shape, (void)dst_origin, (void)box;
    *dst = *src;
  } else {
    for (std::size_t e : box)
      if (e == 0) return;
    const auto ss = strides_of(src_shape);
    const auto ds = strides_of(dst_shape);
    std::size_t src_base = 0, dst_base = 0;
    for (std::size_t d = 0; d < Rank; ++d) {
      src_base += src_origin[d] * ss[d];
      dst_base += dst_origin[d] * ds[d];
    }
    const std::size_t row_bytes = box[Rank - 1] * sizeof(T);
    std::array<std::size_t, Rank> i{};  // odometer over all but the last dimension
    for (;;) {
      std::size_t so = src_base, dof = dst_base;
      for (std::size_t d = 0; d + 1 < Rank; ++d) {
        so += i[d] * ss[d];
        dof += i[d] * ds[d];
      }
      std::memcpy(dst + dof, src + so, row_bytes);
      if (!next_row(i, box)) return;
    }
  }
}

#if defined(TYPESHARD_SEPARATE_COMPILATION)
// With the separately compiled runtime (core/config.hpp), the copies of the common element
// types and ranks are compiled once, in typeshard::runtime (src/typeshard_runtime.cpp), not
// in every TU that moves a block; other types and ranks are instantiated as usual.
#define TYPESHARD_COPY_BOX_INSTANCE(prefix, T, R)                                              \
  prefix void copy_box<T, R>(const T*, const std::array<std::size_t, R>&,                      \
                             const std::array<std::size_t, R>&, T*,                            \
                             const std::array<std::size_t, R>&,                                \
                             const std::array<std::size_t, R>&,                                \
                             const std::array<std::size_t, R>&);
TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(TYPESHARD_COPY_BOX_INSTANCE, extern template)
#endif

}  // namespace typeshard::detail
