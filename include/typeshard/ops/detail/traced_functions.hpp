// typeshard/ops/detail/traced_functions.hpp: sigmoid, softplus, gelu, rsqrt, pow, clip, argmax,
// argmin, ts::take and ts::where on traced values (see ops/traced.hpp), each with its gradient;
// argmax / argmin give a plain index (no gradient flows through them; nor through a
// comparison, ops/where.hpp, which reads a traced value's forward value).
#pragma once

#include <cmath>
#include <string>
#include <type_traits>

#include "../../kernels/functors.hpp"
#include "../elementwise.hpp"
#include "../functions.hpp"
#include "../indices.hpp"
#include "../take.hpp"
#include "../where.hpp"
#include "traced_value.hpp"

namespace typeshard {

namespace detail {

inline std::string describe_function() {
  return "elementwise function backward: the cotangent times the derivative at the operand "
         "(local, no communication)";
}
inline std::string describe_where() {
  return "where backward: the cotangent where the mask holds to a, elsewhere to b; each summed "
         "over the dimensions it stretches, then resharded to its spec";
}

// g * DF(x) (fn::chain_t), on bfloat16 computed in float and rounded once (where DF takes a
// float: clip's derivative, 0 or 1 at the bfloat16 bounds, is exact in bfloat16).
template <class DF>
struct chain_in_float {
  DF df{};
  template <class G, class X>
  G operator()(G g, X x) const {
    if constexpr (std::is_same_v<G, bfloat16> && std::is_same_v<X, bfloat16> &&
                  std::is_invocable_v<const DF&, float>)
      return G(float(g) * df(float(x)));
    else
      return fn::chain_t<DF>{df}(g, x);
  }
  // What it is on float elements (kernels::zip_elements picks its vector loop by it).
  fn::chain_t<DF> float_form() const { return {df}; }
};

// y = f(x) of a traced x, f' given as the functor df: d x = g f'(x), one pass.
template <class X, class Y, class DF>
auto traced_unary(const X& x, Y y, DF df) {
  return record(std::move(y), x,
                [xv = x.value(), df](const auto& g) {
                  return typeshard::zip(g, xv, chain_in_float<DF>{df});
                },
                &describe_function);
}

// pow(a, b)'s derivative in b at y = a^b: y log(a), 0 where a is 0 (as JAX's).
struct pow_exponent_grad_t {
  template <class Y, class X>
  Y operator()(Y y, X a) const {
    return a == X{} ? Y{} : static_cast<Y>(y * std::log(a));
  }
};

}  // namespace detail

// The hooks ts::sigmoid, ts::softplus, ts::rsqrt, ts::gelu and ts::clip (function objects,
// ops/functions.hpp) call on a traced value, found by argument-dependent lookup.
// sigmoid: d x = g s (1 - s); softplus: d x = g sigmoid(x); rsqrt: d x = -g x^(-3/2) / 2.
template <traced_like X>
[[nodiscard]] auto traced_sigmoid(const X& x) {
  return detail::traced_unary(x, typeshard::sigmoid(x.value()), fn::sigmoid_grad_t{});
}
template <traced_like X>
[[nodiscard]] auto traced_softplus(const X& x) {
  return detail::traced_unary(x, typeshard::softplus(x.value()), fn::sigmoid_t{});
}
template <traced_like X>
[[nodiscard]] auto traced_rsqrt(const X& x) {
  using T = detail::scalar_t<X>;
  return detail::traced_unary(x, typeshard::rsqrt(x.value()),
                              fn::with_scalar<fn::pow_grad_t, T>{fn::pow_grad_t{}, T(-0.5)});
}
// gelu: the derivative of the form chosen (tanh approximation or exact).
template <traced_like X>
[[nodiscard]] auto traced_gelu(const X& x, bool approximate = true) {
  if (approximate)
    return detail::traced_unary(x, typeshard::gelu(x.value(), true), fn::gelu_tanh_grad_t{});
  return detail::traced_unary(x, typeshard::gelu(x.value(), false), fn::gelu_erf_grad_t{});
}
// pow(x, p): d x = g p x^(p - 1).
template <traced_like X>
[[nodiscard]] auto pow(const X& x, detail::scalar_arg_t<X> p) {
  using T = detail::scalar_t<X>;
  return detail::traced_unary(x, typeshard::pow(x.value(), p),
                              fn::with_scalar<fn::pow_grad_t, T>{fn::pow_grad_t{}, p});
}
// pow(a, b), broadcast: d a = g b a^(b - 1), d b = g y log(a) (0 where a is 0); each summed
// back to its operand's shape.
template <class A, class B>
  requires traced_operands<A, B>
[[nodiscard]] auto pow(const A& a, const B& b) {
  using AV = detail::value_t<A>;
  using BV = detail::value_t<B>;
  const AV& av = detail::value_of(a);
  const BV& bv = detail::value_of(b);
  auto y = typeshard::pow(av, bv);
  return detail::record(
      y, a, b,
      [av, bv](const auto& g) {
        return detail::reduce_to<AV>(g * typeshard::zip(av, bv, fn::pow_grad_t{}), av.extents());
      },
      [av, y, e = bv.extents()](const auto& g) {
        return detail::reduce_to<BV>(g * typeshard::zip(y, av, detail::pow_exponent_grad_t{}),
                                     e);
      },
      &detail::describe_elementwise);
}
// clip(x, lo, hi): d x = g inside [lo, hi] (bounds included), else 0.
template <traced_like X>
[[nodiscard]] auto traced_clip(const X& x, detail::scalar_arg_t<X> lo, detail::scalar_arg_t<X> hi) {
  using T = detail::scalar_t<X>;
  return detail::traced_unary(x, typeshard::clip(x.value(), lo, hi), fn::clip_grad_t<T>{lo, hi});
}

// ---- argmax, argmin: the index of the forward value (no gradient) --------------------------

#define TYPESHARD_TRACED_ARG_EXTREMUM(name)                                  \
  template <int Dim, traced_like X>                                          \
  [[nodiscard]] auto name(const X& x) {                                      \
    return typeshard::name<Dim>(x.value());                                  \
  }                                                                          \
  template <int Dim, traced_like X>                                          \
  [[nodiscard]] auto name(const X& x, keep_dims_t) {                         \
    return typeshard::name<Dim>(x.value(), keep_dims);                       \
  }
TYPESHARD_TRACED_ARG_EXTREMUM(argmax)
TYPESHARD_TRACED_ARG_EXTREMUM(argmin)
#undef TYPESHARD_TRACED_ARG_EXTREMUM

// ---- take: the cotangent's rows added into the table's rows of the ids -------------------

namespace detail {
inline std::string describe_take() {
  return "take backward: the cotangent's rows added into the rows of the ids (scatter-add), "
         "each device into its block of the table, unreduced over the ids' axes; then "
         "resharded to the table's spec (local, no communication before that reshard)";
}
}  // namespace detail

template <traced_like Table, sharded_array_like Ids>
  requires std::is_integral_v<typename Ids::value_type>
[[nodiscard]] auto traced_take(const Table& table, const Ids& ids) {
  using TV = typename Table::array_type;
  return detail::record(
      typeshard::take(table.value(), ids), table,
      [ids, e = table.extents()](const auto& g) { return detail::take_scatter<TV>(g, ids, e); },
      &detail::describe_take);
}

// ---- where: the cotangent routed to a where the mask holds, to b elsewhere -----------------
// The mask: a plain array (or a traced value, read as its forward value; no gradient).

template <grad_operand M, class A, class B>
  requires traced_operands<A, B>
[[nodiscard]] auto traced_where(const M& mask, const A& a, const B& b) {
  using AV = detail::value_t<A>;
  using BV = detail::value_t<B>;
  const auto& mv = detail::value_of(mask);
  const AV& av = detail::value_of(a);
  const BV& bv = detail::value_of(b);
  return detail::record(
      typeshard::where(mv, av, bv), a, b,
      [mv, e = av.extents()](const auto& g) {
        return detail::reduce_to<AV>(typeshard::zip(mv, g, fn::select_t{}), e);
      },
      [mv, e = bv.extents()](const auto& g) {
        return detail::reduce_to<BV>(typeshard::zip(mv, g, fn::reject_t{}), e);
      },
      &detail::describe_where);
}
template <grad_operand M, traced_like A>
[[nodiscard]] auto traced_where(const M& mask, const A& a, detail::scalar_arg_t<A> b) {
  using AV = typename A::array_type;
  const auto& mv = detail::value_of(mask);
  return detail::record(
      typeshard::where(mv, a.value(), b), a,
      [mv, e = a.extents()](const auto& g) {
        return detail::reduce_to<AV>(typeshard::zip(mv, g, fn::select_t{}), e);
      },
      &detail::describe_where);
}
template <grad_operand M, traced_like B>
[[nodiscard]] auto traced_where(const M& mask, detail::scalar_arg_t<B> a, const B& b) {
  using BV = typename B::array_type;
  const auto& mv = detail::value_of(mask);
  return detail::record(
      typeshard::where(mv, a, b.value()), b,
      [mv, e = b.extents()](const auto& g) {
        return detail::reduce_to<BV>(typeshard::zip(mv, g, fn::reject_t{}), e);
      },
      &detail::describe_where);
}

}  // namespace typeshard
