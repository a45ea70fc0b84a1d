// typeshard/core/detail/unreduced_from.hpp: the unreduced<...> type over a list of axes that
// constexpr code computed (a dim_spec: its axes and count). The planners and the gradient
// rules each compute such a list; this is the one way they turn it into a type:
//
//   static constexpr dim_spec kept = ...;
//   using type = decltype(detail::unreduced_from<kept>(std::make_index_sequence<kept.count>{}));
//
// A function, declared only, for decltype, rather than a class template with a defaulted
// index_sequence argument: clang 14 crashes on `List.count` in a default template argument.
#pragma once

#include <cstddef>
#include <utility>

#include "../spec.hpp"
#include "../unreduced.hpp"

namespace typeshard::detail {

template <dim_spec List, std::size_t... I>
unreduced<List.axes[I]...> unreduced_from(std::index_sequence<I...>);

}  // namespace typeshard::detail
