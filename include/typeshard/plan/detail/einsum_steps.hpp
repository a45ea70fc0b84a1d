// typeshard/plan/detail/einsum_steps.hpp: the steps of a contraction plan (an einsum's, and
// so a matmul's), as values: the operands' reshards and local slices, the local product
// ("local gemm"), then the output's reduction and resharding. What einsum_plan::steps and
// matmul_plan::steps list and what ts::einsum and ts::matmul run (ops/detail/executor.hpp).
// Internal: do not rely on anything in detail/ (the public face is plan/einsum_plan.hpp).
#pragma once

#include <cstddef>
#include <type_traits>

#include "../../core/config.hpp"
#include "../../core/mesh.hpp"
#include "../../core/spec.hpp"
#include "../reshard_plan.hpp"
#include "../step.hpp"
#include "einsum_cost.hpp"
#include "einsum_letters.hpp"
#include "einsum_subscripts.hpp"

namespace typeshard::detail {

inline constexpr std::size_t max_einsum_steps = 3 * max_reshard_steps + 2 * max_einsum_rank + 1;

template <std::size_t R>
using einsum_step_list = step_array<R, max_einsum_steps>;

// The steps of a choice once the shapes have decided which reshards are even (the only way
// the shapes enter): a function of values only. Callers use einsum_steps_for (below).
template <std::size_t R>
TYPESHARD_COLD
constexpr einsum_step_list<R> einsum_steps_body(const einsum_choice<R>& c, bool even_lhs,
                                                bool even_rhs, bool even_out) {
  einsum_step_list<R> out;
  append_reshard(out, step_operand::lhs, c.lhs,
                 plan_reshard(c.lhs, c.lhs_unreduced, c.lhs_gemm, c.lhs_unreduced, even_lhs));
  append_reshard(out, step_operand::rhs, c.rhs,
                 plan_reshard(c.rhs, c.rhs_unreduced, c.rhs_gemm, c.rhs_unreduced, even_rhs));
  spec_array<R> cur = c.lhs_gemm;
  for (std::size_t d = 0; d < R; ++d)
    if (!(c.lhs_read[d] == cur[d])) {
      cur[d] = c.lhs_read[d];
      out.push(step<R>{step_kind::slice, step_operand::lhs, d, d, c.lhs_read[d], cur,
                       c.lhs_unreduced});
    }
  cur = c.rhs_gemm;
  for (std::size_t d = 0; d < R; ++d)
    if (!(c.rhs_read[d] == cur[d])) {
      cur[d] = c.rhs_read[d];
      out.push(step<R>{step_kind::slice, step_operand::rhs, d, d, c.rhs_read[d], cur,
                       c.rhs_unreduced});
    }
  out.push(step<R>{step_kind::local_gemm, step_operand::out, 0, 0, dim_spec{}, c.local, c.partial,
                   local_op::contract});  // contraction 0: the plan's equation
  if (c.out_named)
    append_reshard(out, step_operand::out, c.local,
                   plan_reshard(c.local, c.partial, c.out, dim_spec{}, even_out));
  return out;
}

// The same computed while a program runs (ts::einsum plans for the actual extents): a plain
// function of the rank, compiled once per rank in typeshard::runtime (extern template below).
template <std::size_t R>
TYPESHARD_COLD einsum_step_list<R> einsum_steps_at_run_time(const einsum_choice<R>& c,
                                                            bool even_lhs, bool even_rhs,
                                                            bool even_out) {
  return einsum_steps_body(c, even_lhs, even_rhs, even_out);
}

template <std::size_t R>
constexpr einsum_step_list<R> einsum_steps_for(const einsum_choice<R>& c, bool even_lhs,
                                               bool even_rhs, bool even_out) {
  if (std::is_constant_evaluated()) return einsum_steps_body(c, even_lhs, even_rhs, even_out);
  return einsum_steps_at_run_time(c, even_lhs, even_rhs, even_out);
}

#if defined(TYPESHARD_SEPARATE_COMPILATION)
#define TYPESHARD_EINSUM_STEPS_INSTANCE(prefix, R)                                             \
  prefix einsum_step_list<R> einsum_steps_at_run_time<R>(const einsum_choice<R>&, bool, bool,  \
                                                         bool);
TYPESHARD_FOR_RUNTIME_RANKS(TYPESHARD_EINSUM_STEPS_INSTANCE, extern template)
#endif

// The steps of a choice for shapes `sh`: what einsum_plan::steps lists and ts::einsum runs.
template <class Mesh, std::size_t R>
constexpr einsum_step_list<R> einsum_steps_of(const einsum_equation& eq, const einsum_choice<R>& c,
                                              const einsum_shapes<R>& sh) {
  return einsum_steps_for(c, even_between<Mesh>(c.lhs, c.lhs_gemm, sh.lhs),
                          even_between<Mesh>(c.rhs, c.rhs_gemm, sh.rhs),
                          c.out_named &&
                              even_between<Mesh>(c.local, c.out, einsum_out_shape(eq, sh)));
}
// The same on a mesh held as a value (the executor's, core/detail/mesh_value.hpp).
template <std::size_t R>
einsum_step_list<R> einsum_steps_of(const mesh_value& m, const einsum_equation& eq,
                                    const einsum_choice<R>& c, const einsum_shapes<R>& sh) {
  return einsum_steps_at_run_time(
      c, even_between(m, c.lhs, c.lhs_gemm, sh.lhs), even_between(m, c.rhs, c.rhs_gemm, sh.rhs),
      c.out_named && even_between(m, c.local, c.out, einsum_out_shape(eq, sh)));
}

}  // namespace typeshard::detail
