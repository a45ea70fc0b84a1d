// typeshard/kernels/detail/simd.hpp: the vector types the GEMM micro-kernels compute with,
// as GCC / Clang vector extensions. Internal: use kernels::gemm.
//
// Why not <immintrin.h>: parsing it costs every TU that includes typeshard about 0.15 s of
// g++ time (issue 13's budget for an include-only TU is 1.5x a std-plus-Hana TU, and that
// header alone was a third of the excess), and the micro-kernels need seven operations.
// These types are the ones immintrin.h's __m256 / __m512 are made of, and the operations
// below (in gemm_micro_avx2.hpp, gemm_micro_avx512.hpp) call the very builtins its
// intrinsics wrap (both compilers name them alike), so the machine code is the same: checked
// by disassembling the kernels of both versions with g++ 12 and clang++ 14.
#pragma once

#include <cstddef>

#include "../gemm_isa.hpp"

#if defined(TYPESHARD_GEMM_X86)

namespace typeshard::kernels::detail::simd {

// Values (registers): 8 floats or 4 doubles in 256 bits, 16 floats or 8 doubles in 512.
typedef float f32x8 __attribute__((vector_size(32)));
typedef double f64x4 __attribute__((vector_size(32)));
typedef float f32x16 __attribute__((vector_size(64)));
typedef double f64x8 __attribute__((vector_size(64)));

// Memory views for loads and stores: may alias the element type (as immintrin.h's __m512
// does), aligned to the vector (the packed strips) or to the element only (a tile of C).
typedef float f32x8_a __attribute__((vector_size(32), may_alias));
typedef double f64x4_a __attribute__((vector_size(32), may_alias));
typedef float f32x16_a __attribute__((vector_size(64), may_alias));
typedef double f64x8_a __attribute__((vector_size(64), may_alias));
typedef float f32x8_u __attribute__((vector_size(32), may_alias, aligned(alignof(float))));
typedef double f64x4_u __attribute__((vector_size(32), may_alias, aligned(alignof(double))));
typedef float f32x16_u __attribute__((vector_size(64), may_alias, aligned(alignof(float))));
typedef double f64x8_u __attribute__((vector_size(64), may_alias, aligned(alignof(double))));

// vec<T, Bytes>::type: the vector of T that is Bytes wide (f32x8 for vec<float, 32>, ...), for
// kernels written once for float and double (a trait, not std::conditional_t: that drops the
// vector types' attributes).
template <class T, std::size_t Bytes>
struct vec {
  typedef T type __attribute__((vector_size(Bytes)));
};

// The rounding argument of the AVX-512 builtins: the current mode (_MM_FROUND_CUR_DIRECTION).
inline constexpr int round_current = 4;

// Fetches the cache line holding p into every level (_mm_prefetch with _MM_HINT_T0).
inline void prefetch(const void* p) { __builtin_prefetch(p, 0, 3); }

}  // namespace typeshard::kernels::detail::simd

#endif  // TYPESHARD_GEMM_X86
