// benchmarks/compare_support/openblas_info.hpp: which GEMM kernel OpenBLAS picked, for the
// report: its core name (as OPENBLAS_CORETYPE, or its own detection when unset, chose) and the
// widest SIMD that core's kernels use.
#pragma once

#include <string>

extern "C" char* openblas_get_corename(void);

namespace compare {

inline std::string openblas_core_isa(const std::string& core) {
  for (const char* c : {"SkylakeX", "Cooperlake", "SapphireRapids"})
    if (core == c) return "avx512";
  for (const char* c : {"Haswell", "Zen"})
    if (core == c) return "avx2";
  if (core == "Sandybridge") return "avx";
  return "unknown ISA";
}

// "gemm: OpenBLAS sgemm, core Haswell (avx2)".
inline std::string openblas_gemm_info() {
  const std::string core = openblas_get_corename();
  return "gemm: OpenBLAS sgemm, core " + core + " (" + openblas_core_isa(core) + ")";
}

}  // namespace compare
