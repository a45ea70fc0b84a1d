// typeshard/backend/detail/function_ref.hpp: a non-owning reference to a callable.
// Internal: do not rely on anything in detail/.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace typeshard::detail {

template <class Signature>
class function_ref;

// function_ref<R(A...)>: calls a callable that outlives it, without allocating (unlike
// std::function), so a multi-device operation costs no heap traffic to dispatch.
template <class R, class... A>
class function_ref<R(A...)> {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, function_ref> &&
             std::is_invocable_r_v<R, F&, A...>)
  function_ref(F&& f) noexcept  // NOLINT: implicit, like a reference
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, A... a) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<A>(a)...);
        }) {}

  R operator()(A... a) const { return call_(object_, std::forward<A>(a)...); }

 private:
  void* object_;
  R (*call_)(void*, A...);
};

}  // namespace typeshard::detail
