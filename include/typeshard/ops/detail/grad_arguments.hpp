// typeshard/ops/detail/grad_arguments.hpp: the arguments and results of a differentiated call
// (ops/grad.hpp): which arguments are traced, each gradient gathered from the tape, f's aux.
// Internal: do not rely on anything in detail/.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "../../array/sharded_array.hpp"
#include "../../core/config.hpp"
#include "../../core/errors.hpp"
#include "../../plan/grad_plan.hpp"
#include "../traced.hpp"
#include "grad_tape.hpp"

namespace typeshard::detail {

// The type of argument Argnum's gradient when the loss's traced type lists Contributions
// (ts::gradient_t).
template <class Param, class Contributions, std::size_t Argnum>
using gradient_type =
    contribution_t<Param, gradient_unreduced_t<typename Param::mesh_type, Argnum, Contributions>>;

enum class grad_mode { value_and_grad, grad, plans };

template <std::size_t... N>
constexpr bool distinct() {
  constexpr std::size_t n[] = {N..., 0};
  for (std::size_t i = 0; i < sizeof...(N); ++i)
    for (std::size_t j = i + 1; j < sizeof...(N); ++j)
      if (n[i] == n[j]) return false;
  return true;
}

template <std::size_t I, std::size_t... Argnums>
inline constexpr bool is_argnum = ((I == Argnums) || ...);

template <class T>
constexpr bool is_float_array() {
  if constexpr (sharded_array_like<T>)
    return std::is_floating_point_v<typename T::value_type> && T::unreduced_type::empty;
  else
    return false;
}

// One argument of the differentiated call: a leaf for an argnum, else the argument itself.
template <bool Plans, std::size_t I, std::size_t... Argnums, class Arg>
decltype(auto) wrap_argument(const Arg& arg, const std::shared_ptr<grad_tape>& tape) {
  if constexpr (is_argnum<I, Argnums...>)
    return traced<Arg, grad_contributions<>, static_cast<int>(I), Plans>(arg, tape, nullptr);
  else
    return (arg);
}

// The gradient of argument I: the sum of its contributions (each embedded in the gradient's
// type), zeros when nothing reached it.
template <std::size_t I, class List, class P, class... Cs>
gradient_type<P, List, I> gradient_of(const P& param, const grad_tape& tape,
                                      grad_contributions<Cs...>) {
  using G = gradient_type<P, List, I>;
  std::optional<G> out;
  [[maybe_unused]] auto add = [&](auto c) {  // unused when no contribution reaches leaf I
    using C = decltype(c);
    if constexpr (C::argnum == I) {
      using CA = contribution_t<P, typename C::unreduced_type>;
      if (const CA* part = tape.leaves[I].template find<CA>()) {
        G e = embed<G>(*part);
        if (out)
          out = add_same(*out, e);
        else
          out = std::move(e);
      }
    }
  };
  (add(Cs{}), ...);
  if (!out) return filled<G>(param.device_mesh(), param.extents(), 0);
  return *std::move(out);
}

// A differentiated function that returns nothing (found at run time on g++: see run below).
[[noreturn]] TYPESHARD_COLD inline void throw_loss_returns_nothing() {
  throw usage_error(
      "typeshard: ts::value_and_grad: the differentiated function returns nothing (void); "
      "fix: return the loss, reduced to rank 0 with ts::sum<> or ts::mean<>");
}

template <std::size_t... Argnums>
constexpr std::size_t max_argnum() {
  std::size_t m = 0;
  ((m = Argnums > m ? Argnums : m), ...);
  return m;
}

// The aux of f's (loss, aux), untouched; a traced aux as its value.
template <class A>
auto aux_value(const A& a) {
  if constexpr (traced_like<A>)
    return a.value();
  else
    return a;
}

}  // namespace typeshard::detail
