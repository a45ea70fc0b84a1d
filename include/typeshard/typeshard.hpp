// typeshard/typeshard.hpp: the whole library.
//
// Compile-time vocabulary (no threads, no MPI): mesh.hpp, spec.hpp, extents.hpp,
// layout.hpp, unreduced.hpp, diagnostics.hpp. Runtime: backend/, device_mesh.hpp,
// host_tensor.hpp, sharded_array.hpp, elementwise.hpp, reduce.hpp, softmax.hpp, visualize.hpp.
#pragma once

#include "backend/backend.hpp"
#include "backend/threads.hpp"
#include "array/block.hpp"
#include "array/block_elementwise.hpp"
#include "array/block_matmul.hpp"
#include "ops/collectives.hpp"
#include "ops/dims.hpp"
#include "array/device_mesh.hpp"
#include "core/diagnostics.hpp"
#include "ops/einsum.hpp"
#include "ops/elementwise.hpp"
#include "core/errors.hpp"
#include "core/extents.hpp"
#include "array/host_tensor.hpp"
#include "core/layout.hpp"
#include "ops/matmul.hpp"
#include "plan/einsum_plan.hpp"
#include "plan/dims_plan.hpp"
#include "plan/matmul_plan.hpp"
#include "ops/reduce.hpp"
#include "plan/reduce_plan.hpp"
#include "core/mesh.hpp"
#include "ops/reshard.hpp"
#include "plan/reshard_plan.hpp"
#include "ops/shard_map.hpp"
#include "ops/softmax.hpp"
#include "plan/softmax_plan.hpp"
#include "array/sharded_array.hpp"
#include "core/spec.hpp"
#include "core/unreduced.hpp"
#include "viz/visualize.hpp"
