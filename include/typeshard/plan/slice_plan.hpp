// typeshard/plan/slice_plan.hpp: the plans of ts::slice, ts::split and ts::concat (and of a
// slice's transpose, a pad into zeros), computed on values: at run time for dynamic extents and
// offsets, in a static_assert where they are constants.
//
//   // x: [8, 12], spec<"x", "y"> on a 2 x 2 mesh
//   const ts::slice_plan<2> p = ts::slice_plan_of<1>(x, 2, 5);   // columns [2, 7)
//   p.communicates();  // true: a device's result columns are held by the other device
//   p.describe();      // "slice of dimension 1: [2, 7) of 12, PartitionSpec('x', 'y')
//                      //   1. all_gather over 'y' along dimension 1 => PartitionSpec('x', None)
//                      //   2. copy [2, 7) of dimension 1 (local, no communication) => ...
//                      //   3. slice (local, no communication) => PartitionSpec('x', 'y')"
//
// The result of every one of these operations keeps its operand's spec (JAX's sharding rule
// for lax.slice, lax.split and lax.concatenate; typeshard shards the new extent unevenly where
// it does not divide, where JAX refuses). Each device's result block along the dimension is
// either read from its own operand block (an unsharded dimension, or a window whose every
// shard lies inside the same device's operand shard: one local copy, no communication), or
// else the dimension is gathered over its axes (one all_gather), the window copied, and each
// device keeps its block (a local slice). A concatenation along a sharded dimension gathers
// every operand the same way. The cost model is plan/step.hpp's.
//
//   slice_plan<Rank>                                  the plan (a value)
//   slice_in_dim_plan<A, Dim, Start, Size>            a slice's plan as a type (ts::plan_like)
//   detail::plan_window(mesh, spec, dim, in, shift, out, op)   result j <- operand j + shift
//   detail::plan_concat(mesh, spec, dim, out)
//
// Compile-time vocabulary only: no runtime header is included.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>

#include "../core/config.hpp"
#include "../core/detail/mesh_value.hpp"
#include "../core/detail/spec_layout.hpp"
#include "../core/extents.hpp"
#include "../core/layout.hpp"
#include "../core/spec.hpp"
#include "step.hpp"

namespace typeshard {

// slice_plan<Rank>: what a slice, pad or concatenation of a rank-Rank array runs, on the one
// executor (ops/detail/executor.hpp). `steps` (count of them) are: [all_gather of the operand
// along `dim`], the local copy of the window into the result (the step at `window_at`, kind
// slice, local_op::window, operand out, its payload window(): the result laid out with `dim`
// whole or as the operand is), [slice of the result back to the operand's spec]. Each operand
// runs operand_steps() (a concatenation's each with its own window), the result then
// result_steps().
template <std::size_t Rank>
struct slice_plan {
  static constexpr std::size_t rank = Rank;
  const char* op = "slice";        // "slice", "pad" (a slice's transpose) or "concat"
  std::size_t dim = 0;             // the dimension sliced, padded or concatenated
  std::ptrdiff_t shift = 0;        // result index j along dim reads operand index j + shift
  std::size_t in_extent = 0;       // the operand's extent along dim (concat: the first's)
  std::size_t out_extent = 0;      // the result's
  std::array<step<Rank>, 3> steps{};
  std::size_t count = 0;
  std::size_t window_at = 0;       // the index of the local window copy in steps

  constexpr std::span<const step<Rank>> step_list() const { return {steps.data(), count}; }
  // The steps each operand runs (up to the window copy, included), those the result runs.
  constexpr std::span<const step<Rank>> operand_steps() const {
    return {steps.data(), window_at + 1};
  }
  constexpr std::span<const step<Rank>> result_steps() const {
    return {steps.data() + window_at + 1, count - window_at - 1};
  }
  // The window step's payload for the (first) operand: result j <- operand j + shift, zeros
  // outside it but in a concatenation (whose other operands fill the rest).
  constexpr detail::window_payload window() const {
    return {shift, in_extent, out_extent, op[0] != 'c'};
  }
  constexpr bool communicates() const { return collectives() != 0; }
  constexpr std::size_t collectives() const {
    std::size_t n = 0;
    for (std::size_t i = 0; i < count; ++i) n += steps[i].communicates() ? 1 : 0;
    return n;
  }
  constexpr bool gathers() const { return collectives() != 0; }

  // A header line, then one numbered line per step.
  TYPESHARD_COLD std::string describe() const {
    std::string out(op);
    out.append(" of dimension ").append(std::to_string(dim)).append(": ");
    if (op[0] == 'c') {
      out.append("extent ").append(std::to_string(out_extent));
    } else {
      const std::ptrdiff_t a = shift < 0 ? -shift : shift;
      const std::size_t lo = static_cast<std::size_t>(a);
      const std::size_t hi = lo + (shift < 0 ? in_extent : out_extent);
      out.append("[").append(std::to_string(lo)).append(", ").append(std::to_string(hi));
      out.append(shift < 0 ? ") of a result of " : ") of ");
      out.append(std::to_string(shift < 0 ? out_extent : in_extent));
    }
    out.append(", ").append(detail::spec_string(steps[count - 1].spec_after)).append("\n");
    for (std::size_t i = 0; i < count; ++i) {
      out.append("  ").append(std::to_string(i + 1)).append(". ");
      if (i == window_at) {
        out.append(op[0] == 'c' ? "concatenate along dimension "
                                : "copy the window along dimension ");
        out.append(std::to_string(dim))
            .append(" (local, no communication) => ")
            .append(detail::spec_string(steps[i].spec_after));
        if (steps[i].unreduced_after.count)
          out.append(" unreduced over ").append(detail::axes_string(steps[i].unreduced_after));
      } else {
        out.append(steps[i].describe());
        if (op[0] == 'c' && steps[i].communicates()) out.append(" (each operand)");
      }
      out.append("\n");
    }
    return out;
  }
};

namespace detail {

// Whether every shard of the result along `dim` reads only operand elements held by the same
// shard of the operand (result index j reads operand index j + shift where that is in range;
// out of range is a zero).
template <std::size_t Rank>
constexpr bool window_is_local(const mesh_value& m, const spec_array<Rank>& s, std::size_t dim,
                               std::size_t in_extent, std::ptrdiff_t shift,
                               std::size_t out_extent) {
  const std::size_t k = shards_of(m, s[dim]);
  for (std::size_t c = 0; c < k && k > 1; ++c) {
    const slice r = shard_slice(out_extent, k, c), held = shard_slice(in_extent, k, c);
    const std::ptrdiff_t lo0 = static_cast<std::ptrdiff_t>(r.start) + shift;
    const std::ptrdiff_t hi0 = static_cast<std::ptrdiff_t>(r.stop) + shift;
    const std::ptrdiff_t lo = lo0 < 0 ? 0 : lo0;
    const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(in_extent);
    const std::ptrdiff_t hi = hi0 > n ? n : hi0;
    if (lo < hi && (lo < static_cast<std::ptrdiff_t>(held.start) ||
                    hi > static_cast<std::ptrdiff_t>(held.stop)))
      return false;
  }
  return true;
}

// One step of a window's plan along `dim` over `axes`, leaving spec `after`.
template <std::size_t Rank>
constexpr step<Rank> window_step(step_kind kind, std::size_t dim, const dim_spec& axes,
                                 const spec_array<Rank>& after, const dim_spec& unreduced) {
  step<Rank> s{};
  s.kind = kind;
  s.dim = dim;
  s.axes = axes;
  s.spec_after = after;
  s.unreduced_after = unreduced;
  return s;
}

// The steps around a local window copy: the gather of the operand's `dim` when `gather`, the
// copy into the result (window payload 0), the result's slice back to `s`.
template <std::size_t Rank>
constexpr void push_window_steps(slice_plan<Rank>& p, const spec_array<Rank>& s,
                                 const dim_spec& unreduced, bool gather) {
  spec_array<Rank> whole = s;
  whole[p.dim] = dim_spec{};
  if (gather)
    p.steps[p.count++] = window_step(step_kind::all_gather, p.dim, s[p.dim], whole, unreduced);
  p.window_at = p.count;
  step<Rank> copy = window_step(step_kind::slice, p.dim, dim_spec{}, gather ? whole : s, unreduced);
  copy.operand = step_operand::out;
  copy.op = local_op::window;
  p.steps[p.count++] = copy;
  if (gather) {
    p.steps[p.count] = window_step(step_kind::slice, p.dim, s[p.dim], s, unreduced);
    p.steps[p.count++].operand = step_operand::out;
  }
}

// The plan of a window: result index j along `dim` (extent out_extent) is operand index
// j + shift (extent in_extent), or zero where that is out of range. A slice [start, start +
// size) is shift = start, out = size; its transpose, a pad, shift = -start, out = the
// operand's extent.
template <std::size_t Rank>
constexpr slice_plan<Rank> plan_window(const mesh_value& m, const spec_array<Rank>& s,
                                       const dim_spec& unreduced, std::size_t dim,
                                       std::size_t in_extent, std::ptrdiff_t shift,
                                       std::size_t out_extent, const char* op) {
  slice_plan<Rank> p;
  p.op = op;
  p.dim = dim;
  p.shift = shift;
  p.in_extent = in_extent;
  p.out_extent = out_extent;
  push_window_steps(p, s, unreduced,
                    !window_is_local(m, s, dim, in_extent, shift, out_extent));
  return p;
}

// The plan of a concatenation along `dim` (result extent out_extent, first operand's
// in_extent): local where `dim` is unsharded, else every operand gathered along it.
template <std::size_t Rank>
constexpr slice_plan<Rank> plan_concat(const mesh_value& m, const spec_array<Rank>& s,
                                       const dim_spec& unreduced, std::size_t dim,
                                       std::size_t in_extent, std::size_t out_extent) {
  slice_plan<Rank> p;
  p.op = "concat";
  p.dim = dim;
  p.in_extent = in_extent;
  p.out_extent = out_extent;
  push_window_steps(p, s, unreduced, shards_of(m, s[dim]) > 1);
  return p;
}

}  // namespace detail

// slice_in_dim_plan<A, Dim, Start, Size>: the plan ts::slice_in_dim<Dim> runs on an array of
// type A for the range [Start, Start + Size), as a type (ts::plan_like, plan/plan_like.hpp):
// steps_for(extents), the slice_plan's steps for those extents; steps, collectives,
// communicates, describe() and bytes_per_device for A's static extents (a dynamic extent
// taken as 1, or Start + Size along Dim; bytes_per_device then 0).
template <class A, std::size_t Dim, std::size_t Start, std::size_t Size>
  requires(Dim < A::rank)
struct slice_in_dim_plan {
  static constexpr std::size_t rank = A::rank;
  using mesh_type = typename A::mesh_type;
  using value_type = typename A::value_type;

  static constexpr slice_plan<rank> plan_for(const shape<rank>& extents) {
    dim_spec unreduced;
    for (std::size_t i = 0; i < A::unreduced_type::size; ++i)
      unreduced.axes[unreduced.count++] = A::unreduced_type::axes[i];
    return detail::plan_window<rank>(detail::mesh_value_of<mesh_type>(),
                                     detail::spec_array_of<typename A::spec, rank>(), unreduced,
                                     Dim, extents[Dim], static_cast<std::ptrdiff_t>(Start), Size,
                                     "slice");
  }
  static constexpr detail::step_array<rank, 3> steps_for(const shape<rank>& extents) {
    const slice_plan<rank> p = plan_for(extents);
    detail::step_array<rank, 3> out;
    for (std::size_t i = 0; i < p.count; ++i) out.push(p.steps[i]);
    return out;
  }

 private:
  static constexpr shape<rank> nominal_ = [] {
    shape<rank> e{};
    for (std::size_t d = 0; d < rank; ++d) {
      const std::size_t s = A::extents_type::static_extents[d];
      e[d] = s != dyn ? s : d == Dim ? Start + Size : 1;
    }
    return e;
  }();
  static constexpr auto list_ = steps_for(nominal_);

 public:
  // Whether the range lies inside a static extent (a dynamic one is checked at run time).
  static constexpr bool valid = Start + Size <= nominal_[Dim];
  static constexpr std::array<step<rank>, list_.count> steps =
      detail::take_steps<list_.count>(list_);
  static constexpr std::size_t collectives = detail::count_collectives(steps);
  static constexpr bool communicates = collectives != 0;
  static constexpr std::size_t bytes_per_device =
      A::extents_type::all_static
          ? static_cast<std::size_t>(detail::elements_received_by<mesh_type>(
                                         steps, detail::spec_array_of<typename A::spec, rank>(),
                                         nominal_) + 0.5) * sizeof(value_type)
          : 0;
  static std::string describe() { return plan_for(nominal_).describe(); }
};

}  // namespace typeshard
