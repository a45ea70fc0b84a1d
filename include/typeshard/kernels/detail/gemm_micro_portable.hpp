// typeshard/kernels/detail/gemm_micro_portable.hpp: the portable micro-kernel of the packed
// GEMM (gemm_blocked.hpp), for any target g++ or clang++ compiles for. Internal: use
// kernels::gemm.
//
// Contract (every micro-kernel): tile[mr x nr] (row stride ldt) = (load ? tile : 0) +
// sum over p < kc of a_strip[p][i] * b_strip[p][j], with both strips packed and 64-byte
// aligned; this one reads A's strip packed by rows, a_strip[i * ka + p] (pack_a_rows), as
// the AVX2 kernel does, or interleaved as the contract says when ka is 0 (pack_a: the layout
// the AVX-512 kernel reads for double, which the GEMM tests run through this kernel so that
// every CPU tests it). Here mr x nr = 6 x 16 floats or 6 x 8 doubles, the AVX2 kernel's tile,
// with the AVX2 blocking (gemm_blocked.hpp).
#pragma once

#include <cstddef>
#include <cstring>

namespace typeshard::kernels::detail {

// Portable: GNU vector extensions (g++ and clang++, every target) of 16 bytes, the width
// every SIMD ISA has (SSE2, NEON). The 6 x 16 float tile would need 24 such registers, more
// than SSE2's 16, so it is computed as two 6 x 8 halves: 12 accumulators, 2 for B, 1 for A.
// (A plain scalar loop here is what g++ -O2 and -O3 fail to vectorise well: 3-13 GFLOP/s.)
template <class T>
struct vec16;
template <>
struct vec16<float> {
  typedef float type __attribute__((vector_size(16)));
};
template <>
struct vec16<double> {
  typedef double type __attribute__((vector_size(16)));
};

template <std::size_t ka, class T>
void micro_kernel_portable(std::size_t kc, const T* a, const T* b, T* tile, std::size_t ldt,
                           bool load) {
  using V = typename vec16<T>::type;
  constexpr std::size_t lanes = 16 / sizeof(T);
  constexpr std::size_t mr = 6;
  constexpr std::size_t nr = 2 * (32 / sizeof(T));  // 6 x 16 floats, 6 x 8 doubles
  constexpr std::size_t half = nr / 2;
  constexpr std::size_t nv = half / lanes;  // vectors per row of a half: 2
  static_assert(nv == 2 && mr == 6,
                "typeshard: internal: the register budget below assumes a 6 x (2 vectors) half");
  // Row i of A's strip at a[i * a_row], its k steps a_step apart.
  constexpr std::size_t a_row = ka != 0 ? ka : 1, a_step = ka != 0 ? 1 : mr;
  for (std::size_t h = 0; h < nr; h += half) {
    V acc[mr][nv] = {};
    const T* ap = a;
    const T* bp = b + h;
    for (std::size_t p = 0; p < kc; ++p, ap += a_step, bp += nr) {
      V b0, b1;
      std::memcpy(&b0, bp, sizeof(V));
      std::memcpy(&b1, bp + lanes, sizeof(V));
      for (std::size_t i = 0; i < mr; ++i) {
        const V ai = V{} + ap[i * a_row];  // broadcast
        acc[i][0] += ai * b0;
        acc[i][1] += ai * b1;
      }
    }
    for (std::size_t i = 0; i < mr; ++i) {
      T* t = tile + i * ldt + h;
      for (std::size_t v = 0; v < nv; ++v) {
        V r = acc[i][v];
        if (load) {
          V old;
          std::memcpy(&old, t + v * lanes, sizeof(V));
          r += old;
        }
        std::memcpy(t + v * lanes, &r, sizeof(V));
      }
    }
  }
}

}  // namespace typeshard::kernels::detail
