// typeshard/core/detail/diagnose.hpp: the machinery behind typeshard's compile-time messages.
// Internal: do not rely on anything in detail/.
//
// Every rule violation is reported by calling fire() of one class template from
// <typeshard/core/diagnostics.hpp> (or a concept's own header). Its static_assert carries the
// rule and the fix; its template arguments carry the offending axis name as characters,
// which both g++ and clang++ print readably in the "in instantiation of" line next to the
// error. The static_assert sits in a member function, not the class body, because clang
// marks a class whose body fails a static_assert invalid and then reports every use of
// it again: a cascade of follow-on errors.
#pragma once

#include <cstddef>

#include "axis_name.hpp"

namespace typeshard::detail {

// Dependent false, so a diagnostic's static_assert fires only when it is instantiated.
template <class... T>
inline constexpr bool always_false = false;
template <char... C>
inline constexpr bool always_false_chars = false;
template <std::size_t... N>
inline constexpr bool always_false_values = false;

// require<Ok, Diagnostic>: instantiates Diagnostic (and so fires its static_assert) when
// Ok is false; value is true either way, so the caller's own static_assert never adds a
// second error.
template <bool Ok, class Diagnostic>
struct require {
  static constexpr bool value = true;
};
template <class Diagnostic>
struct require<false, Diagnostic> {
  static constexpr bool value = Diagnostic::fire();
};

// require_named<Ok, Name, Diagnostic>: the same, for diagnostics that name an axis.
template <bool Ok, axis_name Name, template <char...> class Diagnostic>
struct require_named {
  static constexpr bool value = true;
};
template <axis_name Name, template <char...> class Diagnostic>
struct require_named<false, Name, Diagnostic> {
  static constexpr bool value = axis_name_chars<Name>::template apply<Diagnostic>::fire();
};

}  // namespace typeshard::detail
