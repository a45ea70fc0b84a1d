// src/typeshard_runtime.cpp: typeshard's separately compiled runtime (CMake target
// typeshard::runtime). It compiles once what a header-only program compiles in every TU
// that uses it: the backend interface's checks, the thread pool, the shard allocator, the
// per-shard GEMMs, the drawing of ts::visualize.
// See include/typeshard/core/config.hpp.
//
// Built by hand: g++ -std=c++20 -O2 -DTYPESHARD_SEPARATE_COMPILATION -Iinclude -c
// src/typeshard_runtime.cpp, then compile every TU of the program with
// -DTYPESHARD_SEPARATE_COMPILATION and link the object.
#if !defined(TYPESHARD_SEPARATE_COMPILATION)
#error "typeshard: src/typeshard_runtime.cpp is the separately compiled runtime: compile it, and every TU of the program, with -DTYPESHARD_SEPARATE_COMPILATION (or link typeshard::runtime)"
#endif

#include <typeshard/backend/backend.hpp>
#include <typeshard/backend/threads.hpp>
#include <typeshard/detail/buffer.hpp>
#include <typeshard/kernels/gemm.hpp>
#include <typeshard/viz/visualize.hpp>

#include <typeshard/backend/impl/backend.ipp>
#include <typeshard/backend/impl/threads.ipp>
#include <typeshard/detail/impl/buffer.ipp>
#include <typeshard/viz/impl/visualize.ipp>

// The per-shard GEMMs (declared `extern template` in kernels/gemm.hpp in this mode).
template void typeshard::kernels::gemm<float>(std::size_t, std::size_t, std::size_t,
                                              const float*, std::size_t, const float*,
                                              std::size_t, float*, std::size_t, bool,
                                              typeshard::kernels::gemm_ops);
template void typeshard::kernels::gemm<double>(std::size_t, std::size_t, std::size_t,
                                               const double*, std::size_t, const double*,
                                               std::size_t, double*, std::size_t, bool,
                                               typeshard::kernels::gemm_ops);
