// layout<Mesh, Spec, Rank>: index, local_shape, block_shape, replica_index and friends on
// small cases, worked out by hand and checked at compile time (the layout is pure constexpr
// arithmetic: a user can inspect a sharding without any device).
#include <array>
#include <cstddef>
#include <type_traits>

#include <typeshard/core/layout.hpp>

namespace ts = typeshard;

namespace {

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_4 = ts::mesh<ts::axis("x", 4)>;
using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;

constexpr ts::slice s(std::size_t a, std::size_t b) { return {a, b}; }

// ---- block arithmetic: ceil division, trailing blocks short or empty ----
static_assert(ts::shard_extent(8, 4) == 2 && ts::shard_extent(9, 4) == 3 && ts::shard_extent(0, 4) == 0);
static_assert(ts::shard_extent(3, 4) == 1 && ts::shard_extent(5, 1) == 5);
static_assert(ts::shard_slice(10, 4, 0) == s(0, 3) && ts::shard_slice(10, 4, 3) == s(9, 10));
static_assert(ts::shard_slice(5, 4, 2) == s(4, 5) && ts::shard_slice(5, 4, 3) == s(5, 5));  // 2,2,1,0
static_assert(ts::shard_slice(2, 4, 1) == s(1, 2) && ts::shard_slice(2, 4, 2) == s(2, 2));  // 1,1,0,0
static_assert(ts::shard_slice(0, 4, 0) == s(0, 0));
static_assert(s(3, 7).size() == 4);

// ---- P('x', 'y') on 2x2, an 8x6 matrix: 4 tiles of 4x3, no replication ----
using tiles = ts::layout<mesh_2x2, ts::spec<"x", "y">, 2>;
constexpr ts::shape<2> m86{8, 6};
static_assert(tiles::shards_along(0) == 2 && tiles::shards_along(1) == 2);
static_assert(tiles::distinct_shards() == 4 && tiles::replication() == 1);
static_assert(tiles::index(m86, 0) == ts::index_slices<2>{s(0, 4), s(0, 3)});
static_assert(tiles::index(m86, 1) == ts::index_slices<2>{s(0, 4), s(3, 6)});  // y varies fastest
static_assert(tiles::index(m86, 2) == ts::index_slices<2>{s(4, 8), s(0, 3)});
static_assert(tiles::index(m86, 3) == ts::index_slices<2>{s(4, 8), s(3, 6)});
static_assert(tiles::local_shape(m86, 3) == ts::shape<2>{4, 3});
static_assert(tiles::is_even(m86) && tiles::block_shape(m86) == ts::shape<2>{4, 3});
static_assert(tiles::replica_index(0) == 0 && tiles::replica_index(3) == 0 && tiles::is_primary(2));

// ---- P('x', None) on 2x2: rows over x, replicated over y ----
using rows = ts::layout<mesh_2x2, ts::spec<"x", ts::none>, 2>;
static_assert(rows::distinct_shards() == 2 && rows::replication() == 2);
static_assert(rows::index(m86, 0) == ts::index_slices<2>{s(0, 4), s(0, 6)});
static_assert(rows::index(m86, 1) == rows::index(m86, 0));  // (0,1): same rows, a replica
static_assert(rows::index(m86, 2) == ts::index_slices<2>{s(4, 8), s(0, 6)});
static_assert(rows::replica_index(0) == 0 && rows::replica_index(1) == 1);
static_assert(rows::replica_index(2) == 0 && rows::replica_index(3) == 1);
static_assert(rows::same_shard(0, 1) && rows::same_shard(2, 3) && !rows::same_shard(1, 2));
static_assert(rows::axis_is_used(0) && !rows::axis_is_used(1));

// ---- P(None, 'y') on 2x2: the replicas are along x ----
using cols = ts::layout<mesh_2x2, ts::spec<ts::none, "y">, 2>;
static_assert(cols::index(m86, 1) == ts::index_slices<2>{s(0, 8), s(3, 6)});
static_assert(cols::same_shard(0, 2) && !cols::same_shard(0, 1));
static_assert(cols::replica_index(2) == 1 && cols::replica_index(1) == 0);

// ---- fully replicated ----
using repl = ts::layout<mesh_2x2, ts::spec<>, 2>;
static_assert(repl::distinct_shards() == 1 && repl::replication() == 4);
static_assert(repl::index(m86, 3) == ts::index_slices<2>{s(0, 8), s(0, 6)});
static_assert(repl::replica_index(3) == 3 && repl::is_primary(0) && !repl::is_primary(1));

// ---- P(('x', 'y'),) on 2x4: 8 blocks, x major (JAX's device order for the combined axis) ----
using both = ts::layout<mesh_2x4, ts::spec<ts::axes("x", "y")>, 1>;
using both_rev = ts::layout<mesh_2x4, ts::spec<ts::axes("y", "x")>, 1>;
constexpr ts::shape<1> v16{16};
static_assert(both::shards_along(0) == 8);
static_assert(both::shard_along(0, 5) == 5);  // coordinates (1, 1): 1 * 4 + 1
static_assert(both::index(v16, 5) == ts::index_slices<1>{s(10, 12)});
static_assert(both_rev::shard_along(0, 5) == 3);  // y major: 1 * 2 + 1
static_assert(both_rev::shard_along(0, 1) == 2 && both_rev::shard_along(0, 4) == 1);
static_assert(both_rev::index(v16, 1) == ts::index_slices<1>{s(4, 6)});

// ---- uneven: 10 rows over 4 devices: blocks of 3, 3, 3, 1 ----
using r4 = ts::layout<mesh_4, ts::spec<"x", ts::none>, 2>;
constexpr ts::shape<2> m10x3{10, 3};
static_assert(!r4::is_even(m10x3) && r4::block_shape(m10x3) == ts::shape<2>{3, 3});
static_assert(r4::local_shape(m10x3, 0) == ts::shape<2>{3, 3});
static_assert(r4::local_shape(m10x3, 3) == ts::shape<2>{1, 3});
static_assert(r4::index(m10x3, 3) == ts::index_slices<2>{s(9, 10), s(0, 3)});
// 2 rows over 4 devices: the last two shards are empty (JAX: 1, 1, 0, 0).
constexpr ts::shape<2> m2x3{2, 3};
static_assert(r4::local_shape(m2x3, 1) == ts::shape<2>{1, 3});
static_assert(r4::local_shape(m2x3, 2) == ts::shape<2>{0, 3} && r4::local_shape(m2x3, 3) == ts::shape<2>{0, 3});
static_assert(r4::index(m2x3, 3) == ts::index_slices<2>{s(2, 2), s(0, 3)});
// extent 0
static_assert(r4::local_shape({0, 3}, 0) == ts::shape<2>{0, 3} && r4::is_even({0, 3}));

// ---- a 3-axis mesh with a size-1 axis: replicas over the unused axes, row-major ----
using mesh_213 = ts::mesh<ts::axis("a", 2), ts::axis("b", 1), ts::axis("c", 3)>;
using over_c = ts::layout<mesh_213, ts::spec<ts::none, "c">, 2>;
static_assert(over_c::distinct_shards() == 3 && over_c::replication() == 2);
// position 4 = coordinates (1, 0, 1): column block 1, replica 1 (its "a" coordinate)
static_assert(over_c::shard_along(1, 4) == 1 && over_c::replica_index(4) == 1);
static_assert(over_c::index({4, 7}, 4) == ts::index_slices<2>{s(0, 4), s(3, 6)});
static_assert(over_c::index({4, 7}, 5) == ts::index_slices<2>{s(0, 4), s(6, 7)});

// ---- the spec is padded to the rank ----
static_assert(std::is_same_v<rows::spec_type, ts::spec<"x", ts::none>>);
static_assert(std::is_same_v<ts::layout<mesh_2x2, ts::spec<"y">, 3>::spec_type,
                             ts::spec<"y", ts::none, ts::none>>);

// ---- a whole-layout property, evaluated at compile time: the distinct shards tile the
// array exactly once (sum of the primaries' local sizes = the global size) ----
template <class L, std::size_t Rank>
constexpr bool primaries_tile(const ts::shape<Rank>& global) {
  std::size_t total = 0, expected = 1;
  for (std::size_t e : global) expected *= e;
  for (std::size_t p = 0; p < L::mesh_type::size; ++p) {
    if (!L::is_primary(p)) continue;
    std::size_t n = 1;
    for (std::size_t e : L::local_shape(global, p)) n *= e;
    total += n;
  }
  return total == expected;
}
static_assert(primaries_tile<tiles, 2>({7, 5}) && primaries_tile<rows, 2>({1, 9}));
static_assert(primaries_tile<both, 1>({13}) && primaries_tile<both_rev, 1>({3}));
static_assert(primaries_tile<over_c, 2>({5, 2}) && primaries_tile<repl, 2>({0, 4}));

}  // namespace
