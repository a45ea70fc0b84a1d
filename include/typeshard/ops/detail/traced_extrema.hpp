// typeshard/ops/detail/traced_extrema.hpp: the elementwise ts::maximum and ts::minimum on
// traced values (see ops/traced.hpp; ts::max and ts::min are reductions:
// ops/detail/traced_reduce.hpp).
//
// maximum(a, b) gives the cotangent to the larger operand, half to each where they are equal
// (lax.max's balanced rule), as JAX's rules do.
#pragma once

#include <string>
#include <utility>

#include "../elementwise.hpp"
#include "../where.hpp"
#include "traced_value.hpp"

namespace typeshard {

namespace detail {

inline std::string describe_maximum() {
  return "maximum/minimum backward: the cotangent to the chosen operand, half to each on a tie "
         "(local), summed over broadcast dimensions";
}

// maximum (Max) or minimum of a and b, one of them traced: the backward rule (declared in
// ops/elementwise.hpp, whose ts::maximum and ts::minimum call it).
template <bool Max, class A, class B>
auto traced_maximum(const A& a, const B& b) {
  using AV = value_t<A>;
  using BV = value_t<B>;
  const AV& av = value_of(a);
  const BV& bv = value_of(b);
  using T = typename AV::value_type;
  // a's share: 1 where a wins, 1/2 on a tie, 0 where b wins; b's: the rest
  auto wa = [&] {
    if constexpr (Max)
      return typeshard::greater(av, bv) + typeshard::equal(av, bv) * T(0.5);
    else
      return typeshard::less(av, bv) + typeshard::equal(av, bv) * T(0.5);
  }();
  auto y = [&] {
    if constexpr (Max)
      return typeshard::maximum(av, bv);
    else
      return typeshard::minimum(av, bv);
  }();
  return record(
      std::move(y), a, b,
      [wa, e = av.extents()](const auto& g) { return reduce_to<AV>(g * wa, e); },
      [wa, e = bv.extents()](const auto& g) { return reduce_to<BV>(g - g * wa, e); },
      &describe_maximum);
}

}  // namespace detail

}  // namespace typeshard
