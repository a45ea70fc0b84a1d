// typeshard/ops/detail/traced_dims.hpp: permute, split_dim and merge_dims on traced values (see
// ops/traced.hpp): the backward is the inverse move, without communication.
#pragma once

#include <array>
#include <cstddef>
#include <utility>

#include "../dims.hpp"
#include "traced_value.hpp"

namespace typeshard {

// ---- dimension moves: the inverse move -----------------------------------------------------

namespace detail {
template <std::size_t... Perm>
struct inverse_permutation {
  static constexpr std::array<std::size_t, sizeof...(Perm)> value = [] {
    std::array<std::size_t, sizeof...(Perm)> p{Perm...}, inv{};
    for (std::size_t i = 0; i < p.size(); ++i)
      if (p[i] < p.size()) inv[p[i]] = i;
    return inv;
  }();
  template <class G, std::size_t... I>
  static auto apply(const G& g, std::index_sequence<I...>) {
    return typeshard::permute<value[I]...>(g);
  }
};
inline std::string describe_move() {
  return "dimension move backward: the inverse move (local, no communication)";
}
}  // namespace detail

template <std::size_t... Perm, traced_like X>
[[nodiscard]] auto permute(const X& x) {
  return detail::record(typeshard::permute<Perm...>(x.value()), x,
                        [](const auto& g) {
                          return detail::inverse_permutation<Perm...>::apply(
                              g, std::make_index_sequence<sizeof...(Perm)>{});
                        },
                        &detail::describe_move);
}
// split_dim and merge_dims keep every device's block as it is (no copy): the backward reads
// the cotangent's blocks with the operand's extents.
template <std::size_t Dim, std::size_t Parts, traced_like X>
[[nodiscard]] auto split_dim(const X& x) {
  using C = typename X::cotangent_type;
  return detail::record(typeshard::split_dim<Dim, Parts>(x.value()), x,
                        [e = x.extents()](const auto& g) { return detail::retype<C>(g, e); },
                        &detail::describe_move);
}
template <std::size_t Dim, traced_like X>
[[nodiscard]] auto merge_dims(const X& x) {
  using C = typename X::cotangent_type;
  return detail::record(typeshard::merge_dims<Dim>(x.value()), x,
                        [e = x.extents()](const auto& g) { return detail::retype<C>(g, e); },
                        &detail::describe_move);
}

}  // namespace typeshard
