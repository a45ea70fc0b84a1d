// typeshard/ops/detail/forward_value.hpp: global_operand, what an op with one entry point for
// arrays and traced values takes, and value_of(x), an operand's value: a traced x's forward
// value (ops/traced.hpp), or x itself.
#pragma once

#include <type_traits>
#include <utility>

#include "../../array/sharded_array.hpp"
#include "../../core/rules/rule9_gradients.hpp"

namespace typeshard {

// A global array, or a value traced by ts::value_and_grad (whose forward value is one): the
// operand of an op that dispatches on its kind and records a traced value's backward rule.
template <class X>
concept global_operand = sharded_array_like<X> || detail::is_traced_v<std::remove_cvref_t<X>>;

namespace detail {

template <class X>
const auto& value_of(const X& x) {
  if constexpr (is_traced_v<X>)
    return x.value();
  else
    return x;
}

template <class X>
using value_t = std::remove_cvref_t<decltype(value_of(std::declval<const X&>()))>;

}  // namespace detail

}  // namespace typeshard
