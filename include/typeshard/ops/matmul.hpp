// typeshard/ops/matmul.hpp: the sharded matrix product (DESIGN rule 2), a front end of
// ts::einsum on "...ij,...jk->...ik".
//
//   auto C = ts::matmul(A, B);                          // A: spec<"x", none>, B: spec<none, "y">
//   static_assert(std::is_same_v<decltype(C)::spec, ts::spec<"x", "y">>);   // no collective
//   auto U = ts::matmul(A2, B2);                        // J over "x" in both: unreduced<"x">
//   auto R = ts::matmul<ts::spec<ts::none, ts::none>>(A2, B2);   // ... psum'd (all-reduce)
//   auto S = ts::matmul<ts::spec<"x", ts::none>>(A2, B2);        // ... psum_scatter'd
//   using plan = ts::matmul_plan_for<decltype(A2), decltype(B2), ts::spec<"x", ts::none>>;
//
// C[..., I, K] = A[..., I, J] . B[..., J, K] for two arrays of the same rank >= 2 on the
// same device mesh, leading dimensions being batch dimensions sharded alike, or in one
// operand only, whose sharding the result keeps (seed 004's 8 x 4096 x 4096 batch with the
// batch sharded). The plan (plan/matmul_plan.hpp: the einsum plan with batch dimensions
// fixed, in matmul's words) is chosen at compile time and runs as ts::einsum's does, as ONE
// multi-device operation (ops/einsum.hpp): the operands' collectives, each device's GEMM
// (an operand holding all of J, or of a batch dimension the other shards, read in place at
// the other's block: array/detail/einsum_kernel.hpp), then the result's reduction and
// resharding when an output spec is named. Without one, a result unreduced over some axes
// keeps them in its type (reduce it with ts::reshard<Spec>).
//
// An operand may be a partial sum (unreduced over some axes, rule 3): matmul is linear in
// each operand, so the product is a partial sum over those axes too (reduced when an output
// spec is named), provided the other operand neither shards nor is partial over them.
//
// Run-time checks (dynamic extents): equal J and batch extents (shape_error, in matmul's
// words), the same device mesh (device_mesh_error).
#pragma once

#include <cstddef>
#include <type_traits>

#include "../array/sharded_array.hpp"
#include "../core/config.hpp"
#include "../core/detail/message.hpp"
#include "../core/errors.hpp"
#include "../core/extents.hpp"
#include "../core/rules/rule2_matmul.hpp"
#include "../plan/detail/einsum_planner.hpp"
#include "../plan/matmul_plan.hpp"
#include "detail/forward_value.hpp"
#include "detail/operand_types.hpp"
#include "einsum.hpp"

namespace typeshard {

namespace detail {

// check_matmul_operands's failures, out of line: functions of values, one copy per TU
// (deferred, core/config.hpp: compiled only by a TU that runs a matmul).
TYPESHARD_DEFERRED
[[noreturn]] TYPESHARD_COLD inline void throw_matmul_inner_mismatch(std::size_t a_cols,
                                                                 std::size_t b_rows) {
  throw shape_error(message({"typeshard: matmul: lhs has ", a_cols,
                             " columns (J, its last dimension) but rhs has ", b_rows,
                             " rows (J, its second-to-last); A[..., I, J] . B[..., J, K] needs "
                             "them equal: pass operands of matching inner extent"}));
}
TYPESHARD_DEFERRED
[[noreturn]] TYPESHARD_COLD inline void throw_matmul_batch_mismatch(std::size_t d, std::size_t a,
                                                                 std::size_t b) {
  throw shape_error(message({"typeshard: matmul: batch dimension ", d, " has extent ", a,
                             " in lhs but ", b,
                             " in rhs; batched operands need the same batch extents"}));
}

// Equal J and batch extents, on values: one copy per TU.
TYPESHARD_DEFERRED
TYPESHARD_NOINLINE inline void check_matmul_extents(std::span<const std::size_t> a,
                                                    std::span<const std::size_t> b) {
  const std::size_t R = a.size();
  if (a[R - 1] != b[R - 2]) throw_matmul_inner_mismatch(a[R - 1], b[R - 2]);
  for (std::size_t d = 0; d + 2 < R; ++d)
    if (a[d] != b[d]) throw_matmul_batch_mismatch(d, a[d], b[d]);
}

// The checks only run time can make: same devices, equal J and batch extents.
template <class A, class B>
void check_matmul_operands(const A& a, const B& b) {
  check_same_device_mesh(a.device_mesh(), b.device_mesh(), "matmul", move_to_other_devices_fix);
  check_matmul_extents(a.extents(), b.extents());
}

template <>
struct front_wording<contraction_front::matmul>
    : operand_wording<diagnostic::matmul_preferred_element_unsupported,
                      diagnostic::matmul_meshes_differ, diagnostic::matmul_element_types_differ> {
};

// ts::matmul's plan on arrays a and b: rule 2 in matmul's words, the plan, the run-time checks,
// the run (checked_contraction).
template <class OutSpec, class U, class A, class B>
auto matmul_arrays(const A& a, const B& b) {
  return checked_contraction<matmul_plan_for<A, B, OutSpec>, U,
                             front_wording<contraction_front::matmul>>(
      a, b, [](const auto& x, const auto& y) { check_matmul_operands(x, y); });
}

// ts::matmul's backward (transpose) rule, on a traced operand: the forward is matmul_arrays on
// the values (its plan and its rules: accepted exactly where the array call is; batch
// dimensions never move, so sharded over different axes they are an error even with an
// output spec), the backward the einsums of "...ij,...jk->...ik" transposed. Declared here,
// defined in ops/detail/traced_einsum.hpp (included by ops/traced.hpp).
template <class OutSpec, class U, class A, class B>
auto traced_matmul(const A& a, const B& b);

// ts::matmul by its operands' kind: a traced operand's forward and recorded backward, or the
// arrays' plan run.
template <class OutSpec, class U, class A, class B>
auto matmul_any(const A& a, const B& b, source_site loc) {
  const call_site_scope site(loc);
  if constexpr (is_traced_v<A> || is_traced_v<B>)
    return traced_matmul<OutSpec, U>(a, b);
  else
    return matmul_arrays<OutSpec, U>(a, b);
}

}  // namespace detail

// matmul<OutSpec>(a, b, preferred_element<U>): a . b over the last two dimensions, sharded
// by OutSpec (without OutSpec, sharded and possibly unreduced as the plan's rules give), of
// element type U: the operands' own, or float for bfloat16 operands (JAX's
// preferred_element_type: float sums either way, rounded once). Either operand may be a value
// traced by ts::value_and_grad (global_operand). (Blocks inside ts::shard_map:
// array/block_matmul.hpp.)
template <class OutSpec = auto_out, global_operand A, global_operand B, class U>
  requires(spec_like<OutSpec> || std::is_same_v<OutSpec, auto_out>)
[[nodiscard]] auto matmul(const A& a, const B& b, preferred_element_t<U>,
                          detail::source_site loc = detail::source_site::current()) {
  return detail::matmul_any<OutSpec, U>(a, b, loc);
}

// matmul<OutSpec>(a, b): the same, of the operands' element type.
template <class OutSpec = auto_out, global_operand A, global_operand B>
  requires(spec_like<OutSpec> || std::is_same_v<OutSpec, auto_out>)
[[nodiscard]] auto matmul(const A& a, const B& b,
                          detail::source_site loc = detail::source_site::current()) {
  return detail::matmul_any<OutSpec, typename detail::value_t<A>::value_type>(a, b, loc);
}

}  // namespace typeshard
