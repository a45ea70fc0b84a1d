// typeshard/ops/detail/grad_flat_call.hpp: a differentiated call with parameter trees as a flat
// call (ops/grad.hpp): each tree argument replaced by its leaves, f called with the trees
// regrouped. Internal: do not rely on anything in detail/.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../tree.hpp"
#include "grad_arguments.hpp"

namespace typeshard::detail {

// The flat call of a call with parameter trees: each differentiated tree argument is replaced
// by its leaves (each leaf an argnum of its own), the other arguments stay as they are.
template <class ArgTuple, class Is, std::size_t... Argnums>
struct flat_layout;
template <class... Args, std::size_t... I, std::size_t... Argnums>
struct flat_layout<std::tuple<Args...>, std::index_sequence<I...>, Argnums...> {
  static constexpr std::size_t n = sizeof...(Args);
  static constexpr std::array<bool, n + 1> tree{
      (is_argnum<I, Argnums...> && parameter_tree<Args>)..., false};
  static constexpr std::array<std::size_t, n + 1> width{
      (tree[I] ? flat_size<Args>() : std::size_t{1})..., 0};
  static constexpr std::array<std::size_t, n + 1> offset = [] {
    std::array<std::size_t, n + 1> o{};
    for (std::size_t i = 0; i < n; ++i) o[i + 1] = o[i] + width[i];
    return o;
  }();
  static constexpr std::size_t flat_count = ((width[Argnums]) + ... + 0);
  // The flat argnums, in the order of Argnums; start[j]: where Argnums' j-th begins in them.
  static constexpr std::array<std::size_t, flat_count> flat_argnums = [] {
    std::array<std::size_t, flat_count> a{};
    std::size_t k = 0;
    ((void)[&] {
      for (std::size_t w = 0; w < width[Argnums]; ++w) a[k++] = offset[Argnums] + w;
    }(), ...);
    return a;
  }();
  static constexpr std::array<std::size_t, sizeof...(Argnums) + 1> start = [] {
    std::array<std::size_t, sizeof...(Argnums) + 1> a{};
    std::size_t j = 0;
    ((a[j + 1] = a[j] + width[Argnums], ++j), ...);
    return a;
  }();

  // The first leaf (argnum * 65536 + leaf) that is not a float array, or n * 65536 when none.
  static constexpr std::size_t bad_leaf() {
    std::size_t bad = n * 65536;
    auto check = [&]<class A, bool IsTree>(std::size_t i, std::bool_constant<IsTree>, const A*) {
      if constexpr (IsTree && check_tree<A>()) {  // a malformed tree is reported there
        if (bad != n * 65536) return;
        using leaves = decltype(flatten(std::declval<const A&>()));
        [&]<std::size_t... K>(std::index_sequence<K...>) {
          ((is_float_array<std::remove_cvref_t<std::tuple_element_t<K, leaves>>>() ||
                    bad != n * 65536
                ? 0
                : (bad = i * 65536 + K, 0)),
           ...);
        }(std::make_index_sequence<std::tuple_size_v<leaves>>{});
      }
    };
    (check(I, std::bool_constant<tree[I]>{}, static_cast<const Args*>(nullptr)), ...);
    return bad;
  }
  static constexpr bool well_formed = ((!tree[I] || check_tree<Args>()) && ...);
};

// One argument's part of the flat call: a tree's innermost leaves or the argument.
template <bool Tree, class A>
auto flat_part(const A& a) {
  if constexpr (Tree)
    return flatten(a);
  else
    return std::tuple<const A&>(a);
}

// Argument i of the original call, from the flat call's values: the tree of traced leaves
// (of A's shape) or the value itself.
template <class Layout, std::size_t Index, class A, class Flat>
decltype(auto) regroup_argument(Flat& flat) {
  if constexpr (Layout::tree[Index])
    return unflatten<A, Layout::offset[Index]>(flat);
  else
    return std::get<Layout::offset[Index]>(flat);
}

// f called with the trees regrouped, the flat call's function.
template <class F, class Layout, class... Args>
struct tree_call {
  const F* f;
  template <class... Flat>
  auto operator()(Flat&&... flat) const {
    auto all = std::forward_as_tuple(flat...);
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::invoke(*f, regroup_argument<Layout, I, Args>(all)...);
    }(std::index_sequence_for<Args...>{});
  }
};

}  // namespace typeshard::detail
