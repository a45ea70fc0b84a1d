// typeshard/core/extents.hpp: per-dimension extents, each static or dynamic (as in std::mdspan).
//
//   ts::extents<8192, 8192>      // both known at compile time: divisibility checked there
//   ts::extents<ts::dyn, 4096>   // rows known at run time
//   ts::dextents<2>              // both dynamic
#pragma once

#include <array>
#include <cstddef>
#include <limits>
#include <utility>

namespace typeshard {

// dyn: an extent known only at run time.
inline constexpr std::size_t dyn = std::numeric_limits<std::size_t>::max();

template <std::size_t... E>
struct extents {
  static constexpr std::size_t rank = sizeof...(E);
  static constexpr std::array<std::size_t, rank> static_extents{E...};

  static constexpr bool is_static(std::size_t d) { return static_extents[d] != dyn; }
  static constexpr bool all_static = ((E != dyn) && ...);
};

namespace detail {
template <std::size_t Rank, class = std::make_index_sequence<Rank>>
struct dextents_impl;
template <std::size_t Rank, std::size_t... I>
struct dextents_impl<Rank, std::index_sequence<I...>> {
  using type = extents<((void)I, dyn)...>;
};
}  // namespace detail

// dextents<Rank>: Rank dynamic extents.
template <std::size_t Rank>
using dextents = typename detail::dextents_impl<Rank>::type;

template <class T>
inline constexpr bool is_extents_v = false;
template <std::size_t... E>
inline constexpr bool is_extents_v<extents<E...>> = true;

template <class T>
concept extents_like = is_extents_v<T>;

}  // namespace typeshard
