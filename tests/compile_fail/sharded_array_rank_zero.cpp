// expect: typeshard: a sharded array needs rank >= 1
// A sharded array type of rank 0 (no extents): JAX arrays of rank 0 are not sharded; typeshard
// arrays have rank >= 1. The twin has one extent.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
#ifdef TYPESHARD_COMPILE_FAIL
using E = ts::extents<>;
#else
using E = ts::extents<1>;
#endif

[[maybe_unused]] constexpr std::size_t array_rank = ts::sharded_array<float, mesh_2x2, ts::spec<>, E>::rank;
