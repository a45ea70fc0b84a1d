// typeshard/ops/detail/traced_value.hpp: ts::traced (see ops/traced.hpp), how an op on traced
// values records its backward on the tape, and broadcasting's transpose (the cotangent summed
// back to an operand's shape), which every binary op's backward uses.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "../../array/sharded_array.hpp"
#include "../../core/errors.hpp"
#include "../../core/rules/rule9_gradients.hpp"
#include "../../plan/grad_plan.hpp"
#include "../../plan/reduce_plan.hpp"
#include "../astype.hpp"
#include "../einsum.hpp"
#include "../reduce.hpp"
#include "../reshard.hpp"
#include "forward_value.hpp"
#include "grad_tape.hpp"

namespace typeshard {

// traced<Array, Contributions, Leaf, Plans>: a value computed from the differentiated
// arguments. Contributions (plan/grad_plan.hpp) lists, as types, which parameters the value's
// computation used and with which unreduced axes their backward contributes; Leaf is the
// argnum of a differentiated argument itself, -1 for an intermediate value, and -2 - argnum
// for a bfloat16 copy of a float differentiated argument (ts::astype on it: a cast leaf,
// whose uses contribute to the argument's gradient directly, cast back to float and kept
// unreduced as the argument's own uses are). Plans: traced by
// ts::backward_plans, whose tape records each op's description and no backward; the others'
// record the backward and no description (so neither is compiled where it is not used).
template <class Array, class Contributions = grad_contributions<>, int Leaf = -1,
          bool Plans = false>
class traced {
 public:
  using array_type = Array;
  using value_type = typename Array::value_type;
  using mesh_type = typename Array::mesh_type;
  using spec = typename Array::spec;
  using extents_type = typename Array::extents_type;
  using unreduced_type = typename Array::unreduced_type;
  // The layout, as the array's: also what lets ts::transpose (array/block.hpp) take a traced
  // value as a global-view array and call ts::permute<1, 0> on it (the traced one, by ADL).
  using layout_type = typename Array::layout_type;
  using contributions = Contributions;
  using cotangent_type = detail::cotangent_t<Array>;
  static constexpr std::size_t rank = Array::rank;
  static constexpr int leaf = Leaf;
  static constexpr bool plans = Plans;

  traced(Array value, std::shared_ptr<detail::grad_tape> tape,
         detail::value_node<cotangent_type>* node)
      : value_(std::move(value)), tape_(std::move(tape)), node_(node) {}

  // The forward value (a plain array: reading it records nothing).
  const Array& value() const { return value_; }
  const shape<rank>& extents() const { return value_.extents(); }
  std::size_t extent(std::size_t d) const { return value_.extent(d); }
  const typeshard::device_mesh<mesh_type>& device_mesh() const { return value_.device_mesh(); }

  // Internals for the ops below and ts::value_and_grad.
  Array take_value() && { return std::move(value_); }  // an op on a dying value reuses it
  const std::shared_ptr<detail::grad_tape>& tape() const { return tape_; }
  detail::value_node<cotangent_type>* node() const { return node_; }

 private:
  Array value_;
  std::shared_ptr<detail::grad_tape> tape_;
  detail::value_node<cotangent_type>* node_;  // null for a leaf
};

namespace detail {
template <class A, class C, int L, bool P>
inline constexpr bool is_traced_v<traced<A, C, L, P>> = true;
}  // namespace detail

template <class T>
concept traced_like = detail::is_traced_v<std::remove_cvref_t<T>>;

// An operand of an op on traced values: a traced value or a plain array.
template <class T>
concept grad_operand = traced_like<T> || sharded_array_like<T>;

// At least one traced operand, the other traced or plain.
template <class A, class B>
concept traced_operands = grad_operand<A> && grad_operand<B> && (traced_like<A> || traced_like<B>);

namespace detail {

template <class X>
struct contributions_of {
  using type = grad_contributions<>;
};
template <class A, class C, int L, bool P>
struct contributions_of<traced<A, C, L, P>> {
  using type = C;
};

// The argnum whose gradient a traced value of Leaf L contributes to directly: L for a
// differentiated argument, -2 - L for a cast leaf, -1 for an intermediate value.
constexpr int leaf_argnum(int leaf) { return leaf >= 0 ? leaf : (leaf <= -2 ? -2 - leaf : -1); }

// Whether X is a cast leaf (a bfloat16 copy of a float differentiated argument).
template <class X>
inline constexpr bool is_cast_leaf_v = false;
template <class A, class C, int L, bool P>
inline constexpr bool is_cast_leaf_v<traced<A, C, L, P>> = (L <= -2);

// A's layout with float elements: the float argument a cast leaf A was cast from.
template <class A>
using float_array_t = sharded_array<float, typename A::mesh_type, typename A::spec,
                                    typename A::extents_type, typename A::unreduced_type>;

// What an operand X contributes to the result's list when its backward result has type Raw:
// a parameter (or a cast leaf) adds (argnum, the axes its contribution keeps unreduced).
template <class X, class Raw>
struct new_contribution {
  using type = grad_contributions<>;
};
template <class A, class C, int L, bool P, class Raw>
  requires(leaf_argnum(L) >= 0)
struct new_contribution<traced<A, C, L, P>, Raw> {
  using type = grad_contributions<grad_contribution<static_cast<std::size_t>(leaf_argnum(L)),
                                                    contribution_unreduced_of<A, Raw>>>;
};

// Where an operand's backward result goes: an intermediate's node (resharded to its spec,
// reduced), a parameter's store (kept unreduced: to_contribution; from a cast leaf cast to
// float first, each partial sum rounded alone), or nowhere (a plain array, whose backward is
// not even computed).
template <class X>
struct sink {
  static constexpr bool active = false;
  explicit sink(const X&) {}
  template <class Raw>
  void deliver(const Raw&) const {}
};
template <class A, class C, int L, bool P>
struct sink<traced<A, C, L, P>> {
  static constexpr bool active = true;
  value_node<cotangent_t<A>>* node = nullptr;
  leaf_store* store = nullptr;
  explicit sink(const traced<A, C, L, P>& x) {
    if constexpr (leaf_argnum(L) >= 0)
      store = &x.tape()->leaves[static_cast<std::size_t>(leaf_argnum(L))];
    else
      node = x.node();
  }
  template <class Raw>
  void deliver(Raw raw) const {  // by value: an intermediate's cotangent reshards it in place
    if constexpr (L >= 0)
      store->add(to_contribution<A>(raw));
    else if constexpr (L <= -2 && std::is_same_v<typename Raw::value_type, float>)
      store->add(to_contribution<float_array_t<A>>(raw));
    else if constexpr (L <= -2)
      store->add(to_contribution<float_array_t<A>>(typeshard::astype<float>(raw)));
    else
      node->add(to_cotangent<A>(std::move(raw)));
  }
};

template <class X, class Raw>
std::string delivery_description() {
  if constexpr (!traced_like<X>) {
    return "";
  } else if constexpr (leaf_argnum(X::leaf) >= 0) {
    using plan = reshard_plan<typename Raw::mesh_type, typename Raw::spec, typename X::spec,
                              typename Raw::extents_type, typename Raw::unreduced_type,
                              contribution_unreduced_of<typename X::array_type, Raw>>;
    // Built with append: g++ 12 at -O3 warns falsely (-Warray-bounds) on `"..." + string`.
    std::string out = "  to parameter ";
    out.append(std::to_string(leaf_argnum(X::leaf)))
        .append(X::leaf >= 0 ? ": " : " (cast to float): ")
        .append(plan::describe());
    return out;
  } else {
    using plan = reshard_plan<typename Raw::mesh_type, typename Raw::spec, typename X::spec,
                              typename Raw::extents_type, typename Raw::unreduced_type>;
    std::string out = "  to the operand: ";
    out.append(plan::describe());
    return out;
  }
}

template <class A, class B>
const std::shared_ptr<grad_tape>& tape_of(const A& a, const B& b) {
  if constexpr (traced_like<A>) {
    (void)b;
    return a.tape();
  } else {
    (void)a;
    return b.tape();
  }
}

// Whether the operands are traced by ts::backward_plans (a plain array operand: no say).
template <class A, class B = A>
constexpr bool plans_of() {
  if constexpr (traced_like<A> && traced_like<B>) {
    static_assert(A::plans == B::plans,
                  "typeshard: internal error (a typeshard bug, please report it): an op "
                  "has operands of two differentiated calls");
    return A::plans;
  } else if constexpr (traced_like<A>) {
    return A::plans;
  } else {
    return B::plans;
  }
}

// An op's description for ts::backward_plans: a plain function, or a type whose static
// text() builds it (a template's, instantiated only where a backward_plans call takes its
// address).
template <class D>
std::string (*describer(D d))() {
  if constexpr (std::is_pointer_v<D>)
    return d;
  else
    return &D::text;
}

// Records an op with result `value` and operands a (and b): raw_a(g) / raw_b(g) compute the
// backward results from the result's cotangent g (compiled for value_and_grad and grad);
// `describe` says what they run (compiled for backward_plans). Returns the traced result.
template <class R, class A, class RawA, class Describe>
auto record(R value, const A& a, RawA raw_a, Describe describe) {
  using Cot = cotangent_t<R>;
  using raw_a_t = std::remove_cvref_t<decltype(raw_a(std::declval<const Cot&>()))>;
  using list = typename contributions_merge<typename contributions_of<A>::type,
                                            typename new_contribution<A, raw_a_t>::type>::type;
  auto node = std::make_unique<value_node<Cot>>();
  if constexpr (A::plans) {
    node->describe = describer(describe);
    (void)raw_a;
  } else {
    node->pull = [s = sink<A>(a), raw_a](const Cot& g) { s.deliver(raw_a(g)); };
    (void)describe;
  }
  auto* n = node.get();
  a.tape()->nodes.push_back(std::move(node));
  return traced<R, list, -1, A::plans>(std::move(value), a.tape(), n);
}

template <class R, class A, class B, class RawA, class RawB, class Describe>
auto record(R value, const A& a, const B& b, RawA raw_a, RawB raw_b, Describe describe) {
  using Cot = cotangent_t<R>;
  using list = typename contributions_merge<
      typename contributions_of<A>::type, typename contributions_of<B>::type,
      typename new_contribution<
          A, std::remove_cvref_t<decltype(raw_a(std::declval<const Cot&>()))>>::type,
      typename new_contribution<
          B, std::remove_cvref_t<decltype(raw_b(std::declval<const Cot&>()))>>::type>::type;
  constexpr bool plans = plans_of<A, B>();
  const std::shared_ptr<grad_tape>& tape = tape_of(a, b);
  auto node = std::make_unique<value_node<Cot>>();
  if constexpr (plans) {
    node->describe = describer(describe);
    (void)raw_a, (void)raw_b;
  } else {
    (void)describe;
    node->pull = [sa = sink<A>(a), sb = sink<B>(b), raw_a, raw_b](const Cot& g) {
      // An operand that is a plain array gets nothing (its raw_ is named all the same, for
      // clang's -Wunused-lambda-capture).
      if constexpr (sink<A>::active)
        sa.deliver(raw_a(g));
      else
        (void)raw_a;
      if constexpr (sink<B>::active)
        sb.deliver(raw_b(g));
      else
        (void)raw_b;
    };
  }
  auto* n = node.get();
  tape->nodes.push_back(std::move(node));
  return traced<R, list, -1, plans>(std::move(value), tape, n);
}

// ---- broadcasting's transpose: sum the cotangent back to an operand's shape -----------------

template <std::size_t... D>
struct int_dims {};

// The result dimensions (of a rank-RR result) an operand of type A stretches statically:
// its leading missing dimensions are summed away separately.
template <class A, class V>
struct stretched {
  static constexpr std::size_t lead = V::rank - A::rank;
  static constexpr std::size_t count = [] {
    std::size_t n = 0;
    for (std::size_t d = 0; d < A::rank; ++d)
      n += A::extents_type::static_extents[d] == 1 &&
           V::extents_type::static_extents[lead + d] != 1;
    return n;
  }();
  static constexpr std::array<int, count + 1> dims = [] {
    std::array<int, count + 1> out{};
    std::size_t n = 0;
    for (std::size_t d = 0; d < A::rank; ++d)
      if (A::extents_type::static_extents[d] == 1 &&
          V::extents_type::static_extents[lead + d] != 1)
        out[n++] = static_cast<int>(d);
    return out;
  }();
};

template <class A, class V, std::size_t... I>
auto sum_stretched(const V& v, std::index_sequence<I...>) {
  if constexpr (sizeof...(I) == 0)
    return v;
  else
    return typeshard::sum<stretched<A, V>::dims[I]...>(v, keep_dims);
}

template <class V, std::size_t... I>
auto sum_leading(const V& v, std::index_sequence<I...>) {
  if constexpr (sizeof...(I) == 0)
    return v;
  else
    return typeshard::sum<static_cast<int>(I)...>(v);
}

// reduce_to's failure, out of line: a function of values, one copy per TU.
[[noreturn]] TYPESHARD_COLD inline void throw_dynamic_stretch(std::size_t d, std::size_t to) {
  // Built with append: g++ 12 at -O3 warns falsely (-Warray-bounds) on `"..." + string`.
  throw shape_error(std::string("typeshard: ts::value_and_grad: operand dimension ")
                        .append(std::to_string(d))
                        .append(" of dynamic extent 1 stretches to ")
                        .append(std::to_string(to))
                        .append(" in a broadcast; its gradient needs that known at compile "
                                "time; fix: give the stretching dimension static extent 1 "
                                "(ts::extents<..., 1, ...>)"));
}

// v (the shape of a broadcast result) summed to the shape of an operand of type A with
// extents `a_extents`.
template <class A, class V>
auto reduce_to(const V& v, const shape<A::rank>& a_extents) {
  constexpr std::size_t lead = V::rank - A::rank;
  for (std::size_t d = 0; d < A::rank; ++d)
    if (a_extents[d] == 1 && v.extent(lead + d) != 1 &&
        !(A::extents_type::static_extents[d] == 1))
      throw_dynamic_stretch(d, v.extent(lead + d));
  auto s = sum_leading(v, std::make_index_sequence<lead>{});
  return sum_stretched<A>(s, std::make_index_sequence<stretched<A, V>::count>{});
}

template <class X>
using scalar_t = typename std::remove_cvref_t<X>::value_type;
// The type of a scalar operand beside X (core/bfloat16.hpp: any arithmetic value beside
// bfloat16).
template <class X>
using scalar_arg_t = scalar_parameter_t<scalar_t<X>>;

}  // namespace detail

}  // namespace typeshard
