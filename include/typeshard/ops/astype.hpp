// typeshard/ops/astype.hpp: converting an array's (or a block's) element type.
//
//   ts::astype<float>(x)          // bfloat16 -> float: exact; float -> bfloat16: rounded to
//   ts::astype<ts::bfloat16>(y)   //   nearest even (JAX's x.astype(jnp.float32))
//   ts::astype<float>(b)          // a block inside shard_map
//
// Each element is static_cast to U on its own device: no communication, same spec, extents
// and varying axes. A conversion is linear (JAX's convert_element_type), so it is allowed on
// unreduced values and keeps their unreduced axes: each partial sum is converted (rounded to
// U, when U is narrower). astype<T> of an array of T returns it unchanged (a copy of the
// handle, no copy of the data).
#pragma once

#include <type_traits>

#include "../array/block.hpp"
#include "../array/block_elementwise.hpp"
#include "../array/sharded_array.hpp"
#include "../core/bfloat16.hpp"
#include "elementwise.hpp"

namespace typeshard {

namespace detail {
// static_cast<U>, one element (kernels/functors.hpp).
template <class U>
using convert_to = fn::convert_to<U>;
}  // namespace detail

// astype<U>(x): x with every element converted to U.
template <class U, sharded_array_like A>
[[nodiscard]] auto astype(const A& a) {
  using arr = std::remove_cvref_t<A>;
  if constexpr (std::is_same_v<typename arr::value_type, U>)
    return arr(a);
  else
    return detail::map_shards<U, typename arr::unreduced_type>(a, detail::convert_to<U>{});
}

// astype<U>(b): block b with every element converted to U (inside shard_map).
template <class U, block_like B>
[[nodiscard]] auto astype(const B& b) {
  return map(b, detail::convert_to<U>{});
}

}  // namespace typeshard
