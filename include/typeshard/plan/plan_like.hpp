// typeshard/plan/plan_like.hpp: ts::plan_like, what every plan type is: its steps as values
// (plan/step.hpp, what the one executor runs), whether it communicates, the data it moves and
// a readable account.
//
//   static_assert(ts::plan_like<ts::reshard_plan_for<decltype(A), ts::spec<ts::none, "x">>>);
//   for (const ts::step<2>& s : plan::steps_for({7, 8})) ...   // the steps for these extents
//   template <ts::plan_like P> void report() { std::puts(P::describe().c_str()); }
//   ts::bytes_per_device_of<plan>(sizeof(float));   // bytes one device receives
//
// A plan_like P has: P::rank; P::valid (false: its diagnostic fired); P::steps_for(extents),
// the steps for given extents of its operand (a contraction: P::steps_for(lhs, rhs), padded
// to P::rank), a range of ts::step, what the operation runs on them; P::steps, a std::array
// of ts::step (the steps for its static extents; with dynamic extents the ones the usual,
// evenly divided, extents give); P::collectives and
// P::communicates; P::describe(); and the data one device receives by its collectives with
// static extents: P::bytes_per_device, or, for a plan that knows no element type (a reshard
// plan), P::elements_per_device. Modelled by reshard_plan, einsum_plan, matmul_plan,
// reduce_plan, softmax_plan, layer_norm_plan, the dims plans and slice_in_dim_plan
// (tests/static/plan_like.cpp).
//
// Compile-time vocabulary only: no runtime header is included.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "../core/layout.hpp"
#include "step.hpp"

namespace typeshard {

namespace detail {
template <class S>
inline constexpr bool is_step_array_v = false;
template <std::size_t Rank, std::size_t N>
inline constexpr bool is_step_array_v<std::array<step<Rank>, N>> = true;

template <class R>
constexpr bool is_step_range() {
  if constexpr (requires(const R& r) { r.begin(); r.end(); }) {
    using E = std::remove_cvref_t<decltype(*std::declval<const R&>().begin())>;
    return requires(const E& e) { e.kind; e.spec_after; e.op; };
  } else {
    return false;
  }
}

// Whether P::steps_for takes the extents of P's one operand (or, for a contraction, of its
// two) and gives a range of steps.
template <class P>
constexpr bool has_steps_for() {
  if constexpr (requires { P::rank; }) {
    using S = shape<P::rank>;
    if constexpr (requires(const S& s) { P::steps_for(s); }) {
      return is_step_range<decltype(P::steps_for(std::declval<const S&>()))>();
    } else if constexpr (requires(const S& s) { P::steps_for(s, s); }) {
      return is_step_range<decltype(P::steps_for(std::declval<const S&>(),
                                                 std::declval<const S&>()))>();
    } else {
      return false;
    }
  } else {
    return false;
  }
}
}  // namespace detail

template <class P>
concept plan_like = requires {
  { P::rank } -> std::convertible_to<std::size_t>;
  { P::valid } -> std::convertible_to<bool>;
  { P::collectives } -> std::convertible_to<std::size_t>;
  { P::communicates } -> std::convertible_to<bool>;
  { P::describe() } -> std::convertible_to<std::string>;
  requires detail::is_step_array_v<std::remove_cvref_t<decltype(P::steps)>>;
  requires detail::has_steps_for<P>();
  requires(requires { { P::bytes_per_device } -> std::convertible_to<std::size_t>; } ||
           requires { { P::elements_per_device } -> std::convertible_to<std::size_t>; });
};

// bytes_per_device_of<P>(element_size): the bytes one device receives by P's collectives with
// static extents (0 when an extent is dynamic), of elements of element_size bytes where P
// knows no element type.
template <plan_like P>
constexpr std::size_t bytes_per_device_of(std::size_t element_size) {
  if constexpr (requires { P::bytes_per_device; }) {
    (void)element_size;
    return P::bytes_per_device;
  } else {
    return P::elements_per_device * element_size;
  }
}

}  // namespace typeshard
