// typeshard/ops/traced.hpp: the values ts::value_and_grad passes for the differentiated
// arguments, and typeshard's ops on them.
//
//   auto loss = [](auto w, auto x, auto y) {        // w: a ts::traced<...>, x, y: arrays
//     auto h = ts::tanh(ts::einsum<"bd,dh->bh">(x, w));
//     return ts::mean(ts::sum<1>(h * h) - ts::sum<1>(y));
//   };
//
// A traced<Array> holds the forward value (computed eagerly by the ordinary op: the same
// plan, the same collectives) and records the op's backward on the tape. Plain arrays mix
// with traced values in every binary op; they get no gradient. The ops on traced values:
// ts::einsum, ts::matmul (the "...ij,...jk->...ik" einsum), + - * / with broadcasting and
// scalars, unary -, exp log tanh relu sin cos sqrt, ts::sum and ts::mean (Dims, keep_dims,
// an output spec), ts::softmax and ts::log_softmax, ts::reshard, ts::psum, ts::permute,
// ts::split_dim, ts::merge_dims. Each backward is itself one of these ops on global
// arrays (plan/grad_plan.hpp), so its collectives are planned at compile time:
//   einsum       d lhs = einsum<"out,rhs->lhs">(d out, rhs), d rhs likewise, then resharded
//                to the operand's spec (the all-reduce of Megatron's dX = dH W1^T is this
//                reshard of a result unreduced over "model");
//   broadcast    the cotangent summed over the stretched dimensions (unreduced where those
//                are sharded), then resharded;
//   sum, mean    the cotangent broadcast back (mean: scaled by 1 / count);
//   softmax      y * (g - sum(g * y)) along the dimension (its sum a psum when sharded);
//   reshard      the reverse reshard (all_gather <-> slice, all_to_all <-> all_to_all back,
//                psum <-> identity);
//   dimension moves  the inverse move (no communication).
// ts::max, ts::min, ts::maximum, ts::minimum, ts::map, ts::zip and ts::shard_map on a traced
// value are rule-9 compile errors, never a wrong gradient.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "../array/sharded_array.hpp"
#include "../core/errors.hpp"
#include "../core/rules/rule9_gradients.hpp"
#include "../plan/grad_plan.hpp"
#include "../plan/reduce_plan.hpp"
#include "detail/grad_tape.hpp"
#include "dims.hpp"
#include "einsum.hpp"
#include "elementwise.hpp"
#include "reduce.hpp"
#include "reshard.hpp"
#include "softmax.hpp"

namespace typeshard {

// traced<Array, Contributions, Leaf>: a value computed from the differentiated arguments.
// Contributions (plan/grad_plan.hpp) lists, as types, which parameters the value's
// computation used and with which unreduced axes their backward contributes; Leaf is the
// argnum of a differentiated argument itself, -1 for an intermediate value.
template <class Array, class Contributions = grad_contributions<>, int Leaf = -1>
class traced {
 public:
  using array_type = Array;
  using value_type = typename Array::value_type;
  using mesh_type = typename Array::mesh_type;
  using spec = typename Array::spec;
  using extents_type = typename Array::extents_type;
  using unreduced_type = typename Array::unreduced_type;
  using contributions = Contributions;
  using cotangent_type = detail::cotangent_t<Array>;
  static constexpr std::size_t rank = Array::rank;
  static constexpr int leaf = Leaf;

  traced(Array value, std::shared_ptr<detail::grad_tape> tape,
         detail::value_node<cotangent_type>* node)
      : value_(std::move(value)), tape_(std::move(tape)), node_(node) {}

  // The forward value (a plain array: reading it records nothing).
  const Array& value() const { return value_; }
  const shape<rank>& extents() const { return value_.extents(); }
  std::size_t extent(std::size_t d) const { return value_.extent(d); }
  const typeshard::device_mesh<mesh_type>& device_mesh() const { return value_.device_mesh(); }

  // Internals for the ops below and ts::value_and_grad.
  const std::shared_ptr<detail::grad_tape>& tape() const { return tape_; }
  detail::value_node<cotangent_type>* node() const { return node_; }

 private:
  Array value_;
  std::shared_ptr<detail::grad_tape> tape_;
  detail::value_node<cotangent_type>* node_;  // null for a leaf
};

namespace detail {
template <class A, class C, int L>
inline constexpr bool is_traced_v<traced<A, C, L>> = true;
}  // namespace detail

template <class T>
concept traced_type = detail::is_traced_v<std::remove_cvref_t<T>>;

// An operand of an op on traced values: a traced value or a plain array.
template <class T>
concept grad_operand = traced_type<T> || sharded_array_type<T>;

// At least one traced operand, the other traced or plain.
template <class A, class B>
concept traced_operands = grad_operand<A> && grad_operand<B> && (traced_type<A> || traced_type<B>);

namespace detail {

template <class X>
const auto& value_of(const X& x) {
  if constexpr (traced_type<X>)
    return x.value();
  else
    return x;
}

template <class X>
using value_t = std::remove_cvref_t<decltype(value_of(std::declval<const X&>()))>;

template <class X>
struct contributions_of {
  using type = grad_contributions<>;
};
template <class A, class C, int L>
struct contributions_of<traced<A, C, L>> {
  using type = C;
};

// What an operand X contributes to the result's list when its backward result has type Raw:
// a parameter adds (argnum, the axes its contribution keeps unreduced).
template <class X, class Raw>
struct new_contribution {
  using type = grad_contributions<>;
};
template <class A, class C, int L, class Raw>
  requires(L >= 0)
struct new_contribution<traced<A, C, L>, Raw> {
  using type = grad_contributions<
      grad_contribution<static_cast<std::size_t>(L), contribution_unreduced_of<A, Raw>>>;
};

// Where an operand's backward result goes: an intermediate's node (resharded to its spec,
// reduced), a parameter's store (kept unreduced: to_contribution), or nowhere (a plain array,
// whose backward is not even computed).
template <class X>
struct sink {
  static constexpr bool active = false;
  explicit sink(const X&) {}
  template <class Raw>
  void deliver(const Raw&) const {}
};
template <class A, class C, int L>
struct sink<traced<A, C, L>> {
  static constexpr bool active = true;
  value_node<cotangent_t<A>>* node = nullptr;
  leaf_store* store = nullptr;
  explicit sink(const traced<A, C, L>& x) {
    if constexpr (L >= 0)
      store = &x.tape()->leaves[static_cast<std::size_t>(L)];
    else
      node = x.node();
  }
  template <class Raw>
  void deliver(const Raw& raw) const {
    if constexpr (L >= 0)
      store->add(to_contribution<A>(raw));
    else
      node->add(to_cotangent<A>(raw));
  }
};

template <class X, class Raw>
std::string delivery_description() {
  if constexpr (!traced_type<X>) {
    return "";
  } else if constexpr (X::leaf >= 0) {
    using plan = reshard_plan<typename Raw::mesh_type, typename Raw::spec, typename X::spec,
                              typename Raw::extents_type, typename Raw::unreduced_type,
                              contribution_unreduced_of<typename X::array_type, Raw>>;
    return "  to parameter " + std::to_string(X::leaf) + ": " + plan::describe();
  } else {
    using plan = reshard_plan<typename Raw::mesh_type, typename Raw::spec, typename X::spec,
                              typename Raw::extents_type, typename Raw::unreduced_type>;
    return "  to the operand: " + plan::describe();
  }
}

template <class A, class B>
const std::shared_ptr<grad_tape>& tape_of(const A& a, const B& b) {
  if constexpr (traced_type<A>) {
    (void)b;
    return a.tape();
  } else {
    (void)a;
    return b.tape();
  }
}

// Records an op with result `value` and operands a (and b): raw_a(g) / raw_b(g) compute the
// backward results from the result's cotangent g. Returns the traced result.
template <class R, class A, class RawA>
auto record(R value, const A& a, RawA raw_a, std::string (*describe)() = nullptr) {
  using Cot = cotangent_t<R>;
  using raw_a_t = std::remove_cvref_t<decltype(raw_a(std::declval<const Cot&>()))>;
  using list = typename contributions_merge<typename contributions_of<A>::type,
                                            typename new_contribution<A, raw_a_t>::type>::type;
  auto node = std::make_unique<value_node<Cot>>();
  node->describe = describe;
  node->pull = [s = sink<A>(a), raw_a](const Cot& g) { s.deliver(raw_a(g)); };
  auto* n = node.get();
  a.tape()->nodes.push_back(std::move(node));
  return traced<R, list>(std::move(value), a.tape(), n);
}

template <class R, class A, class B, class RawA, class RawB>
auto record(R value, const A& a, const B& b, RawA raw_a, RawB raw_b,
            std::string (*describe)() = nullptr) {
  using Cot = cotangent_t<R>;
  using list = typename contributions_merge<
      typename contributions_of<A>::type, typename contributions_of<B>::type,
      typename new_contribution<A, std::remove_cvref_t<decltype(raw_a(std::declval<const Cot&>()))>>::type,
      typename new_contribution<B, std::remove_cvref_t<decltype(raw_b(std::declval<const Cot&>()))>>::type>::type;
  const std::shared_ptr<grad_tape>& tape = tape_of(a, b);
  auto node = std::make_unique<value_node<Cot>>();
  node->describe = describe;
  node->pull = [sa = sink<A>(a), sb = sink<B>(b), raw_a, raw_b](const Cot& g) {
    if constexpr (sink<A>::active) sa.deliver(raw_a(g));
    if constexpr (sink<B>::active) sb.deliver(raw_b(g));
  };
  auto* n = node.get();
  tape->nodes.push_back(std::move(node));
  return traced<R, list>(std::move(value), tape, n);
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

// v (the shape of a broadcast result) summed to the shape of an operand of type A with
// extents `a_extents`.
template <class A, class V>
auto reduce_to(const V& v, const shape<A::rank>& a_extents) {
  constexpr std::size_t lead = V::rank - A::rank;
  for (std::size_t d = 0; d < A::rank; ++d)
    if (a_extents[d] == 1 && v.extent(lead + d) != 1 &&
        !(A::extents_type::static_extents[d] == 1))
      throw shape_error(
          "typeshard: ts::value_and_grad: operand dimension " + std::to_string(d) +
          " of dynamic extent 1 stretches to " + std::to_string(v.extent(lead + d)) +
          " in a broadcast; its gradient needs that known at compile time; fix: give the "
          "stretching dimension static extent 1 (ts::extents<..., 1, ...>)");
  auto s = sum_leading(v, std::make_index_sequence<lead>{});
  return sum_stretched<A>(s, std::make_index_sequence<stretched<A, V>::count>{});
}

template <class X>
using scalar_t = typename std::remove_cvref_t<X>::value_type;

// The matmul equation of rank R: "ij,jk->ik", "aij,ajk->aik", ...
template <std::size_t R>
constexpr einsum_subscripts matmul_subscripts() {
  einsum_subscripts s;
  auto put = [&](char c) { s.chars[s.length++] = c; };
  auto operand = [&](char x, char y) {
    for (std::size_t i = 0; i + 2 < R; ++i) put(static_cast<char>('a' + i));
    put(x);
    put(y);
  };
  operand('x', 'y');
  put(',');
  operand('y', 'z');
  put('-');
  put('>');
  operand('x', 'z');
  return s;
}

}  // namespace detail

// ---- einsum and matmul ------------------------------------------------------------------------

namespace detail {

// d operand = einsum<T>(g, other): planned without an output spec when that is valid (the
// result may stay unreduced; the sink reshards it or keeps it for a parameter), else with the
// operand's spec.
template <einsum_subscripts T, class Operand, class G, class Other>
using einsum_transpose_plan =
    std::conditional_t<einsum_valid<T, G, Other>, einsum_plan_for<T, G, Other>,
                       einsum_plan_for<T, G, Other, typename Operand::spec>>;

template <einsum_subscripts T, class Operand, class G, class Other>
auto einsum_transpose(const G& g, const Other& other) {
  if constexpr (einsum_valid<T, G, Other>)
    return typeshard::einsum<T>(g, other);
  else
    return typeshard::einsum<T, typename Operand::spec>(g, other);
}

template <einsum_subscripts S, class OutSpec, class A, class B>
std::string describe_einsum() {
  using AV = value_t<A>;
  using BV = value_t<B>;
  using G = cotangent_t<decltype(typeshard::einsum<S, OutSpec>(std::declval<const AV&>(),
                                                               std::declval<const BV&>()))>;
  std::string out = "einsum " + std::string(S.view()) + " backward (d out: " +
                    G::spec::to_string() + ")";
  if constexpr (traced_type<A>) {
    constexpr einsum_subscripts T = einsum_lhs_transpose<S>;
    using plan = einsum_transpose_plan<T, AV, G, BV>;
    using raw = decltype(einsum_transpose<T, AV>(std::declval<const G&>(), std::declval<const BV&>()));
    out += "\n  d lhs = einsum " + std::string(T.view()) + "(d out, rhs): " + plan::describe() +
           "\n" + delivery_description<A, raw>();
  }
  if constexpr (traced_type<B>) {
    constexpr einsum_subscripts T = einsum_rhs_transpose<S>;
    using plan = einsum_transpose_plan<T, BV, G, AV>;
    using raw = decltype(einsum_transpose<T, BV>(std::declval<const G&>(), std::declval<const AV&>()));
    out += "\n  d rhs = einsum " + std::string(T.view()) + "(d out, lhs): " + plan::describe() +
           "\n" + delivery_description<B, raw>();
  }
  return out;
}

}  // namespace detail

// einsum<Subscripts[, OutSpec]>(a, b) with a traced operand (ts::einsum on arrays otherwise).
template <einsum_subscripts Subscripts, class OutSpec = auto_out, class A, class B>
  requires traced_operands<A, B> && (spec_type<OutSpec> || std::is_same_v<OutSpec, auto_out>)
auto einsum(const A& a, const B& b) {
  using AV = detail::value_t<A>;
  using BV = detail::value_t<B>;
  const AV& av = detail::value_of(a);
  const BV& bv = detail::value_of(b);
  using forward = decltype(typeshard::einsum<Subscripts, OutSpec>(av, bv));
  constexpr bool lhs_ok = !traced_type<A> || detail::einsum_check_differentiable<Subscripts, true>();
  constexpr bool rhs_ok = !traced_type<B> || detail::einsum_check_differentiable<Subscripts, false>();
  if constexpr (!einsum_valid<Subscripts, AV, BV, OutSpec> || !lhs_ok || !rhs_ok) {
    // A diagnostic fired (here, or in the forward einsum): a value of a well-formed type.
    return traced<forward>(typeshard::einsum<Subscripts, OutSpec>(av, bv),
                           detail::tape_of(a, b), nullptr);
  } else {
    return detail::record(
        typeshard::einsum<Subscripts, OutSpec>(av, bv), a, b,
        [bv](const auto& g) {
          return detail::einsum_transpose<einsum_lhs_transpose<Subscripts>, AV>(g, bv);
        },
        [av](const auto& g) {
          return detail::einsum_transpose<einsum_rhs_transpose<Subscripts>, BV>(g, av);
        },
        &detail::describe_einsum<Subscripts, OutSpec, A, B>);
  }
}

// matmul<OutSpec>(a, b) with a traced operand: the einsum "...ij,...jk->...ik".
template <class OutSpec = auto_out, class A, class B>
  requires traced_operands<A, B> && (spec_type<OutSpec> || std::is_same_v<OutSpec, auto_out>)
auto matmul(const A& a, const B& b) {
  return einsum<detail::matmul_subscripts<detail::value_t<A>::rank>(), OutSpec>(a, b);
}

// ---- elementwise: + - * / with broadcasting, scalars, unary functions ---------------------

namespace detail {
inline std::string describe_elementwise() {
  return "elementwise backward: local products; a broadcast operand's cotangent summed over "
         "the stretched dimensions, then resharded to its spec";
}
}  // namespace detail

template <class A, class B>
  requires traced_operands<A, B>
auto operator+(const A& a, const B& b) {
  using AV = detail::value_t<A>;
  using BV = detail::value_t<B>;
  const AV& av = detail::value_of(a);
  const BV& bv = detail::value_of(b);
  return detail::record(
      av + bv, a, b, [e = av.extents()](const auto& g) { return detail::reduce_to<AV>(g, e); },
      [e = bv.extents()](const auto& g) { return detail::reduce_to<BV>(g, e); },
      &detail::describe_elementwise);
}

template <class A, class B>
  requires traced_operands<A, B>
auto operator-(const A& a, const B& b) {
  using AV = detail::value_t<A>;
  using BV = detail::value_t<B>;
  const AV& av = detail::value_of(a);
  const BV& bv = detail::value_of(b);
  return detail::record(
      av - bv, a, b, [e = av.extents()](const auto& g) { return detail::reduce_to<AV>(g, e); },
      [e = bv.extents()](const auto& g) { return detail::reduce_to<BV>(-g, e); },
      &detail::describe_elementwise);
}

template <class A, class B>
  requires traced_operands<A, B>
auto operator*(const A& a, const B& b) {
  using AV = detail::value_t<A>;
  using BV = detail::value_t<B>;
  const AV& av = detail::value_of(a);
  const BV& bv = detail::value_of(b);
  return detail::record(
      av * bv, a, b,
      [bv, e = av.extents()](const auto& g) { return detail::reduce_to<AV>(g * bv, e); },
      [av, e = bv.extents()](const auto& g) { return detail::reduce_to<BV>(g * av, e); },
      &detail::describe_elementwise);
}

template <class A, class B>
  requires traced_operands<A, B>
auto operator/(const A& a, const B& b) {
  using AV = detail::value_t<A>;
  using BV = detail::value_t<B>;
  const AV& av = detail::value_of(a);
  const BV& bv = detail::value_of(b);
  auto y = av / bv;
  return detail::record(
      y, a, b, [bv, e = av.extents()](const auto& g) { return detail::reduce_to<AV>(g / bv, e); },
      [bv, y, e = bv.extents()](const auto& g) {
        return detail::reduce_to<BV>(-(g * y) / bv, e);
      },
      &detail::describe_elementwise);
}

template <traced_type X>
auto operator-(const X& x) {
  return detail::record(-x.value(), x, [](const auto& g) { return -g; },
                        &detail::describe_elementwise);
}

// Scalars on either side: d(x + s) = d(s + x) = d(x - s) = g, d(s - x) = -g, d(x * s) = g s,
// d(x / s) = g / s, d(s / x) = -g y / x.
template <traced_type X>
auto operator+(const X& x, detail::scalar_t<X> s) {
  return detail::record(x.value() + s, x, [](const auto& g) { return g; },
                        &detail::describe_elementwise);
}
template <traced_type X>
auto operator+(detail::scalar_t<X> s, const X& x) {
  return x + s;
}
template <traced_type X>
auto operator-(const X& x, detail::scalar_t<X> s) {
  return detail::record(x.value() - s, x, [](const auto& g) { return g; },
                        &detail::describe_elementwise);
}
template <traced_type X>
auto operator-(detail::scalar_t<X> s, const X& x) {
  return detail::record(s - x.value(), x, [](const auto& g) { return -g; },
                        &detail::describe_elementwise);
}
template <traced_type X>
auto operator*(const X& x, detail::scalar_t<X> s) {
  return detail::record(x.value() * s, x, [s](const auto& g) { return g * s; },
                        &detail::describe_elementwise);
}
template <traced_type X>
auto operator*(detail::scalar_t<X> s, const X& x) {
  return x * s;
}
template <traced_type X>
auto operator/(const X& x, detail::scalar_t<X> s) {
  return detail::record(x.value() / s, x, [s](const auto& g) { return g / s; },
                        &detail::describe_elementwise);
}
template <traced_type X>
auto operator/(detail::scalar_t<X> s, const X& x) {
  auto y = s / x.value();
  return detail::record(y, x, [y, xv = x.value()](const auto& g) { return -(g * y) / xv; },
                        &detail::describe_elementwise);
}

// Unary functions: y = f(x), d x = g f'(x).
template <traced_type X>
auto exp(const X& x) {
  auto y = typeshard::exp(x.value());
  return detail::record(y, x, [y](const auto& g) { return g * y; }, &detail::describe_elementwise);
}
template <traced_type X>
auto log(const X& x) {
  return detail::record(typeshard::log(x.value()), x, [xv = x.value()](const auto& g) { return g / xv; },
                        &detail::describe_elementwise);
}
template <traced_type X>
auto tanh(const X& x) {
  auto y = typeshard::tanh(x.value());
  return detail::record(y, x, [y](const auto& g) { return g * (1 - y * y); },
                        &detail::describe_elementwise);
}
template <traced_type X>
auto relu(const X& x) {
  using T = detail::scalar_t<X>;
  return detail::record(typeshard::relu(x.value()), x,
                        [xv = x.value()](const auto& g) {
                          return typeshard::zip(g, xv, [](T gg, T v) { return v > 0 ? gg : T(0); });
                        },
                        &detail::describe_elementwise);
}
template <traced_type X>
auto sin(const X& x) {
  return detail::record(typeshard::sin(x.value()), x,
                        [xv = x.value()](const auto& g) { return g * typeshard::cos(xv); },
                        &detail::describe_elementwise);
}
template <traced_type X>
auto cos(const X& x) {
  return detail::record(typeshard::cos(x.value()), x,
                        [xv = x.value()](const auto& g) { return -(g * typeshard::sin(xv)); },
                        &detail::describe_elementwise);
}
template <traced_type X>
auto sqrt(const X& x) {
  using T = detail::scalar_t<X>;
  auto y = typeshard::sqrt(x.value());
  return detail::record(y, x, [y](const auto& g) { return (g * T(0.5)) / y; },
                        &detail::describe_elementwise);
}

// Not differentiable (rule 9): max, min, maximum, minimum, map, zip of a traced value.
#define TYPESHARD_NOT_DIFFERENTIABLE_REDUCTION(name)                                        \
  template <int... Dims, traced_type X>                                                    \
  auto name(const X& x) {                                                                  \
    static_assert(detail::require<false, diagnostic::grad_op_not_differentiable<X>>::value); \
    return x;                                                                              \
  }                                                                                        \
  template <int... Dims, traced_type X>                                                    \
  auto name(const X& x, keep_dims_t) {                                                     \
    static_assert(detail::require<false, diagnostic::grad_op_not_differentiable<X>>::value); \
    return x;                                                                              \
  }
TYPESHARD_NOT_DIFFERENTIABLE_REDUCTION(max)
TYPESHARD_NOT_DIFFERENTIABLE_REDUCTION(min)
#undef TYPESHARD_NOT_DIFFERENTIABLE_REDUCTION

template <class A, class B>
  requires traced_operands<A, B>
auto maximum(const A& a, const B&) {
  static_assert(detail::require<false, diagnostic::grad_op_not_differentiable<A>>::value);
  return a;
}
template <class A, class B>
  requires traced_operands<A, B>
auto minimum(const A& a, const B&) {
  static_assert(detail::require<false, diagnostic::grad_op_not_differentiable<A>>::value);
  return a;
}
template <traced_type X, class F>
auto map(const X& x, F) {
  static_assert(detail::require<false, diagnostic::grad_map_not_differentiable<F>>::value);
  return x;
}
template <class A, class B, class F>
  requires traced_operands<A, B>
auto zip(const A& a, const B&, F) {
  static_assert(detail::require<false, diagnostic::grad_map_not_differentiable<F>>::value);
  return a;
}

// ---- reductions: sum and mean ------------------------------------------------------------

namespace detail {

// The extents of x with the reduced dimensions set to 1 (the keep-dims shape), and the
// number of elements reduced into each result element.
template <std::size_t Rank, int... Dims>
std::pair<shape<Rank>, std::size_t> keep_shape(const shape<Rank>& x) {
  shape<Rank> k = x;
  std::size_t count = 1;
  std::array<bool, Rank> reduced{};
  if constexpr (sizeof...(Dims) == 0) {
    reduced.fill(true);
  } else {
    for (int d : {Dims...}) reduced[static_cast<std::size_t>(d < 0 ? d + static_cast<int>(Rank) : d)] = true;
  }
  for (std::size_t d = 0; d < Rank; ++d)
    if (reduced[d]) {
      count *= x[d];
      k[d] = 1;
    }
  return {k, count};
}

inline std::string describe_reduce() {
  return "sum/mean backward: the cotangent broadcast back over the reduced dimensions "
         "(local, no communication; mean scales by 1 / count)";
}

// sum or mean (Mean) over Dims of a traced x, keeping the dimensions or not: the backward
// reads the result's cotangent as the keep-dims array (the same blocks) and broadcasts it.
template <bool Mean, bool KeepDims, int... Dims, class X>
auto traced_reduce(const X& x) {
  using XV = typename X::array_type;
  using T = typename XV::value_type;
  const XV& xv = x.value();
  constexpr reduction op = Mean ? reduction::mean : reduction::sum;
  using K = decltype(detail::reduce<op, auto_out, true, Dims...>(xv));
  const std::pair<shape<XV::rank>, std::size_t> keep = keep_shape<XV::rank, Dims...>(xv.extents());
  const T scale = Mean ? T(1) / static_cast<T>(keep.second) : T(1);
  return record(detail::reduce<op, auto_out, KeepDims, Dims...>(xv), x,
                [kext = keep.first, scale, xext = xv.extents()](const auto& g) {
                  (void)scale;  // used by mean only
                  const auto gk = retype<cotangent_t<K>>(g, kext);
                  const auto dx = filled<cotangent_t<XV>>(g.device_mesh(), xext, T(0)) + gk;
                  if constexpr (Mean)
                    return dx * scale;
                  else
                    return dx;
                },
                &describe_reduce);
}

}  // namespace detail

template <int... Dims, traced_type X>
auto sum(const X& x) {
  return detail::traced_reduce<false, false, Dims...>(x);
}
template <int... Dims, traced_type X>
auto sum(const X& x, keep_dims_t) {
  return detail::traced_reduce<false, true, Dims...>(x);
}
template <int... Dims, traced_type X>
auto mean(const X& x) {
  return detail::traced_reduce<true, false, Dims...>(x);
}
template <int... Dims, traced_type X>
auto mean(const X& x, keep_dims_t) {
  return detail::traced_reduce<true, true, Dims...>(x);
}
// With an output spec: the reduction, then the reshard to it (what the plan does).
template <spec_type OutSpec, int... Dims, traced_type X>
auto sum(const X& x) {
  return reshard<OutSpec>(sum<Dims...>(x));
}
template <spec_type OutSpec, int... Dims, traced_type X>
auto mean(const X& x) {
  return reshard<OutSpec>(mean<Dims...>(x));
}

// ---- softmax and log_softmax -------------------------------------------------------------

namespace detail {
// The row sum along Dim, kept as a dimension of extent 1 and reduced (a psum when Dim is
// sharded: the same collective the forward's row sum ran).
template <int Dim, class V>
auto row_sum(const V& v) {
  auto s = typeshard::sum<Dim>(v, keep_dims);
  return typeshard::reshard<typename decltype(s)::spec>(s);
}
template <class X, int Dim>
std::string describe_softmax() {
  using V = cotangent_t<typename X::array_type>;
  using S = decltype(typeshard::sum<Dim>(std::declval<const V&>(), keep_dims));
  return "softmax backward: y * (g - rowsum(g * y)), the row sum: " +
         reshard_plan_for<S, typename S::spec>::describe();
}
}  // namespace detail

template <int Dim = -1, traced_type X>
auto softmax(const X& x) {
  auto y = typeshard::softmax<Dim>(x.value());
  return detail::record(y, x,
                        [y](const auto& g) { return y * (g - detail::row_sum<Dim>(g * y)); },
                        &detail::describe_softmax<X, Dim>);
}
template <int Dim = -1, traced_type X>
auto log_softmax(const X& x) {
  auto y = typeshard::log_softmax<Dim>(x.value());
  return detail::record(
      y, x, [y](const auto& g) { return g - typeshard::exp(y) * detail::row_sum<Dim>(g); },
      &detail::describe_softmax<X, Dim>);
}

// ---- reshard and psum: the reverse reshard, the identity ---------------------------------

namespace detail {
template <class X, class Spec>
std::string describe_reshard() {
  using V = typename X::array_type;
  using Y = sharded_array<typename V::value_type, typename V::mesh_type, Spec,
                          typename V::extents_type>;
  return "reshard backward (the reverse reshard):\n" +
         delivery_description<X, cotangent_t<Y>>();
}
}  // namespace detail

template <spec_type Spec, traced_type X>
auto reshard(const X& x) {
  return detail::record(typeshard::reshard<Spec>(x.value()), x,
                        [](const auto& g) { return g; }, &detail::describe_reshard<X, Spec>);
}

template <axis_name... Axes, traced_type X>
  requires(sizeof...(Axes) >= 1)
auto psum(const X& x) {
  return detail::record(typeshard::psum<Axes...>(x.value()), x, [](const auto& g) { return g; },
                        &detail::describe_reshard<X, typename X::spec>);
}

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

template <std::size_t... Perm, traced_type X>
auto permute(const X& x) {
  return detail::record(typeshard::permute<Perm...>(x.value()), x,
                        [](const auto& g) {
                          return detail::inverse_permutation<Perm...>::apply(
                              g, std::make_index_sequence<sizeof...(Perm)>{});
                        },
                        &detail::describe_move);
}
// split_dim and merge_dims keep every device's block as it is (no copy): the backward reads
// the cotangent's blocks with the operand's extents.
template <std::size_t Dim, std::size_t Parts, traced_type X>
auto split_dim(const X& x) {
  using C = typename X::cotangent_type;
  return detail::record(typeshard::split_dim<Dim, Parts>(x.value()), x,
                        [e = x.extents()](const auto& g) { return detail::retype<C>(g, e); },
                        &detail::describe_move);
}
template <std::size_t Dim, traced_type X>
auto merge_dims(const X& x) {
  using C = typename X::cotangent_type;
  return detail::record(typeshard::merge_dims<Dim>(x.value()), x,
                        [e = x.extents()](const auto& g) { return detail::retype<C>(g, e); },
                        &detail::describe_move);
}

}  // namespace typeshard
