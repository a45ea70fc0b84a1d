// typeshard/kernels/vector_math.hpp: exp, tanh and GELU over float arrays, vectorised, and
// float -> bfloat16 rounding.
//
//   kernels::exp(x, y, n);                   // y[i] = exp(x[i]), i < n (x == y allowed)
//   kernels::tanh(x, y, n);                  // y[i] = tanh(x[i])
//   float z = kernels::exp_sum(x, m, y, n);  // y[i] = exp(x[i] - m); returns the sum of y
//   kernels::gelu_tanh(x, y, n);             // fn::gelu_tanh with the vector tanh
//   kernels::gelu_tanh_chain(g, x, y, n);    // y[i] = g[i] * gelu'(x[i])
//   kernels::to_bfloat16(x, b, n);           // b[i] = bfloat16(x[i]), bit for bit
//   kernels::map_elements(f, x, y, n);       // y[i] = f(x[i]), and zip_elements: the loops
//                                            // above where f has one, else the plain loop
//
// The SIMD level is gemm_isa_active()'s (kernels/gemm_isa.hpp: detected by CPUID, forced by
// TYPESHARD_GEMM_ISA or set_gemm_isa), so tests force every level as the GEMM tests do:
// avx512 and avx2 run one algorithm (kernels/detail/vector_math_body.hpp) and give the same
// bits; portable calls std::exp and std::tanh. Accuracy of the vector form (measured by
// tests/unit/vector_math.cpp against the correctly rounded values, over a sweep of the float
// range): exp within 1 ulp, tanh within 2 ulp; NaN stays NaN, +-inf and overflow as std::.
// GELU and its derivative inherit tanh's error, amplified where 1 + tanh cancels (x << 0).
// exp_sum adds in vector lanes, so its sum may differ from a serial sum by rounding.
#pragma once

#include <cmath>
#include <cstddef>
#include <type_traits>

#include "../core/bfloat16.hpp"
#include "detail/gemm_micro_avx2.hpp"
#include "detail/gemm_micro_avx512.hpp"
#include "functors.hpp"
#include "gemm_isa.hpp"

#if defined(TYPESHARD_GEMM_X86)
// Each level: its float vector V and the GEMM micro-kernels' fma and target.
namespace typeshard::kernels::detail::vm_avx512 {
using V = simd::f32x16;
using avx512::fma;
#define TYPESHARD_VM_TARGET TYPESHARD_GEMM_AVX512_TARGET
#include "detail/vector_math_body.hpp"  // (it undefines TYPESHARD_VM_TARGET)
}  // namespace typeshard::kernels::detail::vm_avx512

namespace typeshard::kernels::detail::vm_avx2 {
using V = simd::f32x8;
using avx2::fma;
#define TYPESHARD_VM_TARGET TYPESHARD_GEMM_AVX2_TARGET
#include "detail/vector_math_body.hpp"  // (it undefines TYPESHARD_VM_TARGET)
}  // namespace typeshard::kernels::detail::vm_avx2
#endif

namespace typeshard::kernels {

// Calls detail::vm_<level>::call at the active level's width, else runs `portable`.
#if defined(TYPESHARD_GEMM_X86)
#define TYPESHARD_VM_DISPATCH(call)                                                       \
  switch (gemm_isa_active()) {                                                            \
    case gemm_isa::avx512: return detail::vm_avx512::call;                                \
    case gemm_isa::avx2: return detail::vm_avx2::call;                                    \
    case gemm_isa::portable: break;                                                       \
  }
#else
#define TYPESHARD_VM_DISPATCH(call)
#endif

inline void exp(const float* x, float* y, std::size_t n) {
  TYPESHARD_VM_DISPATCH(exp(x, y, n))
  for (std::size_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

inline void tanh(const float* x, float* y, std::size_t n) {
  TYPESHARD_VM_DISPATCH(tanh(x, y, n))
  for (std::size_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
}

inline float exp_sum(const float* x, float shift, float* y, std::size_t n) {
  TYPESHARD_VM_DISPATCH(exp_sum(x, shift, y, n))
  float sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += (y[i] = std::exp(x[i] - shift));
  return sum;
}

inline void gelu_tanh(const float* x, float* y, std::size_t n) {
  TYPESHARD_VM_DISPATCH(gelu_tanh(x, y, n))
  for (std::size_t i = 0; i < n; ++i) y[i] = fn::gelu_tanh(x[i]);
}

inline void gelu_tanh_chain(const float* g, const float* x, float* y, std::size_t n) {
  TYPESHARD_VM_DISPATCH(gelu_tanh_chain(g, x, y, n))
  for (std::size_t i = 0; i < n; ++i) y[i] = g[i] * fn::gelu_tanh_grad_t{}(x[i]);
}

// Bit for bit bfloat16(x[i]) at every level.
inline void to_bfloat16(const float* x, bfloat16* y, std::size_t n) {
  TYPESHARD_VM_DISPATCH(to_bf16(x, y, n))
  for (std::size_t i = 0; i < n; ++i) y[i] = bfloat16(x[i]);
}

#undef TYPESHARD_VM_DISPATCH

// y[i] = f(x[i]) for i < n: the vector loops above for fn::gelu_tanh on float and for
// fn::convert_to<bfloat16> from float, else the plain loop. (ts::exp and ts::tanh keep
// std::exp and std::tanh, bit for bit: they are not routed here.)
template <class R, class T, class F>
inline void map_elements(const F& f, const T* x, R* y, std::size_t n) {
  if constexpr (std::is_same_v<T, float> && std::is_same_v<R, float> &&
                std::is_same_v<F, fn::gelu_tanh_t>) {
    kernels::gelu_tanh(x, y, n);
  } else if constexpr (std::is_same_v<T, float> && std::is_same_v<R, bfloat16> &&
                       std::is_same_v<F, fn::convert_to<bfloat16>>) {
    kernels::to_bfloat16(x, y, n);
  } else {
    for (std::size_t i = 0; i < n; ++i) y[i] = f(x[i]);
  }
}

// y[i] = f(a[i], b[i]) for i < n: a vector loop for fn::chain_t<fn::gelu_tanh_grad_t> on
// float (a functor whose float form it is says so with float_form()), else the plain loop.
template <class R, class T1, class T2, class F>
inline void zip_elements(const F& f, const T1* a, const T2* b, R* y, std::size_t n) {
  constexpr bool floats =
      std::is_same_v<T1, float> && std::is_same_v<T2, float> && std::is_same_v<R, float>;
  if constexpr (floats && std::is_same_v<F, fn::chain_t<fn::gelu_tanh_grad_t>>) {
    kernels::gelu_tanh_chain(a, b, y, n);
  } else if constexpr (floats && requires { f.float_form(); }) {
    kernels::zip_elements(f.float_form(), a, b, y, n);
  } else {
    for (std::size_t i = 0; i < n; ++i) y[i] = f(a[i], b[i]);
  }
}

}  // namespace typeshard::kernels
