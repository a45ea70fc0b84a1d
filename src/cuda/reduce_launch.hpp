// src/cuda/reduce_launch.hpp: the one function reduce.cu (nvcc) gives cuda_api.cpp (the host
// compiler): plain types only, no exception crosses the nvcc unit.
#pragma once

#include <cstddef>

namespace typeshard::detail::cuda_api {

// Queues acc[r][c] = op(acc[r][c], x[r][c]) (leading dimensions acc_ld, x_ld in elements) on
// the cudaStream_t `s`; kind and op are typeshard::element_kind and reduce_op as integers.
// Returns nullptr, or why the launch failed.
const char* launch_reduce(unsigned kind, unsigned op, void* acc, std::size_t acc_ld,
                          const void* x, std::size_t x_ld, std::size_t rows, std::size_t cols,
                          void* s);

}  // namespace typeshard::detail::cuda_api
