// typeshard/ops/dropout.hpp: inverted dropout of a sharded array or a traced value, its mask
// drawn with ts::random::bernoulli on the array's own mesh and spec (each device draws only
// its own shard of the mask).
//
//   auto h = ts::random::dropout(k, 0.1, x);   // x * mask / 0.9, mask ~ bernoulli(0.9)
//
// Inside ts::value_and_grad, x traced: the mask is a plain array (no gradient), so the
// backward multiplies the cotangent by the same mask / (1 - rate) that the forward used.
// The same key gives the same mask whatever the mesh and spec; use a new key each step
// (ts::random::fold_in(k, step)).
#pragma once

#include <type_traits>

#include "../core/errors.hpp"
#include "elementwise.hpp"
#include "random.hpp"
#include "traced.hpp"

namespace typeshard::random {

namespace detail {

template <class X>
const auto& array_of(const X& x) {
  if constexpr (traced_like<X>) return x.value();
  else return x;
}

}  // namespace detail

// dropout(key, rate, x): x with each element zeroed with probability `rate` and the others
// scaled by 1 / (1 - rate) (flax.linen.Dropout). rate == 0 returns x * 1; rate == 1 gives
// zeros. Throws usage_error unless 0 <= rate <= 1.
template <class X>
  requires(sharded_array_like<X> || traced_like<X>)
[[nodiscard]] auto dropout(prng_key k, double rate, const X& x) {
  if (!(rate >= 0.0 && rate <= 1.0))
    throw usage_error("typeshard: random::dropout needs a rate in [0, 1]");
  const auto& a = detail::array_of(x);
  using A = std::remove_cvref_t<decltype(a)>;
  using T = typename A::value_type;
  const auto mask = bernoulli<typename A::spec, T, typename A::extents_type>(
      k, 1.0 - rate, a.device_mesh(), a.extents());
  const T scale = rate < 1.0 ? static_cast<T>(1.0 / (1.0 - rate)) : T(0);
  return x * (mask * scale);
}

}  // namespace typeshard::random
