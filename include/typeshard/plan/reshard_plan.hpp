// typeshard/plan/reshard_plan.hpp: the compile-time plan of a reshard, a type you can inspect.
//
//   using plan = ts::reshard_plan<mesh_2x2, ts::spec<"x", ts::none>, ts::spec<ts::none, "x">,
//                                 ts::extents<8, 8>>;
//   static_assert(plan::steps.size() == 1);
//   static_assert(plan::steps[0].kind == ts::step_kind::all_to_all);
//   static_assert(!ts::communication_free<plan>);
//   std::cout << plan::describe();
//
// A plan moves an array from one sharding (plus the mesh axes it is unreduced over) to
// another on the same mesh, in steps, each a collective over some mesh axes or a local
// slice:
//   1. reduce: every unreduced axis the target shards a dimension over, in the next
//      place of that dimension's axes, is reduced by psum_scatter (reduce-scatter) along
//      it; the other unreduced axes by one psum (all-reduce) over all of them.
//   2. move: while some dimension's axes are not a prefix of the target's, the
//      minor-most extra axis leaves it: by all_to_all when it is the next axis the target
//      wants on another dimension (both dimensions change in one exchange), else by
//      all_gather (one multi-axis all_gather when several axes leave one dimension).
//   3. slice: the axes the target adds to each dimension are taken locally, one copy, no
//      communication (replicated -> sharded is free).
// Communication is only what the target needs: every all_gather removes an axis the
// target does not want there, every all_to_all puts one where it wants it.
//
// Uneven shards (an extent not divisible by its dimension's shards) do not nest: the
// blocks of P(('x', 'y')) are not sub-blocks of P('x')'s. For them the plan is simpler
// (uneven_steps): reduce (psum_scatter only onto a dimension not yet sharded), gather
// every dimension whose axes change completely, then slice. When every extent is static
// the plan knows which applies (`evenness`); with dynamic extents the executor checks the
// shapes at run time and runs `steps` when both shardings are even, `uneven_steps`
// otherwise.
//
// Compile-time vocabulary only: no runtime header is included.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>

#include "../core/config.hpp"
#include "../core/detail/diagnose.hpp"
#include "../core/detail/mesh_group.hpp"
#include "../core/detail/spec_layout.hpp"
#include "../core/extents.hpp"
#include "../core/mesh.hpp"
#include "../core/spec.hpp"
#include "../core/unreduced.hpp"
#include "step.hpp"
#include "../core/rules/rule3_unreduced.hpp"

namespace typeshard {

// shard_evenness: whether a plan's shards are known to divide evenly.
enum class shard_evenness { even, uneven, decided_at_run_time };

namespace detail {

inline constexpr std::size_t max_reshard_steps = 24;

template <std::size_t Rank>
using step_list = step_array<Rank, max_reshard_steps>;

constexpr bool contains(const dim_spec& list, axis_name a) { return list.uses(a); }

constexpr void append(dim_spec& list, axis_name a) { list.axes[list.count++] = a; }

// Keeps the first n axes (clearing the rest, so that equal lists compare equal).
constexpr void truncate(dim_spec& list, std::size_t n) {
  for (std::size_t i = n; i < list.count; ++i) list.axes[i] = axis_name{};
  list.count = n;
}

constexpr dim_spec without(const dim_spec& list, const dim_spec& remove) {
  dim_spec out;
  for (std::size_t i = 0; i < list.count; ++i)
    if (!remove.uses(list.axes[i])) append(out, list.axes[i]);
  return out;
}

constexpr std::size_t common_prefix(const dim_spec& a, const dim_spec& b) {
  std::size_t k = 0;
  while (k < a.count && k < b.count && a.axes[k] == b.axes[k]) ++k;
  return k;
}

constexpr dim_spec suffix(const dim_spec& list, std::size_t from) {
  dim_spec out;
  for (std::size_t i = from; i < list.count; ++i) append(out, list.axes[i]);
  return out;
}

// The dimension of `to` that `a` shards, or Rank.
template <std::size_t Rank>
constexpr std::size_t dimension_using(const spec_array<Rank>& to, axis_name a) {
  for (std::size_t d = 0; d < Rank; ++d)
    if (to[d].uses(a)) return d;
  return Rank;
}

// Whether axis `a` can join dimension j now: j holds a prefix of its target and `a` is
// the next axis the target wants there.
template <std::size_t Rank>
constexpr bool can_join(const spec_array<Rank>& cur, const spec_array<Rank>& to, std::size_t j,
                        axis_name a) {
  return j < Rank && is_prefix(cur[j], to[j]) && cur[j].count < to[j].count &&
         to[j].axes[cur[j].count] == a;
}

// The plan from (from, unreduced) to (to, keep): see the header comment for the rules.
// Callers use plan_reshard (below), which runs this at compile time.
template <std::size_t Rank>
TYPESHARD_COLD
constexpr step_list<Rank> plan_reshard_steps(const spec_array<Rank>& from,
                                             const dim_spec& unreduced,
                                             const spec_array<Rank>& to, const dim_spec& keep,
                                             bool even) {
  step_list<Rank> out;
  spec_array<Rank> cur = from;
  dim_spec unred = unreduced;
  auto push = [&](step_kind k, const dim_spec& axes, std::size_t dim, std::size_t to_dim) {
    out.push(step<Rank>{k, step_operand::array, dim, to_dim, axes, cur, unred});
  };

  // 1. reduce.
  dim_spec to_reduce = without(unred, keep);
  for (std::size_t d = 0; d < Rank; ++d) {
    dim_spec scatter;
    if (even) {
      if (!is_prefix(cur[d], to[d])) continue;
      for (std::size_t i = cur[d].count; i < to[d].count && contains(to_reduce, to[d].axes[i]); ++i)
        append(scatter, to[d].axes[i]);
    } else {
      // Uneven blocks nest only under an unsharded dimension, reduced straight to its target.
      if (cur[d].count != 0 || to[d].count == 0) continue;
      bool all = true;
      for (std::size_t i = 0; i < to[d].count; ++i) all = all && contains(to_reduce, to[d].axes[i]);
      if (all) scatter = to[d];
    }
    if (scatter.count == 0) continue;
    for (std::size_t i = 0; i < scatter.count; ++i) append(cur[d], scatter.axes[i]);
    to_reduce = without(to_reduce, scatter);
    unred = without(unred, scatter);
    push(step_kind::psum_scatter, scatter, d, d);
  }
  if (to_reduce.count != 0) {
    unred = without(unred, to_reduce);
    push(step_kind::psum, to_reduce, 0, 0);
  }

  // 2. move.
  if (even) {
    for (std::size_t guard = 0; guard < 4 * Rank * dim_spec::max_axes + 4; ++guard) {
      bool acted = false;
      // An all_to_all first: it moves an axis where the target wants it in one exchange.
      for (std::size_t d = 0; d < Rank && !acted; ++d) {
        if (is_prefix(cur[d], to[d]) || cur[d].count == 0) continue;
        const axis_name a = cur[d].axes[cur[d].count - 1];
        const std::size_t j = dimension_using(to, a);
        // j == Rank (no target dimension uses a) fails can_join too; tested here as well so
        // that g++ -O3 sees the bound of cur[j] below (-Warray-bounds, -Werror).
        if (j >= Rank || j == d || !can_join(cur, to, j, a)) continue;
        truncate(cur[d], cur[d].count - 1);
        append(cur[j], a);
        dim_spec one;
        append(one, a);
        push(step_kind::all_to_all, one, d, j);
        acted = true;
      }
      // Else gather the fewest minor axes that uncover one an all_to_all can move, or all
      // the axes the target does not want on that dimension.
      for (std::size_t d = 0; d < Rank && !acted; ++d) {
        if (is_prefix(cur[d], to[d])) continue;
        const std::size_t k = common_prefix(cur[d], to[d]);
        std::size_t keep_count = k;
        for (std::size_t i = cur[d].count; i-- > k;) {
          const std::size_t j = dimension_using(to, cur[d].axes[i]);
          if (j != d && can_join(cur, to, j, cur[d].axes[i])) {
            keep_count = i + 1;
            break;
          }
        }
        const dim_spec gathered = suffix(cur[d], keep_count);
        truncate(cur[d], keep_count);
        push(step_kind::all_gather, gathered, d, d);
        acted = true;
      }
      if (!acted) break;
    }
  } else {
    for (std::size_t d = 0; d < Rank; ++d) {
      if (cur[d] == to[d] || cur[d].count == 0) continue;
      const dim_spec gathered = cur[d];
      cur[d] = dim_spec{};
      push(step_kind::all_gather, gathered, d, d);
    }
  }

  // 3. slice.
  if (cur != to) {
    cur = to;
    push(step_kind::slice, dim_spec{}, 0, 0);
  }
  return out;
}

// The same plan computed while a program runs (the executor plans for the actual extents,
// which may be dynamic): a plain function of the rank, so that typeshard::runtime compiles
// it once per rank (extern template below) instead of every TU that runs an einsum or a
// matmul generating its own copy.
template <std::size_t Rank>
TYPESHARD_COLD step_list<Rank> plan_reshard_at_run_time(const spec_array<Rank>& from, const dim_spec& unreduced,
                                         const spec_array<Rank>& to, const dim_spec& keep,
                                         bool even) {
  return plan_reshard_steps(from, unreduced, to, keep, even);
}

template <std::size_t Rank>
constexpr step_list<Rank> plan_reshard(const spec_array<Rank>& from, const dim_spec& unreduced,
                                       const spec_array<Rank>& to, const dim_spec& keep,
                                       bool even) {
  if (std::is_constant_evaluated()) return plan_reshard_steps(from, unreduced, to, keep, even);
  return plan_reshard_at_run_time(from, unreduced, to, keep, even);
}

#if defined(TYPESHARD_SEPARATE_COMPILATION)
#define TYPESHARD_PLAN_RESHARD_INSTANCE(prefix, R)                                             \
  prefix step_list<R> plan_reshard_at_run_time<R>(const spec_array<R>&, const dim_spec&,       \
                                                  const spec_array<R>&, const dim_spec&, bool);
TYPESHARD_FOR_RUNTIME_RANKS(TYPESHARD_PLAN_RESHARD_INSTANCE, extern template)
#endif

template <class Unreduced>
constexpr dim_spec unreduced_list() {
  dim_spec out;
  for (std::size_t i = 0; i < Unreduced::size && i < dim_spec::max_axes; ++i)
    append(out, Unreduced::axes[i]);
  return out;
}

// The first axis of Unreduced that Spec also shards (or an empty name).
template <class Spec, class Unreduced>
constexpr axis_name unreduced_sharding_axis() {
  for (std::size_t i = 0; i < Unreduced::size; ++i)
    if (Spec::uses(Unreduced::axes[i])) return Unreduced::axes[i];
  return {};
}

// Whether the extents are all static, and if so whether both shardings are even.
template <class Mesh, class Extents, std::size_t Rank>
constexpr shard_evenness evenness_of(const spec_array<Rank>& from, const spec_array<Rank>& to) {
  if constexpr (!Extents::all_static) {
    return shard_evenness::decided_at_run_time;
  } else {
    shape<Rank> global{};
    for (std::size_t d = 0; d < Rank; ++d) global[d] = Extents::static_extents[d];
    return is_even<Mesh>(from, global) && is_even<Mesh>(to, global) ? shard_evenness::even
                                                                     : shard_evenness::uneven;
  }
}

template <std::size_t N, std::size_t Rank>
constexpr bool any_communicates(const std::array<step<Rank>, N>& steps) {
  for (const auto& s : steps)
    if (s.communicates()) return true;
  return false;
}

// Checks a plan's inputs (rule 1 for the target, rule 3 for the unreduced axes); fires one
// diagnostic and returns false on the first problem.
template <class Mesh, class From, class To, std::size_t Rank, class Unreduced, class Keep>
constexpr bool check_reshard() {
  if constexpr (!check_spec<Mesh, To, Rank>()) {
    return false;
  } else if constexpr (Unreduced::size > dim_spec::max_axes) {
    return require<false, diagnostic::too_many_unreduced_axes<Unreduced::size>>::value && false;
  } else if constexpr (!unreduced_sharding_axis<typename padded_spec<From, Rank>::type,
                                                Unreduced>()
                            .empty()) {
    return require_named<false,
                         unreduced_sharding_axis<typename padded_spec<From, Rank>::type,
                                                 Unreduced>(),
                         diagnostic::unreduced_axis_also_shards>::value &&
           false;
  } else {
    (void)sizeof(Keep);
    return true;
  }
}

}  // namespace detail

namespace detail {
template <std::size_t Rank>
std::string describe_plan(std::string title, shard_evenness evenness,
                          std::span<const step<Rank>> even,
                          std::span<const step<Rank>> uneven);
}  // namespace detail

// reshard_plan<Mesh, From, To, Extents, Unreduced, Keep>: how an array of extents Extents,
// sharded by From and unreduced over Unreduced, becomes sharded by To and unreduced over
// Keep only (Keep: a subset of Unreduced, empty for ts::reshard). Every member is constexpr.
template <mesh_type Mesh, spec_type From, spec_type To, extents_type Extents,
          unreduced_type Unreduced = unreduced<>, unreduced_type Keep = unreduced<>>
struct reshard_plan {
  static constexpr std::size_t rank = Extents::rank;
  using mesh_type = Mesh;
  using from_spec = typename detail::padded_spec<From, rank>::type;
  using to_spec = typename detail::padded_spec<To, rank>::type;
  using unreduced_type = Unreduced;
  using step_type = step<rank>;

  // Whether the inputs are valid (else a diagnostic fired and the plan is empty).
  static constexpr bool valid = detail::check_reshard<Mesh, From, To, rank, Unreduced, Keep>();

 private:
  static constexpr detail::spec_array<rank> from_ = detail::spec_array_of<from_spec, rank>();
  static constexpr detail::spec_array<rank> to_ = detail::spec_array_of<to_spec, rank>();
  static constexpr detail::step_list<rank> make(bool even) {
    if constexpr (!valid) {
      (void)even;
      return {};
    } else {
      return detail::plan_reshard(from_, detail::unreduced_list<Unreduced>(), to_,
                                  detail::unreduced_list<Keep>(), even);
    }
  }
  static constexpr detail::step_list<rank> even_ = make(true);
  static constexpr detail::step_list<rank> uneven_ = make(false);

 public:
  // The steps when both shardings divide evenly (the usual case), and when they do not.
  static constexpr std::array<step_type, even_.count> even_steps =
      detail::take_steps<even_.count>(even_);
  static constexpr std::array<step_type, uneven_.count> uneven_steps =
      detail::take_steps<uneven_.count>(uneven_);

  static constexpr shard_evenness evenness = detail::evenness_of<Mesh, Extents>(from_, to_);

  // The steps that run: even_steps unless the static extents are known to be uneven
  // (with dynamic extents, uneven_steps run instead when the shapes turn out uneven).
  static constexpr auto steps = [] {
    if constexpr (evenness == shard_evenness::uneven)
      return uneven_steps;
    else
      return even_steps;
  }();

  // Whether any collective may run (for dynamic extents: in either variant).
  static constexpr bool communicates =
      evenness == shard_evenness::even     ? detail::any_communicates(even_steps)
      : evenness == shard_evenness::uneven ? detail::any_communicates(uneven_steps)
                                           : detail::any_communicates(even_steps) ||
                                                 detail::any_communicates(uneven_steps);

  // How many steps of a kind `steps` has.
  template <step_kind Kind>
  static constexpr std::size_t count = [] {
    std::size_t n = 0;
    for (const auto& s : steps) n += s.kind == Kind;
    return n;
  }();

  // A readable account, one numbered line per step.
  static std::string describe() {
    return detail::describe_plan<rank>(
        "reshard " + from_spec::to_string() + Unreduced::to_string() + " -> " +
            to_spec::to_string() + Keep::to_string() + " on " + Mesh::to_string(),
        evenness, even_steps, uneven_steps);
  }
};

namespace detail {

template <std::size_t Rank>
constexpr bool same_steps(std::span<const step<Rank>> a,
                          std::span<const step<Rank>> b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].kind != b[i].kind || !(a[i].axes == b[i].axes) || a[i].dim != b[i].dim ||
        a[i].to_dim != b[i].to_dim || a[i].spec_after != b[i].spec_after)
      return false;
  return true;
}

// reshard_plan::describe's body, one instantiation per rank.
template <std::size_t Rank>
std::string describe_plan(std::string out, shard_evenness evenness,
                          std::span<const step<Rank>> even,
                          std::span<const step<Rank>> uneven) {
  auto list = [&out](std::span<const step<Rank>> steps) {
    if (steps.empty()) out += "  (nothing to do)\n";
    for (std::size_t i = 0; i < steps.size(); ++i)
      out += "  " + std::to_string(i + 1) + ". " + steps[i].describe() + "\n";
  };
  if (evenness == shard_evenness::decided_at_run_time && !same_steps(even, uneven)) {
    out += ":\n when the shards divide evenly:\n";
    list(even);
    out += " otherwise:\n";
    list(uneven);
  } else {
    out += ":\n";
    list(evenness == shard_evenness::uneven ? uneven : even);
  }
  return out;
}

}  // namespace detail

// communication_free<Plan>: the plan runs no collective (write
// static_assert(ts::communication_free<plan>) to forbid hidden communication).
template <class Plan>
concept communication_free = requires {
  { Plan::communicates } -> std::convertible_to<bool>;
} && !Plan::communicates;

}  // namespace typeshard
