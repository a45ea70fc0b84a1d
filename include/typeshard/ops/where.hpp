// typeshard/ops/where.hpp: comparisons (a mask) and ts::where, on global arrays, on blocks
// inside ts::shard_map and on traced values (where's backward in ops/detail/traced_functions.hpp).
//
//   auto m = x > 0.0f;                  // or ts::greater(x, 0.0f): a mask, x's spec
//   auto k = ts::less(x, y);            // arrays, broadcast as + does (rule 5)
//   auto r = ts::where(m, x, 0.1f * x); // leaky relu: x where m, else 0.1 x
//   auto c = ts::sum(ts::equal(pred, labels));   // a count: masks sum like numbers
//
// A mask holds ones and zeros in the operands' common element type (JAX's are bool; here a
// mask multiplies, sums and reshards as the operands do, with no bool arrays to convert).
// ts::where(mask, a, b) reads any non-zero element of the mask as true; the three broadcast
// together as NumPy's (rule 5), a and b may be scalars, and the result has a's and b's common
// element type. No communication: each device computes its block, as for + and *.
// Comparisons are spelled as functions (less, less_equal, greater, greater_equal, equal,
// not_equal) and, for the orderings, as operators (< <= > >=); == and != are left to mean
// equality of values, as C++ readers expect. None is linear: an unreduced array does not
// compile (rule 3).
#pragma once

#include "../kernels/functors.hpp"
#include "detail/forward_value.hpp"
#include "elementwise.hpp"

namespace typeshard {

// A comparison's operands: two arrays or two blocks (a scalar beside either), or a value
// traced by ts::value_and_grad beside an array or another traced value (compared as its
// forward value: the mask is a plain array).
template <class A>
concept comparison_operand = global_operand<A> || block_like<A>;
template <class A, class B>
concept comparable = comparison_operand<A> && comparison_operand<B> &&
                     same_operand_kind<detail::value_t<A>, detail::value_t<B>>;

// less(a, b), less(a, s), less(s, a), and the others alike.
#define TYPESHARD_COMPARISON(name)                                                           \
  template <comparison_operand A, comparison_operand B>                                      \
    requires comparable<A, B>                                                                \
  [[nodiscard]] auto name(const A& a, const B& b) {                                          \
    return detail::zip_op<false>(detail::value_of(a), detail::value_of(b), fn::name, #name); \
  }                                                                                          \
  template <comparison_operand A>                                                            \
  [[nodiscard]] auto name(const A& a, detail::scalar_arg<A> s) {                             \
    return detail::map_nonlinear(detail::value_of(a), fn::with_scalar{fn::name, s});         \
  }                                                                                          \
  template <comparison_operand A>                                                            \
  [[nodiscard]] auto name(detail::scalar_arg<A> s, const A& a) {                             \
    using first = detail::scalar_first<fn::name##_t, detail::scalar_of<A>>;                  \
    return detail::map_nonlinear(detail::value_of(a), first{s});                             \
  }
TYPESHARD_COMPARISON(less)
TYPESHARD_COMPARISON(less_equal)
TYPESHARD_COMPARISON(greater)
TYPESHARD_COMPARISON(greater_equal)
TYPESHARD_COMPARISON(equal)
TYPESHARD_COMPARISON(not_equal)
#undef TYPESHARD_COMPARISON

// The orderings as operators: a < b, a < s, s < a (and <=, >, >=).
#define TYPESHARD_COMPARISON_OPERATOR(op, name)                                              \
  template <comparison_operand A, comparison_operand B>                                      \
    requires comparable<A, B>                                                                \
  [[nodiscard]] auto operator op(const A& a, const B& b) {                                   \
    return name(a, b);                                                                       \
  }                                                                                          \
  template <comparison_operand A>                                                            \
  [[nodiscard]] auto operator op(const A& a, detail::scalar_arg<A> s) {                      \
    return name(a, s);                                                                       \
  }                                                                                          \
  template <comparison_operand A>                                                            \
  [[nodiscard]] auto operator op(detail::scalar_arg<A> s, const A& a) {                      \
    return name(s, a);                                                                       \
  }
TYPESHARD_COMPARISON_OPERATOR(<, less)
TYPESHARD_COMPARISON_OPERATOR(<=, less_equal)
TYPESHARD_COMPARISON_OPERATOR(>, greater)
TYPESHARD_COMPARISON_OPERATOR(>=, greater_equal)
#undef TYPESHARD_COMPARISON_OPERATOR

// where(mask, a, b): a where the mask is non-zero, else b; mask, a and b broadcast together.
// Computed as select(mask, a) + reject(mask, b), each half -0 where the other holds the
// value, which + leaves exact (kernels/functors.hpp). A function object, as ts::transpose is
// (argument-dependent lookup never finds it: a program's own where(...) helper keeps being
// called); its form on traced values (ops/detail/traced_functions.hpp) is found through the
// traced_where hook.
struct where_t {
  template <elementwise_operand M, elementwise_operand A, elementwise_operand B>
    requires same_operand_kind<M, A> && same_operand_kind<A, B>
  [[nodiscard]] auto operator()(const M& mask, const A& a, const B& b) const {
    return detail::zip_op<true>(detail::zip_op<false>(mask, a, fn::select_t{}, "where"),
                                detail::zip_op<false>(mask, b, fn::reject_t{}, "where"),
                                fn::plus, "where");
  }
  template <elementwise_operand M, elementwise_operand A>
    requires same_operand_kind<M, A>
  [[nodiscard]] auto operator()(const M& mask, const A& a, detail::scalar_arg<A> b) const {
    return detail::zip_op<true>(detail::zip_op<false>(mask, a, fn::select_t{}, "where"),
                                detail::map_nonlinear(mask, fn::with_scalar{fn::reject_t{}, b}),
                                fn::plus, "where");
  }
  template <elementwise_operand M, elementwise_operand B>
    requires same_operand_kind<M, B>
  [[nodiscard]] auto operator()(const M& mask, detail::scalar_arg<B> a, const B& b) const {
    return detail::zip_op<true>(detail::map_nonlinear(mask, fn::with_scalar{fn::select_t{}, a}),
                                detail::zip_op<false>(mask, b, fn::reject_t{}, "where"),
                                fn::plus, "where");
  }
  template <class M, class A, class B>
    requires requires(const M& m, const A& a, const B& b) { traced_where(m, a, b); }
  [[nodiscard]] auto operator()(const M& mask, const A& a, const B& b) const {
    return traced_where(mask, a, b);
  }
};
inline constexpr where_t where{};

}  // namespace typeshard
