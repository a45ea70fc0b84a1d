// typeshard/kernels/gemm_isa.hpp: which SIMD level typeshard's own GEMM kernel uses.
//
//   kernels::gemm_isa                      portable < avx2 < avx512
//   kernels::gemm_isa_detected()           the widest level this CPU runs (CPUID, asked once)
//   kernels::gemm_isa_forced()             the forced level, if any (std::optional)
//   kernels::gemm_isa_active()             the level typeshard's kernel runs at now: the forced
//                                          one, else the detected one
//   kernels::set_gemm_isa(isa)             force a level (tests, benchmarks), or
//                                          set_gemm_isa(std::nullopt) to stop forcing; returns
//                                          the level now active
//   kernels::gemm_isa_name(isa)            "portable", "avx2", "avx512"
//
// The environment variable TYPESHARD_GEMM_ISA=portable|avx2|avx512 forces a level from the
// start (read once, at the first use; any other value is ignored). Forcing a level also makes
// kernels::gemm run typeshard's own kernel even where a BLAS is linked (gemm.hpp). A level
// above what the CPU runs falls back to the detected one, so forcing is always safe.
// Detection is by CPUID features (__builtin_cpu_supports), never by CPU model, so a CPU newer
// than this code gets the widest kernel its features allow.
//
// avx2 means AVX2 + FMA; avx512 means AVX-512 F + DQ + VL (no byte or word arithmetic here,
// so BW is not needed). The kernels are compiled with __attribute__((target)), so the library
// needs no -march flag and the binary still runs on any x86-64.
#pragma once

#include <atomic>
#include <cstdlib>
#include <optional>
#include <string_view>

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define TYPESHARD_GEMM_X86 1
#endif

namespace typeshard::kernels {

enum class gemm_isa : int { portable = 0, avx2 = 1, avx512 = 2 };

inline constexpr const char* gemm_isa_name(gemm_isa isa) {
  switch (isa) {
    case gemm_isa::portable: return "portable";
    case gemm_isa::avx2: return "avx2";
    case gemm_isa::avx512: return "avx512";
  }
  return "?";
}

inline gemm_isa gemm_isa_detected() {
#if defined(TYPESHARD_GEMM_X86)
  static const gemm_isa detected = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma"))
      return gemm_isa::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return gemm_isa::avx2;
    return gemm_isa::portable;
  }();
  return detected;
#else
  return gemm_isa::portable;
#endif
}

namespace detail {

inline constexpr int gemm_isa_not_forced = -1;

// The level TYPESHARD_GEMM_ISA names, or gemm_isa_not_forced.
inline int gemm_isa_from_environment() {
  const char* v = std::getenv("TYPESHARD_GEMM_ISA");
  const std::string_view s = v ? v : "";
  if (s == "portable") return static_cast<int>(gemm_isa::portable);
  if (s == "avx2") return static_cast<int>(gemm_isa::avx2);
  if (s == "avx512") return static_cast<int>(gemm_isa::avx512);
  return gemm_isa_not_forced;
}

// The forced level, or gemm_isa_not_forced. Atomic because every device thread reads it on
// every GEMM; relaxed is enough: each level computes the same product.
inline std::atomic<int>& gemm_isa_state() {
  static std::atomic<int> state{gemm_isa_from_environment()};
  return state;
}

inline gemm_isa gemm_isa_capped(gemm_isa cap) {
  return static_cast<int>(cap) < static_cast<int>(gemm_isa_detected()) ? cap
                                                                       : gemm_isa_detected();
}

}  // namespace detail

inline std::optional<gemm_isa> gemm_isa_forced() {
  const int s = detail::gemm_isa_state().load(std::memory_order_relaxed);
  if (s == detail::gemm_isa_not_forced) return std::nullopt;
  return static_cast<gemm_isa>(s);
}

inline gemm_isa gemm_isa_active() {
  const std::optional<gemm_isa> forced = gemm_isa_forced();
  return forced ? detail::gemm_isa_capped(*forced) : gemm_isa_detected();
}

inline gemm_isa set_gemm_isa(std::optional<gemm_isa> isa) {
  detail::gemm_isa_state().store(isa ? static_cast<int>(*isa) : detail::gemm_isa_not_forced,
                                 std::memory_order_relaxed);
  return gemm_isa_active();
}

}  // namespace typeshard::kernels
