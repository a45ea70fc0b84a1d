// typeshard/ops/tree.hpp: parameter trees, JAX's pytrees for ts::value_and_grad and the
// optimizers: a std::tuple of arrays, a std::array of arrays, or a Boost.Hana struct template
// whose members are arrays.
//
//   template <class W, class B>
//   struct layer {                             // a class template over its members' types
//     BOOST_HANA_DEFINE_STRUCT(layer, (W, w), (B, b));
//   };
//   layer<decltype(W), decltype(B)> p{W, B};
//   auto [l, g] = ts::value_and_grad(loss)(p, X);   // g: layer<gradient of w, gradient of b>
//   auto q = ts::tree_map([](const auto& w) { return w * 2.0; }, p);   // a layer again
//
// A tree's members (tuple and array elements, the struct's members in declaration order) are
// leaves or trees themselves (nested: a struct of layers); its leaves are the innermost ones.
// Rebuilt over other leaf types (traced values, gradients, optimizer states) a tree keeps its
// kind: a tuple stays a tuple, a struct template S<L...>
// becomes S<N...> (so the struct must be a template whose parameters are its members' types,
// in order: the gradient of a replicated parameter has another type, unreduced<"data">); a
// std::array stays a std::array when the new leaves have one type, else becomes a std::tuple
// (traced leaves differ in type, so inside a loss an array tree reads std::get<I>(p)).
// A Hana struct that is not such a template is a rule-9 compile error.
#pragma once

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <boost/hana/accessors.hpp>
#include <boost/hana/at.hpp>
#include <boost/hana/concept/struct.hpp>
#include <boost/hana/define_struct.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/second.hpp>

#include "../core/detail/diagnose.hpp"
#include "../core/rules/rule9_gradients.hpp"

namespace typeshard {

namespace detail {

// tree_traits<T>: is_tree, size, leaf<I>(t) (a reference, const as t), make(leaves...) (the
// tree of the same kind over the leaves' types), well_formed (false: a Hana struct that is not
// a template over its members' types in order; check_tree reports it).
template <class T>
struct tree_traits {
  static constexpr bool is_tree = false;
  static constexpr std::size_t size = 1;
};

template <class... L>
struct tree_traits<std::tuple<L...>> {
  static constexpr bool is_tree = true;
  static constexpr bool well_formed = true;
  static constexpr std::size_t size = sizeof...(L);
  template <std::size_t I, class T>
  static auto& leaf(T& t) {
    return std::get<I>(t);
  }
  template <class... N>
  static auto make(N&&... n) {
    return std::tuple<std::remove_cvref_t<N>...>(std::forward<N>(n)...);
  }
};

template <class A, std::size_t Size>
struct tree_traits<std::array<A, Size>> {
  static constexpr bool is_tree = true;
  static constexpr bool well_formed = true;
  static constexpr std::size_t size = Size;
  template <std::size_t I, class T>
  static auto& leaf(T& t) {
    return t[I];
  }
  template <class N0, class... N>
  static auto make(N0&& n0, N&&... n) {
    if constexpr ((std::is_same_v<std::remove_cvref_t<N0>, std::remove_cvref_t<N>> && ...))
      return std::array<std::remove_cvref_t<N0>, Size>{std::forward<N0>(n0),
                                                       std::forward<N>(n)...};
    else
      return std::tuple<std::remove_cvref_t<N0>, std::remove_cvref_t<N>...>(
          std::forward<N0>(n0), std::forward<N>(n)...);
  }
};

template <class S>
inline constexpr bool is_hana_struct = boost::hana::Struct<S>::value;

// A Hana struct that is not a template over its members' types: refused (see above).
template <class S>
  requires is_hana_struct<S>
struct tree_traits<S> {
  static constexpr bool is_tree = true;
  static constexpr bool well_formed = false;
  static constexpr std::size_t size = 0;
};

template <template <class...> class S, class... L>
  requires is_hana_struct<S<L...>>
struct tree_traits<S<L...>> {
  static constexpr bool is_tree = true;
  static constexpr std::size_t size = sizeof...(L);
  template <std::size_t I, class T>
  static auto& leaf(T& t) {
    return boost::hana::second(boost::hana::at_c<I>(boost::hana::accessors<S<L...>>()))(t);
  }

 private:
  template <std::size_t... I>
  static constexpr bool members_in_order(std::index_sequence<I...>) {
    using A = decltype(boost::hana::accessors<S<L...>>());
    if constexpr (decltype(boost::hana::length(std::declval<A>()))::value != sizeof...(L))
      return false;
    else
      return (std::is_same_v<
                  std::remove_reference_t<decltype(leaf<I>(std::declval<S<L...>&>()))>, L> &&
              ...);
  }

 public:
  static constexpr bool well_formed = members_in_order(std::index_sequence_for<L...>{});
  template <class... N>
  static auto make(N&&... n) {
    return S<std::remove_cvref_t<N>...>{std::forward<N>(n)...};
  }
};

template <class T>
using tree_traits_of = tree_traits<std::remove_cvref_t<T>>;

// Nested trees (a member that is itself a tree): the leaves are the innermost members.
template <class T, std::size_t I>
using member_t =
    std::remove_cvref_t<decltype(tree_traits_of<T>::template leaf<I>(std::declval<T&>()))>;

// Whether T (nested trees too), differentiated or updated as a tree, is well formed; else
// rule 9's message.
template <class T>
constexpr bool check_tree() {
  if constexpr (!tree_traits_of<T>::is_tree)
    return true;
  else if constexpr (tree_traits_of<T>::well_formed)
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return (check_tree<member_t<T, I>>() && ...);
    }(std::make_index_sequence<tree_traits_of<T>::size>{});
  else
    return require<false, diagnostic::tree_struct_not_template<std::remove_cvref_t<T>>>::value &&
           false;
}

// flat_size<T>: T's innermost leaves (1 for a leaf, 0 for a malformed struct).
template <class T>
constexpr std::size_t flat_size() {
  using TT = tree_traits_of<T>;
  if constexpr (!TT::is_tree) {
    return 1;
  } else if constexpr (!TT::well_formed) {
    return 0;
  } else {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return (std::size_t{0} + ... + flat_size<member_t<T, I>>());
    }(std::make_index_sequence<TT::size>{});
  }
}

// Where member I's leaves begin among T's innermost leaves.
template <class T, std::size_t I>
constexpr std::size_t flat_offset() {
  return []<std::size_t... K>(std::index_sequence<K...>) {
    return (std::size_t{0} + ... + flat_size<member_t<T, K>>());
  }(std::make_index_sequence<I>{});
}

// flatten(t): a std::tuple of const references to t's innermost leaves, in order.
template <class T>
auto flatten(const T& t) {
  using TT = tree_traits_of<T>;
  if constexpr (!TT::is_tree) {
    return std::tuple<const T&>(t);
  } else {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::tuple_cat(flatten(TT::template leaf<I>(t))...);
    }(std::make_index_sequence<TT::size>{});
  }
}

// unflatten<T, Offset>(flat): T's shape rebuilt over flat's elements Offset... (moved from),
// each tree of T's kind over the new leaves' types.
template <class T, std::size_t Offset, class Flat>
auto unflatten(Flat& flat) {
  using TT = tree_traits_of<T>;
  if constexpr (!TT::is_tree) {
    using leaf = std::remove_cvref_t<std::tuple_element_t<Offset, Flat>>;
    return leaf(std::move(std::get<Offset>(flat)));
  } else {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return TT::make(unflatten<member_t<T, I>, Offset + flat_offset<T, I>()>(flat)...);
    }(std::make_index_sequence<TT::size>{});
  }
}

template <class F, class T, class... More>
auto tree_map_impl(F& f, T& t, More&... more);

template <std::size_t I, class F, class T, class... More>
auto leaf_call(F& f, T& t, More&... more) {
  return tree_map_impl(f, tree_traits_of<T>::template leaf<I>(t),
                       tree_traits_of<More>::template leaf<I>(more)...);
}

// The tree of f(leaf of t, leaf of each of more...), nested trees recursively; f(t, more...)
// when t is not a tree. f is called on the leaves in order (a braced list: make's arguments
// would be evaluated in an unspecified order), so that side effects (an optimizer's
// collectives, a checkpoint's items) follow the tree's order on every compiler.
template <class F, class T, class... More>
auto tree_map_impl(F& f, T& t, More&... more) {
  using TT = tree_traits_of<T>;
  if constexpr (!TT::is_tree) {
    return f(t, more...);
  } else {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      std::tuple<decltype(leaf_call<I>(f, t, more...))...> leaves{leaf_call<I>(f, t, more...)...};
      return TT::make(std::get<I>(std::move(leaves))...);
    }(std::make_index_sequence<TT::size>{});
  }
}

}  // namespace detail

// parameter_tree<T>: a std::tuple, std::array or Hana struct template (of arrays).
template <class T>
concept parameter_tree = detail::tree_traits_of<T>::is_tree;

// tree_size<T>: the number of leaves, nested trees' leaves counted (1 for an array).
template <class T>
inline constexpr std::size_t tree_size = detail::flat_size<T>();

// tree_map(f, t, more...): the tree of f(t's leaf, more's leaves...), leaf by leaf (more are
// trees of the same kind and size, passed by reference: f may update them); on arrays, f(t,
// more...). f sees the leaves in the tree's order (declaration order, nested trees depth first).
template <class F, class T, class... More>
[[nodiscard]] auto tree_map(F&& f, T&& t, More&&... more) {
  if constexpr (!detail::check_tree<T>())
    return 0;  // the diagnostic fired
  else
    return detail::tree_map_impl(f, t, more...);
}

}  // namespace typeshard
