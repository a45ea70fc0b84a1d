// typeshard/kernels/gemm.hpp: the per-shard GEMM every device runs.
//
//   kernels::gemm<T>(m, n, k, a, lda, b, ldb, c, ldc, accumulate = false, ops = {})
//
// Row-major C[m x n] = op(A)[m x k] . op(B)[k x n]; with accumulate, C += op(A) . op(B). T is
// float, double or bfloat16 (gemm_bf16.hpp: products and sums in float, C rounded once).
// lda, ldb, ldc are row strides in elements, of the matrices as stored.
// ops (kernels::gemm_ops) says which operands are read transposed, without copying them
// (BLAS's transa / transb):
//   {}                        A stored m x k (lda >= k), B stored k x n (ldb >= n)
//   {.trans_a = true}         A stored k x m (lda >= m): C = A^T . B
//   {.trans_b = true}         B stored n x k (ldb >= k): C = A . B^T
//   {.trans_a = true, .trans_b = true}
// and always ldc >= n. For example x^T . dz with x of m x k rows stored (k rows of m):
//   kernels::gemm<float>(m, n, k, x, m, dz, n, c, n, false, {.trans_a = true});
//
// Which kernel runs (kernels::gemm_kernel_name() says, for reports):
//   - typeshard's own packed kernel (gemm_blocked.hpp) at the widest SIMD level the CPU has,
//     whenever that is AVX-512: it reaches 85-90% of the measured single-core peak there,
//     whatever a BLAS's core detection or environment says (Debian 12's OpenBLAS runs its
//     AVX2 kernels at under half of it when OPENBLAS_CORETYPE pins an AVX2 core, as it must
//     for that build on newer CPUs; BLIS 0.9 does not recognise Zen 5 and runs its generic
//     kernel). docs/reference/kernels/gemm.md has the numbers;
//   - otherwise the linked CBLAS (TYPESHARD_HAVE_CBLAS, set by the CMake target
//     typeshard::blas): cblas_sgemm / cblas_dgemm, whose AVX2 kernels are a few percent
//     faster than typeshard's;
//   - otherwise typeshard's own kernel at the widest level the CPU has (AVX2 + FMA, or the
//     portable one).
// Forcing a level (TYPESHARD_GEMM_ISA=portable|avx2|avx512, or kernels::set_gemm_isa: see
// gemm_isa.hpp) always runs typeshard's own kernel at that level, BLAS linked or not.
//
// Threads: the mesh is the parallelism. Each simulated device already runs on its own
// thread, so the BLAS must not start threads of its own (2 devices x N BLAS threads on 2
// cores would oversubscribe). typeshard::blas links the pthread OpenBLAS build (Debian's
// serial build lacks USE_LOCKING and corrupts results under concurrent calls, see
// cmake/typeshardCBLAS.cmake); when the pthread build is linked (TYPESHARD_HAVE_OPENBLAS
// without TYPESHARD_OPENBLAS_SERIAL), the first call that uses it sets OpenBLAS's
// process-wide thread count to 1, once. The trade-off: a program that also calls BLAS itself
// outside typeshard gets single-threaded BLAS too; if it raises the count
// (openblas_set_num_threads), it must set it back to 1 before running sharded ops
// (benchmarks/matmul.cpp does exactly that around its 2-thread baseline).
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>

#include "../core/bfloat16.hpp"
#include "gemm_bf16.hpp"
#include "gemm_blocked.hpp"
#include "gemm_isa.hpp"

#if defined(TYPESHARD_HAVE_CBLAS)
#include <climits>
// OpenBLAS's cblas.h uses C99 _Complex, which -Wpedantic rejects in C++ when the header is
// not on a system include path (CMake's imported target makes it one; a hand build may not).
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif
#include <cblas.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#endif

namespace typeshard::kernels {

#if defined(TYPESHARD_HAVE_CBLAS)
namespace detail {
// One-time: OpenBLAS single-threaded inside each device (see the header comment). A
// function-local static is initialised once, thread-safely, like std::call_once, and costs
// every TU that multiplies less to compile.
inline void blas_single_threaded_once() {
#if defined(TYPESHARD_HAVE_OPENBLAS) && !defined(TYPESHARD_OPENBLAS_SERIAL)
  [[maybe_unused]] static const bool once = (openblas_set_num_threads(1), true);
#endif
}

// The product through CBLAS, row-major; false (nothing done) when a size does not fit CBLAS's
// int (never for a per-shard block in practice), for the caller to fall back.
template <class T>
bool gemm_cblas(std::size_t m, std::size_t n, std::size_t k, const T* a, std::size_t lda,
                const T* b, std::size_t ldb, T* c, std::size_t ldc, bool accumulate,
                gemm_ops ops) {
  constexpr std::size_t int_max = static_cast<std::size_t>(INT_MAX);
  if (m > int_max || n > int_max || k > int_max || lda > int_max || ldb > int_max ||
      ldc > int_max)
    return false;
  blas_single_threaded_once();
  const T beta = accumulate ? T(1) : T(0);
  const auto ta = ops.trans_a ? CblasTrans : CblasNoTrans;
  const auto tb = ops.trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), 1.0f, a, int(lda), b, int(ldb),
                beta, c, int(ldc));
  else
    cblas_dgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), 1.0, a, int(lda), b, int(ldb),
                beta, c, int(ldc));
  return true;
}
}  // namespace detail
#endif

// Whether kernels::gemm calls the linked CBLAS (true) or typeshard's own kernel at
// gemm_isa_active() (false), as the header comment says.
inline bool gemm_uses_blas() {
#if defined(TYPESHARD_HAVE_CBLAS)
  return !gemm_isa_forced() && gemm_isa_detected() != gemm_isa::avx512;
#else
  return false;
#endif
}

// What kernels::gemm runs now, for benchmark reports: "typeshard avx512",
// "OpenBLAS Haswell" (OpenBLAS's own name for the core whose kernels it picked), "cblas".
inline std::string gemm_kernel_name() {
#if defined(TYPESHARD_HAVE_CBLAS)
  if (gemm_uses_blas()) {
#if defined(TYPESHARD_HAVE_OPENBLAS)
    return std::string("OpenBLAS ") + openblas_get_corename();
#else
    return "cblas";
#endif
  }
#endif
  return std::string("typeshard ") + gemm_isa_name(gemm_isa_active());
}

template <class T>
void gemm(std::size_t m, std::size_t n, std::size_t k, const T* a, std::size_t lda, const T* b,
          std::size_t ldb, T* c, std::size_t ldc, bool accumulate = false, gemm_ops ops = {}) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> ||
                    std::is_same_v<T, bfloat16>,
                "typeshard: kernels::gemm supports float, double and bfloat16; convert the "
                "operands or write a per-shard kernel with shard_map");
  if constexpr (std::is_same_v<T, bfloat16>) {
    gemm_bf16(m, n, k, a, lda, b, ldb, c, ldc, accumulate, ops);  // float sums, rounded once
  } else if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double>) {
    return;  // only the message above: nothing below is instantiated for T
  } else {
    if (m == 0 || n == 0) return;
    if (k == 0) {  // an empty sum: C = 0, or C unchanged when accumulating
      if (!accumulate)
        for (std::size_t i = 0; i < m; ++i)
          for (std::size_t j = 0; j < n; ++j) c[i * ldc + j] = T(0);
      return;
    }
#if defined(TYPESHARD_HAVE_CBLAS)
    if (gemm_uses_blas() && detail::gemm_cblas(m, n, k, a, lda, b, ldb, c, ldc, accumulate, ops))
      return;
#endif
    gemm_blocked<T>(m, n, k, a, lda, b, ldb, c, ldc, accumulate, ops);
  }
}

#if defined(TYPESHARD_SEPARATE_COMPILATION)
// With the separately compiled runtime (core/config.hpp) the two GEMMs are compiled once, in
// typeshard::runtime (src/typeshard_runtime.cpp), not in every TU that multiplies.
extern template void gemm<float>(std::size_t, std::size_t, std::size_t, const float*,
                                 std::size_t, const float*, std::size_t, float*, std::size_t,
                                 bool, gemm_ops);
extern template void gemm<double>(std::size_t, std::size_t, std::size_t, const double*,
                                  std::size_t, const double*, std::size_t, double*, std::size_t,
                                  bool, gemm_ops);
#endif

}  // namespace typeshard::kernels
