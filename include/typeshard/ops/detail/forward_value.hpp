// typeshard/ops/detail/forward_value.hpp: value_of(x), an operand's value: a traced x's forward
// value (ops/traced.hpp), or x itself. Internal: do not rely on anything in detail/.
#pragma once

#include <type_traits>
#include <utility>

#include "../../core/rules/rule9_gradients.hpp"

namespace typeshard::detail {

template <class X>
const auto& value_of(const X& x) {
  if constexpr (is_traced_v<X>)
    return x.value();
  else
    return x;
}

template <class X>
using value_t = std::remove_cvref_t<decltype(value_of(std::declval<const X&>()))>;

}  // namespace typeshard::detail
