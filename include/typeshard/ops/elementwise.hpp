// typeshard/ops/elementwise.hpp: elementwise operations, run per shard in parallel.
//
//   auto y = ts::sin(x);              // same spec as x, no communication
//   auto z = x + y;                   // both must have the same spec (rule 5)
//   auto w = ts::map(x, [](float v) { return v * v + 1; });
//
// Every device computes its own shard, replicas included, as JAX does. Rule 5: binary
// operands need equal specs (else a compile error that suggests ts::reshard) and the same
// device mesh (else a device_mesh_error naming both). Rule 3: on a value unreduced over
// some axis only linear operations compile (negation, scaling by a scalar, adding or
// subtracting a value unreduced over the same axes).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../detail/buffer.hpp"
#include "../core/detail/diagnose.hpp"
#include "../core/errors.hpp"
#include "../array/block.hpp"
#include "../array/sharded_array.hpp"
#include "../kernels/functors.hpp"
#include "../core/rules/rule3_unreduced.hpp"
#include "../core/rules/rule5_elementwise.hpp"

namespace typeshard {

namespace detail {

// Applies f to every element of every shard of `a` (on its device) and returns the
// resulting array, with result element type R and unreduced axes U.
template <class R, class U, class T, class M, class S, class E, class U0, class F>
auto map_shards(const sharded_array<T, M, S, E, U0>& a, F f) {
  std::vector<buffer<R>> out(M::size);
  for_each_position(a.device_mesh(), [&](std::size_t p) {
    const std::span<const T> in = a.local_data(p);
    buffer<R> b(in.size());
    R* o = b.data();
    for (std::size_t i = 0; i < in.size(); ++i) o[i] = f(in[i]);
    out[p] = std::move(b);
  });
  return sharded_array<R, M, typename sharded_array<T, M, S, E, U0>::spec, E, U>(
      adopt_shards, a.device_mesh(), a.extents(), std::move(out));
}

// The extents type of the result: a static extent from either side wins.
template <class E1, class E2>
struct merge_extents;
template <std::size_t... A, std::size_t... B>
struct merge_extents<extents<A...>, extents<B...>> {
  using type = extents<(A != dyn ? A : B)...>;
};

// The operands' specs are equal once padded to the rank (check_elementwise_operands), but
// may be spelled differently (spec<"x"> and spec<"x", none>), and their extents may differ in
// which dimensions are static: the result takes the padded spec and the merged extents.
template <class R, class U, class T1, class T2, class M, class S1, class S2, class E1, class E2,
          class U1, class U2, class F>
auto zip_shards(const sharded_array<T1, M, S1, E1, U1>& a, const sharded_array<T2, M, S2, E2, U2>& b,
                F f) {
  std::vector<buffer<R>> out(M::size);
  for_each_position(a.device_mesh(), [&](std::size_t p) {
    const std::span<const T1> x = a.local_data(p);
    const std::span<const T2> y = b.local_data(p);
    buffer<R> r(x.size());
    R* o = r.data();
    for (std::size_t i = 0; i < x.size(); ++i) o[i] = f(x[i], y[i]);
    out[p] = std::move(r);
  });
  return sharded_array<R, M, typename sharded_array<T1, M, S1, E1, U1>::spec,
                       typename merge_extents<E1, E2>::type, U>(adopt_shards, a.device_mesh(),
                                                                a.extents(), std::move(out));
}

template <class A, class B>
constexpr bool check_elementwise_operands() {
  using a = std::remove_cvref_t<A>;
  using b = std::remove_cvref_t<B>;
  if constexpr (!std::is_same_v<typename a::mesh_type, typename b::mesh_type>) {
    return require<false, diagnostic::elementwise_meshes_differ<typename a::mesh_type,
                                                                typename b::mesh_type>>::value &&
           false;
  } else if constexpr (a::rank != b::rank) {
    return require<false, diagnostic::elementwise_ranks_differ<a::rank, b::rank>>::value && false;
  } else if constexpr (!std::is_same_v<typename a::spec, typename b::spec>) {
    return require<false, diagnostic::elementwise_specs_differ<typename a::spec,
                                                               typename b::spec>>::value &&
           false;
  } else {
    return true;
  }
}

// The device meshes must be the same devices, in the same order (seed 002's "incompatible
// devices" error, at run time because device lists are run-time values).
template <class A, class B>
void check_same_devices(const A& a, const B& b, const char* op) {
  if (!(a.device_mesh() == b.device_mesh()))
    throw device_mesh_error(std::string("typeshard: ") + op +
                            ": the operands live on different devices: " +
                            a.device_mesh().to_string() + " and " + b.device_mesh().to_string() +
                            "; move one with ts::reshard or device_put it on the other's mesh");
}

template <class A, class B>
void check_same_extents(const A& a, const B& b, const char* op) {
  if (a.extents() != b.extents())
    throw shape_error(std::string("typeshard: ") + op + ": the operands have shapes " +
                      to_string(a.extents()) + " and " + to_string(b.extents()) +
                      "; elementwise operations need equal shapes");
}

}  // namespace detail

// map(x, f): f applied to every element; the result keeps x's spec. f must be a pure
// function of one element. Not allowed on unreduced values (f need not be linear).
template <sharded_array_type A, class F>
auto map(const A& a, F f) {
  using arr = std::remove_cvref_t<A>;
  using R = std::invoke_result_t<F&, const typename arr::value_type&>;
  if constexpr (!arr::unreduced_type::empty) {
    static_assert(detail::require<false, diagnostic::nonlinear_op_on_unreduced<
                                             typename arr::unreduced_type>>::value);
    return a;
  } else {
    return detail::map_shards<R, unreduced<>>(a, f);
  }
}

// zip(x, y, f): f applied to every pair of elements; x and y need the same spec (rule 5).
template <sharded_array_type A, sharded_array_type B, class F>
auto zip(const A& a, const B& b, F f) {
  using arr_a = std::remove_cvref_t<A>;
  using arr_b = std::remove_cvref_t<B>;
  if constexpr (!detail::check_elementwise_operands<A, B>()) {
    return a;  // the diagnostic above already fired; stop here so nothing cascades
  } else if constexpr (!arr_a::unreduced_type::empty || !arr_b::unreduced_type::empty) {
    static_assert(detail::require<false, diagnostic::nonlinear_op_on_unreduced<
                                             typename arr_a::unreduced_type>>::value);
    return a;
  } else {
    detail::check_same_devices(a, b, "zip");
    detail::check_same_extents(a, b, "zip");
    using R = std::invoke_result_t<F&, const typename arr_a::value_type&,
                                   const typename arr_b::value_type&>;
    return detail::zip_shards<R, unreduced<>>(a, b, f);
  }
}

namespace detail {

// A linear binary operation (+, -): allowed on unreduced values with equal unreduced axes.
template <class A, class B, class F>
auto linear_zip(const A& a, const B& b, F f, const char* op) {
  if constexpr (!check_elementwise_operands<A, B>()) {
    return a;
  } else if constexpr (!std::is_same_v<typename A::unreduced_type, typename B::unreduced_type>) {
    static_assert(require<false, diagnostic::unreduced_axes_differ<
                                     typename A::unreduced_type, typename B::unreduced_type>>::value);
    return a;
  } else {
    check_same_devices(a, b, op);
    check_same_extents(a, b, op);
    using R = std::common_type_t<typename A::value_type, typename B::value_type>;
    return zip_shards<R, typename A::unreduced_type>(a, b, f);
  }
}

template <class A>
using scalar_of = typename std::remove_cvref_t<A>::value_type;

}  // namespace detail

// ---- the operations, on global arrays and on blocks ---------------------------------------
// One definition each, for both kinds of operand (a sharded_array, or a block inside
// shard_map), with the functions of kernels/functors.hpp. Blocks have no unreduced axes;
// on arrays rule 3 allows only the linear operations on unreduced values.

template <class A>
concept elementwise_operand = sharded_array_type<A> || block_type<A>;

template <class A, class B>
concept same_operand_kind = (sharded_array_type<A> && sharded_array_type<B>) ||
                            (block_type<A> && block_type<B>);

namespace detail {

// f on every element, allowed on unreduced values (negation, scaling): an array keeps its
// element type and unreduced axes; a block takes f's result type.
template <class A, class F>
auto map_linear(const A& a, F f) {
  if constexpr (block_type<A>) {
    return map_block(a, f);
  } else {
    using arr = std::remove_cvref_t<A>;
    return map_shards<typename arr::value_type, typename arr::unreduced_type>(a, f);
  }
}

// f on every pair of elements: linear (+, -: equal unreduced axes allowed) or not.
template <bool Linear, class A, class B, class F>
auto zip_op(const A& a, const B& b, F f, const char* op) {
  if constexpr (block_type<A>)
    return zip_blocks(a, b, f, op);
  else if constexpr (Linear)
    return linear_zip(a, b, f, op);
  else
    return zip(a, b, f);
}

}  // namespace detail

// ---- linear operations: defined on unreduced values too ----------------------------------

template <elementwise_operand A, elementwise_operand B>
  requires same_operand_kind<A, B>
auto operator+(const A& a, const B& b) {
  return detail::zip_op<true>(a, b, fn::plus, "operator+");
}
template <elementwise_operand A, elementwise_operand B>
  requires same_operand_kind<A, B>
auto operator-(const A& a, const B& b) {
  return detail::zip_op<true>(a, b, fn::minus, "operator-");
}
template <elementwise_operand A>
auto operator-(const A& a) {
  return detail::map_linear(a, fn::negate);
}
// Scaling by a scalar: x * s, s * x, x / s.
template <elementwise_operand A>
auto operator*(const A& a, detail::scalar_of<A> s) {
  return detail::map_linear(a, fn::with_scalar{fn::multiplies, s});
}
template <elementwise_operand A>
auto operator*(detail::scalar_of<A> s, const A& a) {
  return a * s;
}
template <elementwise_operand A>
auto operator/(const A& a, detail::scalar_of<A> s) {
  return detail::map_linear(a, fn::with_scalar{fn::divides, s});
}
// A block plus or minus a scalar (not linear in partial sums: blocks only).
template <block_type A>
auto operator+(const A& a, detail::scalar_of<A> s) {
  return detail::map_block(a, fn::with_scalar{fn::plus, s});
}
template <block_type A>
auto operator-(const A& a, detail::scalar_of<A> s) {
  return detail::map_block(a, fn::with_scalar{fn::minus, s});
}

// ---- non-linear operations: need fully reduced values ------------------------------------

template <elementwise_operand A, elementwise_operand B>
  requires same_operand_kind<A, B>
auto operator*(const A& a, const B& b) {
  return detail::zip_op<false>(a, b, fn::multiplies, "operator*");
}
template <elementwise_operand A, elementwise_operand B>
  requires same_operand_kind<A, B>
auto operator/(const A& a, const B& b) {
  return detail::zip_op<false>(a, b, fn::divides, "operator/");
}
template <elementwise_operand A, elementwise_operand B>
  requires same_operand_kind<A, B>
auto maximum(const A& a, const B& b) {
  return detail::zip_op<false>(a, b, fn::maximum, "maximum");
}
template <elementwise_operand A, elementwise_operand B>
  requires same_operand_kind<A, B>
auto minimum(const A& a, const B& b) {
  return detail::zip_op<false>(a, b, fn::minimum, "minimum");
}

// sin cos exp log tanh sqrt abs relu: ts::map with the function of the same name.
#define TYPESHARD_UNARY_OPERATION(name)   \
  template <elementwise_operand A>        \
  auto name(const A& a) {                 \
    return map(a, fn::name);              \
  }
TYPESHARD_UNARY_OPERATION(sin)
TYPESHARD_UNARY_OPERATION(cos)
TYPESHARD_UNARY_OPERATION(exp)
TYPESHARD_UNARY_OPERATION(log)
TYPESHARD_UNARY_OPERATION(tanh)
TYPESHARD_UNARY_OPERATION(sqrt)
TYPESHARD_UNARY_OPERATION(abs)
TYPESHARD_UNARY_OPERATION(relu)
#undef TYPESHARD_UNARY_OPERATION

}  // namespace typeshard
