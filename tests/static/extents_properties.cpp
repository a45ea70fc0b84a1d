// extents<E...>: static and dynamic extents per dimension, as in std::mdspan.
#include <array>
#include <cstddef>
#include <limits>
#include <type_traits>

#include <typeshard/core/extents.hpp>

namespace ts = typeshard;

namespace {

static_assert(ts::dyn == std::numeric_limits<std::size_t>::max());

using e_static = ts::extents<8192, 4096>;
static_assert(e_static::rank == 2 && e_static::all_static);
static_assert(e_static::is_static(0) && e_static::is_static(1));
static_assert(e_static::static_extents == std::array<std::size_t, 2>{8192, 4096});

using e_mixed = ts::extents<ts::dyn, 4096, 3>;
static_assert(e_mixed::rank == 3 && !e_mixed::all_static);
static_assert(!e_mixed::is_static(0) && e_mixed::is_static(1) && e_mixed::is_static(2));
static_assert(e_mixed::static_extents[1] == 4096);

// An extent of 0 is static and valid.
static_assert(ts::extents<0>::all_static && ts::extents<0>::static_extents[0] == 0);

// dextents<Rank>: all dynamic.
static_assert(std::is_same_v<ts::dextents<1>, ts::extents<ts::dyn>>);
static_assert(std::is_same_v<ts::dextents<3>, ts::extents<ts::dyn, ts::dyn, ts::dyn>>);
static_assert(ts::dextents<2>::rank == 2 && !ts::dextents<2>::all_static);
static_assert(!ts::dextents<2>::is_static(0) && !ts::dextents<2>::is_static(1));
static_assert(ts::dextents<0>::rank == 0 && ts::dextents<0>::all_static);  // vacuously

// The concept.
static_assert(ts::extents_like<e_mixed> && ts::extents_like<ts::dextents<4>>);
static_assert(!ts::extents_like<int> && !ts::extents_like<std::array<std::size_t, 2>>);

}  // namespace
