// expect: typeshard: internal: only the portable GEMM micro-kernel exists off x86-64
// no-pch: this test must read the kernels' headers itself, after undefining a macro
// Off x86-64 (or with a compiler other than g++ and clang++) kernels/gemm_isa.hpp does not
// define TYPESHARD_GEMM_X86: the AVX2 and AVX-512 micro-kernels are not compiled, and
// kernels::gemm_blocked dispatches to the portable one only. micro_kernel_of<level> guards that
// nothing asks for another level there. This test builds on x86-64, so it undefines the
// macro before the kernels' headers, as the preprocessor sees them elsewhere (hence no
// precompiled typeshard.hpp: tests/compile_fail/CMakeLists.txt reads the `no-pch:` line), and
// asks for the AVX2 micro-kernel. The twin asks for the portable one.
#include <cstddef>

#include <typeshard/kernels/gemm_isa.hpp>
#undef TYPESHARD_GEMM_X86
#include <typeshard/kernels/gemm_blocked.hpp>

namespace kernels = typeshard::kernels;

#ifdef TYPESHARD_COMPILE_FAIL
constexpr kernels::gemm_isa level = kernels::gemm_isa::avx2;
#else
constexpr kernels::gemm_isa level = kernels::gemm_isa::portable;
#endif

void micro_tile(std::size_t kc, const float* a, const float* b, float* tile, std::size_t ldt) {
  kernels::detail::micro_kernel_of<level, float>()(kc, a, b, tile, ldt, false);
}
