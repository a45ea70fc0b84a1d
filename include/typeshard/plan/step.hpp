// typeshard/plan/step.hpp: one step of a plan, the one vocabulary every plan is written in.
//
//   using plan = ts::reshard_plan<mesh_2x2, ts::spec<"x", ts::none>, ts::spec<ts::none, "x">,
//                                 ts::extents<8, 8>>;
//   static_assert(plan::steps[0].kind == ts::step_kind::all_to_all);
//   static_assert(plan::steps[0].spec_after[1] == ts::dim_spec("x"));
//
// Every plan (reshard, einsum, matmul, reduce, softmax, layer_norm, dims, slice) lists its
// collectives, local slices and local compute as ts::step values; one executor
// (ops/detail/executor.hpp) runs exactly those values, so a plan printed or checked at compile
// time and the steps run at run time cannot disagree. A step names its operand (a matmul
// has three), what it does, over which mesh axes, and the sharding it leaves behind; a local
// step also names its kernel and that kernel's arguments (`op`, `reduce`, `over`, `payload`),
// as values, so the executor dispatches on the step alone.
//
// Compile-time vocabulary only: no runtime header is included.
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "../core/config.hpp"
#include "../core/detail/spec_layout.hpp"
#include "../core/layout.hpp"
#include "../core/spec.hpp"

namespace typeshard {

// step_kind: what one step does.
enum class step_kind {
  all_gather,    // over `axes` along `dim`: `dim` loses `axes` (its minor ones)
  all_to_all,    // over `axes` (one axis): it leaves `dim` and joins `to_dim`
  psum,          // over `axes`: the unreduced axes become reduced, replicated (all-reduce)
  psum_scatter,  // over `axes` along `dim`: reduced, and `dim` gains `axes` (reduce-scatter)
  slice,         // local: dimensions gain axes by taking their block; no communication
  local_gemm,    // an einsum's (a matmul's) per-device product: contraction `payload`
  pmax,          // over `axes`: the elementwise maximum over the group (all-reduce max)
  pmin,          // over `axes`: the elementwise minimum over the group (all-reduce min)
  local_reduce,  // a per-device reduction over its block: `op` says which
  local_elementwise,  // a per-device elementwise kernel: `op` says which
  // The collectives' other names, as reshard plans spelled them: the same steps.
  all_reduce = psum,
  reduce_scatter = psum_scatter
};

// Which operand a step acts on: the array of a reshard, a matmul's lhs, rhs or product, or
// the row statistics of a row operation (softmax, layer_norm: one or two values per row).
enum class step_operand { array, lhs, rhs, out, stats };

// The reductions (plan/reduce_plan.hpp defines the enumerators: sum, mean, max, min).
enum class reduction;

// local_op: the kernel a local step runs (its payload, with the step's other fields).
// Row kernels act on the rows of the `array` operand along `dim` and on its statistics
// `stats` (slot 0 and slot 1, one value per row each).
enum class local_op : unsigned char {
  none,                   // a collective or a slice
  contract,               // local_gemm: the plan's contraction number `payload` (its equation)
  reduce,                 // local_reduce: reduction `reduce` over the dimensions `over`
  row_max,                // softmax: slot 0 = the row maximum
  row_exp_sum,            // softmax: slot 1 = the row sum of exp(x - slot 0)
  softmax_normalize,      // softmax: exp(x - slot 0) / slot 1
  log_softmax_normalize,  // log_softmax: (x - slot 0) - log(slot 1)
  row_sum,                // layer_norm: slot 0 = the row sum
  row_sq_dev_sum,         // layer_norm: slot 0 /= count (the mean); slot 1 = sum (x - mean)^2
  layer_norm_normalize,   // layer_norm: (x - mean) * rstd, rstd = 1 / sqrt(slot 1 / count +
                          // eps) kept in slot 1; eps the run's scalar number `payload`
  layer_norm_grad_sums,   // layer_norm's backward: slot 0 = sum g, slot 1 = sum g * y
  layer_norm_grad,        // layer_norm's backward: dx = (g - mean g - y mean(g y)) * rstd
  window                  // slice, pad, concat (kind slice, operand out): the array's block
                          // copied into the result's along `dim` by the run's window `payload`
};

namespace detail {
// The payload of a local_op::window step: result index j along the step's `dim` is the array
// operand's index j + shift (extent in_extent), for j in [0, out_extent); where that is out
// of range the result holds zero (`zeros`: a slice or pad) or another operand's elements (a
// concatenation: each operand's window step fills its part of one result block).
struct window_payload {
  std::ptrdiff_t shift = 0;
  std::size_t in_extent = 0;
  std::size_t out_extent = 0;
  bool zeros = true;
};
}  // namespace detail

// Which row statistics a collective on `stats` all-reduces: its `payload`, a mask of slots.
inline constexpr std::size_t stats_slot0 = 1, stats_slot1 = 2, stats_both = 3;

constexpr const char* to_string(step_kind k) {
  switch (k) {
    case step_kind::all_gather: return "all_gather";
    case step_kind::all_to_all: return "all_to_all";
    case step_kind::psum: return "psum";
    case step_kind::psum_scatter: return "psum_scatter";
    case step_kind::slice: return "slice";
    case step_kind::local_gemm: return "local gemm";
    case step_kind::pmax: return "pmax";
    case step_kind::pmin: return "pmin";
    case step_kind::local_reduce: return "local reduce";
    case step_kind::local_elementwise: return "local elementwise";
  }
  return "?";
}

constexpr const char* to_string(step_operand o) {
  switch (o) {
    case step_operand::array: return "array";
    case step_operand::lhs: return "lhs";
    case step_operand::rhs: return "rhs";
    case step_operand::out: return "out";
    case step_operand::stats: return "stats";
  }
  return "?";
}

// step<Rank>: one step, and the sharding it leaves its operand in.
template <std::size_t Rank>
struct step {
  step_kind kind = step_kind::slice;
  step_operand operand = step_operand::array;
  std::size_t dim = 0;                    // gathered, scattered, sliced; all_to_all: source
  std::size_t to_dim = 0;                 // all_to_all: the dimension the axis joins
  dim_spec axes{};                        // the collective's (or slice's) mesh axes, major first
  detail::spec_array<Rank> spec_after{};  // the operand's sharding after this step
  dim_spec unreduced_after{};             // the axes it is still unreduced over
  local_op op = local_op::none;           // a local step's kernel
  reduction reduce{};                     // local_op::reduce: which reduction
  std::array<bool, Rank> over{};          // local_op::reduce: the dimensions reduced
  std::size_t payload = 0;                // contract: contraction number; stats: slot mask;
                                          // layer_norm_normalize: scalar number (eps)

  constexpr bool communicates() const {
    return kind != step_kind::slice && kind != step_kind::local_gemm &&
           kind != step_kind::local_reduce && kind != step_kind::local_elementwise;
  }

  // A line of a reshard plan: "all_to_all over 'x': dimension 0 -> 1 (split_axis=1,
  // concat_axis=0) => PartitionSpec(None, 'x')".
  TYPESHARD_COLD std::string describe() const {
    std::string out = to_string(kind);
    switch (kind) {
      case step_kind::psum:
      case step_kind::pmax:
      case step_kind::pmin:
        out += " over " + detail::axes_string(axes);
        break;
      case step_kind::psum_scatter:
      case step_kind::all_gather:
        out += " over " + detail::axes_string(axes) + " along dimension " + std::to_string(dim);
        break;
      case step_kind::all_to_all:
        out += " over " + detail::axes_string(axes) + ": dimension " + std::to_string(dim) +
               " -> " + std::to_string(to_dim) + " (split_axis=" + std::to_string(to_dim) +
               ", concat_axis=" + std::to_string(dim) + ")";
        break;
      case step_kind::slice:
        out += " (local, no communication)";
        break;
      case step_kind::local_reduce:
        out += " along dimension " + std::to_string(dim) + " (local, no communication)";
        break;
      case step_kind::local_gemm:
      case step_kind::local_elementwise:
        break;
    }
    out += " => " + detail::spec_string(spec_after);
    if (unreduced_after.count) out += " unreduced over " + detail::axes_string(unreduced_after);
    return out;
  }

  // The step as a call, as a matmul plan lists it: "all_gather(lhs, dim 1, over x)",
  // "psum(out, over (x, y))", "local gemm".
  TYPESHARD_COLD std::string call_string() const {
    if (kind == step_kind::local_gemm || kind == step_kind::local_elementwise)
      return to_string(kind);
    if (kind == step_kind::local_reduce)
      return "local reduce(" + std::string(to_string(operand)) + ")";
    std::string out = std::string(to_string(kind)) + "(" + to_string(operand);
    if (kind == step_kind::all_to_all)
      out += ", dim " + std::to_string(dim) + " -> dim " + std::to_string(to_dim);
    else if (kind != step_kind::psum && kind != step_kind::pmax && kind != step_kind::pmin)
      out += ", dim " + std::to_string(dim);
    out += ", over ";
    if (axes.count == 1) return out + std::string(axes.axes[0].view()) + ")";
    out += "(";
    for (std::size_t a = 0; a < axes.count; ++a)
      out += (a ? ", " : "") + std::string(axes.axes[a].view());
    return out + "))";
  }

  friend constexpr bool operator==(const step&, const step&) = default;
};

namespace detail {

// The elements one device receives in a step of `kind` over a group of `group` devices, its
// block holding `block` elements before the step: the cost model every plan's bytes count
// (bandwidth-optimal ring collectives). all_gather brings the n - 1 other blocks; psum_scatter
// and all_to_all (n - 1) / n of the block; psum, pmax and pmin, a reduce-scatter then an
// all-gather, twice that; a local step nothing.
constexpr double elements_received(step_kind kind, double group, double block) {
  const double n = group;
  switch (kind) {
    case step_kind::all_gather: return (n - 1) * block;
    case step_kind::all_to_all:
    case step_kind::psum_scatter: return (n - 1) / n * block;
    case step_kind::psum:
    case step_kind::pmax:
    case step_kind::pmin: return 2 * (n - 1) / n * block;
    case step_kind::slice:
    case step_kind::local_gemm:
    case step_kind::local_reduce:
    case step_kind::local_elementwise: break;
  }
  return 0;
}

// The elements one device receives running `steps` on an operand of global extents `global`
// sharded by `cur` before them (the largest block, on mesh Mesh): a plan's data moved.
template <class Mesh, std::size_t Rank, std::size_t N>
constexpr double elements_received_by(const std::array<step<Rank>, N>& steps,
                                      spec_array<Rank> cur, const shape<Rank>& global) {
  double elements = 0;
  for (const step<Rank>& s : steps) {
    double block = 1;
    for (std::size_t e : block_shape_of<Mesh>(cur, global)) block *= static_cast<double>(e);
    elements += elements_received(s.kind, static_cast<double>(shards_of<Mesh>(s.axes)), block);
    cur = s.spec_after;
  }
  return elements;
}

// A plan's steps while it is computed: a fixed-capacity list (constexpr-friendly).
template <std::size_t Rank, std::size_t Capacity>
struct step_array {
  std::array<step<Rank>, Capacity> steps{};
  std::size_t count = 0;
  constexpr void push(const step<Rank>& s) { steps[count++] = s; }
  constexpr const step<Rank>* begin() const { return steps.data(); }
  constexpr const step<Rank>* end() const { return steps.data() + count; }
};

// How many of a plan's steps are collectives (a plan's `collectives` member).
template <std::size_t Rank, std::size_t N>
constexpr std::size_t count_collectives(const std::array<step<Rank>, N>& steps) {
  std::size_t n = 0;
  for (const step<Rank>& s : steps) n += s.communicates() ? 1 : 0;
  return n;
}

// A plan's steps as calls, "; "-separated: what the describe() of an einsum, matmul,
// reduction or softmax plan returns ("all_gather(lhs, dim 1, over x); local gemm").
template <std::size_t Rank, std::size_t N>
TYPESHARD_COLD std::string describe_calls(const std::array<step<Rank>, N>& steps) {
  std::string out;
  for (std::size_t i = 0; i < N; ++i) out += (i ? "; " : "") + steps[i].call_string();
  return out;
}

// The first N steps of a list, as the std::array a plan exposes.
template <std::size_t N, std::size_t Rank, std::size_t Capacity>
constexpr std::array<step<Rank>, N> take_steps(const step_array<Rank, Capacity>& list) {
  std::array<step<Rank>, N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = list.steps[i];
  return out;
}

}  // namespace detail

}  // namespace typeshard
