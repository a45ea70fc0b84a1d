// expect: typeshard: a block needs rank >= 1
// A rank-0 block (a scalar) made by hand inside shard_map: blocks have rank >= 1. The twin
// uses extents {1}, as the message says.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
#ifdef TYPESHARD_COMPILE_FAIL
constexpr std::size_t rank = 0;
#else
constexpr std::size_t rank = 1;
#endif

[[maybe_unused]] constexpr std::size_t block_rank = ts::block<float, rank, mesh_2x2>::rank;
