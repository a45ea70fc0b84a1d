// typeshard/plan/detail/reshard_planner.hpp: the steps of a reshard, as values (the rules
// are in plan/reshard_plan.hpp's header comment, its public face). Internal: do not rely on
// anything in detail/.
#pragma once

#include <array>
#include <cstddef>
#include <type_traits>

#include "../../core/config.hpp"
#include "../../core/detail/mesh_group.hpp"
#include "../../core/detail/spec_layout.hpp"
#include "../../core/spec.hpp"
#include "../step.hpp"

namespace typeshard::detail {

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
TYPESHARD_COLD step_list<Rank> plan_reshard_at_run_time(const spec_array<Rank>& from,
                                                        const dim_spec& unreduced,
                                                        const spec_array<Rank>& to,
                                                        const dim_spec& keep, bool even) {
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

}  // namespace typeshard::detail
