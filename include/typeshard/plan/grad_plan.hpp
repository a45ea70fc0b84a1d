// typeshard/plan/grad_plan.hpp: the compile-time half of ts::value_and_grad (rule 9): the
// transposed einsum equations, the types of cotangents and of parameter gradients, and the
// plans the backward pass runs.
//
//   constexpr ts::einsum_subscripts dl = ts::einsum_lhs_transpose<"bd,dh->bh">;  // "bh,dh->bd"
//   using G = ts::gradient_array_t<W, ts::unreduced<"data">>;   // W's spec, unreduced<"data">
//   using plans = ts::einsum_grad_plans<"bd,dh->bh", X, W, CotH>;
//   plans::lhs_plan::describe();   // what d X = dH . W^T runs: e.g. "...; psum(out, over model)"
//
// Conventions (global view):
// - the cotangent of an intermediate value has that value's mesh, extents and spec, fully
//   reduced (an unreduced value's cotangent is replicated over its unreduced axes: the
//   derivative of a sum with respect to each partial sum is the same);
// - every backward rule is a typeshard op on global arrays, so its plan is chosen and checked
//   at compile time like a forward one: the transpose of an einsum is an einsum with the
//   transposed equation (d lhs = einsum<"out,rhs->lhs">(d out, rhs)), of a reshard the reverse
//   reshard, of an all-gather a slice, of a psum the identity;
// - a parameter's gradient is NOT reduced: each direct use contributes with the unreduced
//   axes its backward leaves (contracting a batch dimension sharded over "data" leaves
//   unreduced<"data">) minus the axes the parameter's own spec shards over (those are
//   reduce-scattered into the parameter's layout: FSDP). The gradient's type is the
//   parameter's mesh, extents and spec, unreduced over the union of its contributions' axes
//   (in mesh order); a contribution with fewer axes is embedded locally (kept on index 0 of
//   the missing axes, zero elsewhere), no communication. The caller reduces it in the type:
//   ts::reshard to the replicated spec is an all-reduce (DDP), to a sharded one a
//   reduce-scatter (ZeRO), and rule 3 keeps an unreduced gradient out of a non-linear update.
//
// The union needs every use of a parameter: each traced value's type carries the list of
// contributions made so far (grad_contributions), so the loss's type carries them all.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>

#include "../core/detail/axis_name.hpp"
#include "../core/detail/diagnose.hpp"
#include "../core/detail/unreduced_from.hpp"
#include "../core/mesh.hpp"
#include "../core/rules/rule9_gradients.hpp"
#include "../core/spec.hpp"
#include "../core/unreduced.hpp"
#include "detail/einsum_subscripts.hpp"
#include "einsum_plan.hpp"
#include "reshard_plan.hpp"

namespace typeshard {

// ---- contributions: (argnum, unreduced axes) pairs, a set carried in a traced value's type --

template <std::size_t Argnum, class Unreduced>
struct grad_contribution {
  static constexpr std::size_t argnum = Argnum;
  using unreduced_type = Unreduced;
};

template <class... C>
struct grad_contributions {
  static constexpr std::size_t size = sizeof...(C);
};

namespace detail {

// Whether U holds `name` (a loop over U::axes: unreduced<>::contains's empty fold leaves its
// parameter unused, which -Wextra reports where it is instantiated).
template <class U>
constexpr bool unreduced_has(axis_name name) {
  for (const axis_name& a : U::axes)
    if (a == name) return true;
  return false;
}

template <class List, class C>
struct contributions_insert;
template <class... Cs, class C>
struct contributions_insert<grad_contributions<Cs...>, C> {
  using type = std::conditional_t<(std::is_same_v<Cs, C> || ...), grad_contributions<Cs...>,
                                  grad_contributions<Cs..., C>>;
};

template <class A, class B>
struct contributions_union;
template <class A>
struct contributions_union<A, grad_contributions<>> {
  using type = A;
};
template <class A, class C, class... Cs>
struct contributions_union<A, grad_contributions<C, Cs...>> {
  using type = typename contributions_union<typename contributions_insert<A, C>::type,
                                            grad_contributions<Cs...>>::type;
};

// The union of several lists.
template <class... Lists>
struct contributions_merge {
  using type = grad_contributions<>;
};
template <class L, class... Ls>
struct contributions_merge<L, Ls...> {
  using type = typename contributions_union<L, typename contributions_merge<Ls...>::type>::type;
};

// The mesh axes (in mesh order) in which any contribution to Argnum is unreduced.
template <class Mesh, std::size_t Argnum, class List>
struct gradient_axes;
template <class Mesh, std::size_t Argnum, class... Cs>
struct gradient_axes<Mesh, Argnum, grad_contributions<Cs...>> {
  static constexpr dim_spec compute() {
    dim_spec n;
    for (const auto& a : Mesh::axes) {
      const bool used =
          ((Cs::argnum == Argnum && unreduced_has<typename Cs::unreduced_type>(a.name)) || ...);
      if (used) n.axes[n.count++] = a.name;
    }
    return n;
  }
  static constexpr dim_spec value = compute();
  using type = decltype(unreduced_from<value>(std::make_index_sequence<value.count>{}));
};

// U without the axes Spec shards over: what a parameter's contribution keeps unreduced.
template <class U, class Spec>
struct unreduced_outside_spec {
  static constexpr dim_spec compute() {
    dim_spec n;
    for (std::size_t i = 0; i < U::size; ++i)
      if (!Spec::uses(U::axes[i])) n.axes[n.count++] = U::axes[i];
    return n;
  }
  static constexpr dim_spec value = compute();
  using type = decltype(unreduced_from<value>(std::make_index_sequence<value.count>{}));
};

}  // namespace detail

// gradient_unreduced_t<Mesh, Argnum, Contributions>: the unreduced axes of argument Argnum's
// gradient, the union over its contributions, in mesh order.
template <class Mesh, std::size_t Argnum, class Contributions>
using gradient_unreduced_t = typename detail::gradient_axes<Mesh, Argnum, Contributions>::type;

// contribution_unreduced_t<Raw, ParamSpec>: what one use keeps unreduced of a backward
// result unreduced over Raw (the axes ParamSpec shards over are reduce-scattered).
template <class RawUnreduced, class ParamSpec>
using contribution_unreduced_t =
    typename detail::unreduced_outside_spec<RawUnreduced, ParamSpec>::type;

// ---- einsum transposes ---------------------------------------------------------------------

namespace detail {

// "<out>,<other>-><operand>": the equation of d operand = einsum(d out, other) (",i->i" for
// "i,i->": d out is rank 0).
template <einsum_subscripts S, bool Lhs>
constexpr einsum_subscripts transposed_subscripts() {
  constexpr einsum_equation eq = equation_of<S>;
  einsum_subscripts t;
  auto put = [&](char c) {
    if (t.length < max_einsum_subscripts_length) t.chars[t.length++] = c;
  };
  for (std::size_t i = 0; i < eq.out_rank; ++i) put(eq.out[i]);
  put(',');
  if constexpr (Lhs)
    for (std::size_t i = 0; i < eq.rhs_rank; ++i) put(eq.rhs[i]);
  else
    for (std::size_t i = 0; i < eq.lhs_rank; ++i) put(eq.lhs[i]);
  put('-');
  put('>');
  if constexpr (Lhs)
    for (std::size_t i = 0; i < eq.lhs_rank; ++i) put(eq.lhs[i]);
  else
    for (std::size_t i = 0; i < eq.rhs_rank; ++i) put(eq.rhs[i]);
  return t;
}

// The first letter of an operand in neither the other operand nor the output (its
// derivative would broadcast; rule 9), or 0.
template <einsum_subscripts S, bool Lhs>
constexpr char summed_letter() {
  constexpr einsum_equation eq = equation_of<S>;
  const auto& mine = Lhs ? eq.lhs : eq.rhs;
  const std::size_t n = Lhs ? eq.lhs_rank : eq.rhs_rank;
  for (std::size_t i = 0; i < n; ++i) {
    const char c = mine[i];
    const bool in_other = Lhs ? eq.rhs_dim(c) < eq.rhs_rank : eq.lhs_dim(c) < eq.lhs_rank;
    const bool in_out = einsum_equation::find(eq.out, eq.out_rank, c) < eq.out_rank;
    if (!in_other && !in_out) return c;
  }
  return 0;
}

}  // namespace detail

// einsum_lhs_transpose<"bd,dh->bh"> == "bh,dh->bd"; einsum_rhs_transpose<...> == "bh,bd->dh".
template <einsum_subscripts S>
inline constexpr einsum_subscripts einsum_lhs_transpose = detail::transposed_subscripts<S, true>();
template <einsum_subscripts S>
inline constexpr einsum_subscripts einsum_rhs_transpose = detail::transposed_subscripts<S, false>();

// einsum_differentiable<S, Lhs>: whether the operand's gradient can be taken (no letter
// summed in that operand only); einsum_check_differentiable fires rule 9 when not.
template <einsum_subscripts S, bool Lhs>
inline constexpr bool einsum_differentiable = detail::summed_letter<S, Lhs>() == 0;

namespace detail {
template <einsum_subscripts S, bool Lhs>
constexpr bool einsum_check_differentiable() {
  constexpr char c = summed_letter<S, Lhs>();
  if constexpr (c != 0)
    return require<false, diagnostic::grad_einsum_summed_letter<c>>::value && false;
  else
    return true;
}
}  // namespace detail

// einsum_grad_plans<S, A, B, CotOut>: the plans of the backward of einsum<S>(a, b) given
// the output's cotangent type CotOut: d lhs = einsum<lhs_subscripts>(d out, b) and
// d rhs = einsum<rhs_subscripts>(d out, a), each planned without an output spec (the result
// may be unreduced, e.g. over the axes of a contracted batch dimension; it is then resharded
// to the operand's spec, or kept unreduced for a parameter; an operand holding whole a batch
// letter the other shards gets its gradient sharded along that letter, which the reshard to
// its spec gathers). Inspect them like forward plans:
// lhs_plan::describe(), ts::communication_free<lhs_plan>.
template <einsum_subscripts S, class A, class B, class CotOut>
struct einsum_grad_plans {
  static constexpr einsum_subscripts lhs_subscripts = einsum_lhs_transpose<S>;
  static constexpr einsum_subscripts rhs_subscripts = einsum_rhs_transpose<S>;
  using lhs_plan = einsum_plan_for<lhs_subscripts, CotOut, B>;
  using rhs_plan = einsum_plan_for<rhs_subscripts, CotOut, A>;
};

// zero_update_plan<Mesh, ParamSpec, ShardSpec, Extents, GradUnreduced, GradSpec>: what one
// ZeRO-1 step (ts::zero_sgd_update, ts::zero_adam_update in ops/optim.hpp) runs on a
// parameter of spec ParamSpec whose gradient (spec GradSpec, ParamSpec as ts::grad gives
// it) is unreduced over GradUnreduced, its update sharded by ShardSpec. Every device, in
// one pass over its shard:
//   1. reduce_scatter: its shard of the gradient, reduced (the plan's psum_scatter; axes
//      the gradient is unreduced over that ShardSpec does not shard over are all-reduced);
//   2. slice: its shard of the parameter (no communication when ParamSpec replicates it
//      over ShardSpec's axes; read in place when the shard is contiguous in its block);
//   3. the update of that shard (and of Adam's moments, which live there), written over
//      the reduced gradient's buffer: no reduced-gradient array exists in the global view;
//   4. all_gather: the updated shards back to ParamSpec.
// Each part is a reshard plan, inspectable alone; describe() prints them in order.
template <class Mesh, spec_like ParamSpec, spec_like ShardSpec, class Extents,
          unreduced_like GradUnreduced, spec_like GradSpec = ParamSpec>
struct zero_update_plan {
  using reduce_scatter = reshard_plan<Mesh, GradSpec, ShardSpec, Extents, GradUnreduced>;
  using slice = reshard_plan<Mesh, ParamSpec, ShardSpec, Extents>;
  using all_gather = reshard_plan<Mesh, ShardSpec, ParamSpec, Extents>;
  // Checked in order, so that one mistake fires one diagnostic.
  static constexpr bool valid = [] {
    if constexpr (!reduce_scatter::valid)
      return false;
    else if constexpr (!slice::valid)
      return false;
    else
      return all_gather::valid;
  }();
  static std::string describe() {
    // Built with append: g++ 12 at -O3 warns falsely (-Warray-bounds) on `"..." + string`.
    std::string out = "ZeRO-1 update, fused per device:\n1. the gradient's shard, reduced: ";
    out.append(reduce_scatter::describe());
    out.append("\n2. the parameter's shard: ").append(slice::describe());
    out.append("\n3. the update on the shard, written over the reduced gradient's block "
               "(one pass; no global reduced-gradient array)");
    out.append("\n4. the parameter back: ").append(all_gather::describe());
    return out;
  }
};

}  // namespace typeshard
