// typeshard/core/rules/elements.hpp: the messages of element types: a sharded array's (and a
// block's) elements are trivially copyable, since collectives, backends and MPI move them as
// bytes.
//
// Checked in: array/detail/buffer.hpp (every shard's storage).
// Compile-fail tests: tests/compile_fail/element_*.cpp. Table: docs/rules.md.
// Each message is a class template in ts::diagnostic whose fire() holds the static_assert;
// a check instantiates it through detail::require (core/detail/diagnose.hpp).
#pragma once

#include "../detail/diagnose.hpp"

namespace typeshard::diagnostic {

template <class Element>
struct element_not_trivially_copyable {
  static constexpr bool fire() {
    static_assert(detail::always_false<Element>,
                  "typeshard: sharded arrays hold trivially copyable element types "
                  "(arithmetic types, std::complex, plain structs); fix: store numbers, or "
                  "indices into a host-side table of the objects");
    return true;
  }
};

}  // namespace typeshard::diagnostic
