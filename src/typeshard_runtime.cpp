// src/typeshard_runtime.cpp: typeshard's separately compiled runtime (CMake target
// typeshard::runtime). It compiles once what a header-only program compiles in every TU
// that uses it: the backend interface's checks, the thread pool, the shard allocator, the
// per-shard GEMMs, the drawing of ts::visualize, and the templates of the element type and
// rank only (block copies, the local einsum, the run-time planners, the executor and the
// einsum, matmul, reshard and reduce runs, which take the mesh as a value; the element-wise
// loops of the operations' own functors) for float and double, ranks 1 to 4.
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
#include <typeshard/array/detail/buffer.hpp>
#include <typeshard/array/detail/copy_box.hpp>
#include <typeshard/core/layout.hpp>
#include <typeshard/kernels/gemm.hpp>
#include <typeshard/array/detail/einsum_kernel.hpp>
#include <typeshard/ops/detail/executor.hpp>
#include <typeshard/ops/einsum.hpp>
#include <typeshard/ops/elementwise.hpp>
#include <typeshard/ops/matmul.hpp>
#include <typeshard/ops/reduce.hpp>
#include <typeshard/plan/detail/einsum_planner.hpp>
#include <typeshard/plan/matmul_plan.hpp>
#include <typeshard/plan/reshard_plan.hpp>
#include <typeshard/viz/visualize.hpp>

#include <typeshard/backend/impl/backend.ipp>
#include <typeshard/backend/impl/threads.ipp>
#include <typeshard/array/detail/impl/buffer.ipp>
#include <typeshard/viz/impl/visualize.ipp>

// The thread pool (declared `extern template` in backend/threads.hpp in this mode).
template class typeshard::basic_cpu_devices<void>;

// The per-shard GEMMs (declared `extern template` in kernels/gemm.hpp in this mode).
template void typeshard::kernels::gemm<float>(std::size_t, std::size_t, std::size_t,
                                              const float*, std::size_t, const float*,
                                              std::size_t, float*, std::size_t, bool,
                                              typeshard::kernels::gemm_ops);
template void typeshard::kernels::gemm<double>(std::size_t, std::size_t, std::size_t,
                                               const double*, std::size_t, const double*,
                                               std::size_t, double*, std::size_t, bool,
                                               typeshard::kernels::gemm_ops);

// The value-level kernels of the common element types and ranks (declared `extern template`
// in their headers in this mode: core/config.hpp's TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS).
namespace typeshard {
TYPESHARD_FOR_RUNTIME_RANKS(TYPESHARD_SHAPE_STRING_INSTANCE, template)
}  // namespace typeshard
namespace typeshard::detail {
TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(TYPESHARD_COPY_BOX_INSTANCE, template)
TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(TYPESHARD_TRANSFER_INSTANCE, template)
TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(TYPESHARD_ADDRESSABLE_SHARDS_INSTANCE, template)
template std::shared_ptr<const std::vector<buffer<float>>> share_blocks<float>(
    std::vector<buffer<float>>&&, std::size_t);
template std::shared_ptr<const std::vector<buffer<double>>> share_blocks<double>(
    std::vector<buffer<double>>&&, std::size_t);
TYPESHARD_DRAW_SHARDING_INSTANCE(template, 1)
TYPESHARD_DRAW_SHARDING_INSTANCE(template, 2)
TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(TYPESHARD_LOCAL_EINSUM_INSTANCE, template)
TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(TYPESHARD_EXECUTOR_INSTANCE, template)
TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(TYPESHARD_RUN_PLAN_INSTANCE, template)
TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(TYPESHARD_RUN_EINSUM_INSTANCE, template)
TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(TYPESHARD_REDUCE_BLOCKS_INSTANCE, template)
TYPESHARD_FOR_RUNTIME_RANKS(TYPESHARD_EINSUM_LAYOUT_INSTANCE, template)
TYPESHARD_FOR_RUNTIME_RANKS(TYPESHARD_PLAN_RESHARD_INSTANCE, template)
TYPESHARD_FOR_RUNTIME_RANKS(TYPESHARD_EINSUM_STEPS_INSTANCE, template)
TYPESHARD_ELEMENTWISE_INSTANCES(template, float)
TYPESHARD_ELEMENTWISE_INSTANCES(template, double)
}  // namespace typeshard::detail
