// typeshard/kernels/detail/permute_copy.hpp: a row-major block with its dimensions permuted
// (the per-device kernel of ts::permute). Internal: do not rely on anything in detail/.
//
// out[i0, ..., iR-1] = in[j] with j[perm[k]] = i[k]: output dimension k is input dimension
// perm[k]. Written in output order. When the innermost dimension stays innermost, each
// innermost row is a contiguous copy; otherwise the two dimensions that are innermost in
// the input and in the output are walked in square tiles, so both sides are read and
// written a cache line at a time (a plain loop would stride one of them by a whole row).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>

namespace typeshard::kernels::detail {

inline constexpr std::size_t permute_tile = 32;

// Not inlined: one copy of the loops per element type and rank, however many array types
// call it (compile time, code size); one call moves a whole block.
template <class T, std::size_t Rank>
[[gnu::noinline]] void permute_copy(const T* in, const std::array<std::size_t, Rank>& in_shape,
                  const std::array<std::size_t, Rank>& perm, T* out) {
  std::array<std::size_t, Rank> in_stride{}, out_shape{}, out_stride{}, src_stride{};
  std::size_t total = 1;
  for (std::size_t d = Rank; d-- > 0;) {
    in_stride[d] = total;
    total *= in_shape[d];
  }
  if (total == 0) return;
  for (std::size_t k = 0; k < Rank; ++k) {
    out_shape[k] = in_shape[perm[k]];
    src_stride[k] = in_stride[perm[k]];  // input stride of output dimension k
  }
  std::size_t s = 1;
  for (std::size_t k = Rank; k-- > 0;) {
    out_stride[k] = s;
    s *= out_shape[k];
  }
  // a: innermost in the output; b: the output dimension that is innermost in the input.
  const std::size_t a = Rank - 1;
  std::size_t b = 0;
  for (std::size_t k = 0; k < Rank; ++k)
    if (perm[k] == Rank - 1) b = k;

  // Walk every index of the other dimensions (an odometer), then the (b, a) plane.
  std::array<std::size_t, Rank> idx{};
  for (;;) {
    std::size_t in_base = 0, out_base = 0;
    for (std::size_t k = 0; k < Rank; ++k) {
      in_base += idx[k] * src_stride[k];
      out_base += idx[k] * out_stride[k];
    }
    if (a == b) {
      std::copy_n(in + in_base, out_shape[a], out + out_base);
    } else {
      const std::size_t na = out_shape[a], nb = out_shape[b];
      const std::size_t sa = src_stride[a], ob = out_stride[b];  // sb = 1, oa = 1
      for (std::size_t b0 = 0; b0 < nb; b0 += permute_tile)
        for (std::size_t a0 = 0; a0 < na; a0 += permute_tile) {
          const std::size_t b1 = std::min(nb, b0 + permute_tile);
          const std::size_t a1 = std::min(na, a0 + permute_tile);
          for (std::size_t i = b0; i < b1; ++i)
            for (std::size_t j = a0; j < a1; ++j)
              out[out_base + i * ob + j] = in[in_base + j * sa + i];
        }
    }
    // Next index of the dimensions other than a and b.
    std::size_t k = Rank;
    while (k-- > 0) {
      if (k == a || k == b) continue;
      if (++idx[k] < out_shape[k]) break;
      idx[k] = 0;
    }
    if (k == static_cast<std::size_t>(-1)) return;
  }
}

}  // namespace typeshard::kernels::detail
