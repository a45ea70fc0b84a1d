// typeshard/typeshard.hpp: the whole library.
//
// Compile-time vocabulary (no threads, no MPI): mesh.hpp, spec.hpp, extents.hpp,
// layout.hpp, unreduced.hpp, diagnostics.hpp. Runtime: backend/, device_mesh.hpp,
// host_tensor.hpp, sharded_array.hpp, elementwise.hpp, visualize.hpp.
#pragma once

#include "backend/backend.hpp"
#include "backend/threads.hpp"
#include "block.hpp"
#include "collectives.hpp"
#include "device_mesh.hpp"
#include "diagnostics.hpp"
#include "elementwise.hpp"
#include "errors.hpp"
#include "extents.hpp"
#include "host_tensor.hpp"
#include "layout.hpp"
#include "matmul.hpp"
#include "matmul_plan.hpp"
#include "mesh.hpp"
#include "reshard.hpp"
#include "reshard_plan.hpp"
#include "shard_map.hpp"
#include "sharded_array.hpp"
#include "spec.hpp"
#include "unreduced.hpp"
#include "visualize.hpp"
