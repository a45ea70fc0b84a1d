// typeshard/ops/einsum.hpp: the sharded einsum of two arrays (DESIGN rule 2, per letter), run
// on the devices.
//
//   auto Y = ts::einsum<"bsd,df->bsf">(X, W);      // X: spec<"x", none, none>, W: spec<none, "y">
//   static_assert(std::is_same_v<decltype(Y)::spec, ts::spec<"x", ts::none, "y">>);
//   auto S = ts::einsum<"bhqd,bhkd->bhqk">(Q, K);  // attention scores, heads sharded alike
//   auto U = ts::einsum<"ij,jk->ik">(A, B);         // J over "x" in both: unreduced<"x">
//   auto R = ts::einsum<"ij,jk->ik", ts::spec<"x", ts::none>>(A, B);   // ... psum_scatter'd
//   using plan = ts::einsum_plan_for<"ij,jk->ik", decltype(A), decltype(B)>;
//   static_assert(ts::einsum_valid<"ij,jk->ik", decltype(A), decltype(B)>);
//
// Letters name dimensions: a letter in both operands and the output is a batch letter, in
// both operands only a contracting letter, in one operand and the output a free letter, in
// one operand only a summed letter (summed locally; the result is unreduced over its axes
// when it is sharded). An empty output ("i,i->") gives a rank-0 array, as jnp.einsum does
// (unreduced over the contracted letters' axes, as ts::sum<> is); an operand may be rank 0
// (",i->i": a scaling). The plan
// (plan/einsum_plan.hpp) is chosen at compile time and runs as ONE multi-device operation,
// as ts::matmul's does: the operands' collectives, the local product (each device lays its
// blocks out as batched matrices and calls kernels::gemm, see array/detail/einsum_kernel.hpp),
// then the output's reduction when an output spec is named. Without one, a result unreduced
// over some axes keeps them in its type (reduce it with ts::reshard<Spec>).
//
// An operand may be a partial sum (unreduced, rule 3): the product is linear in each
// operand, so the result is a partial sum over those axes too, provided the other operand
// neither shards nor is partial over them.
//
// Run-time checks (dynamic extents): a letter's extents equal in both operands
// (shape_error), the same device mesh (device_mesh_error).
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../array/detail/einsum_kernel.hpp"
#include "../array/device_mesh.hpp"
#include "../array/sharded_array.hpp"
#include "../backend/backend.hpp"
#include "../core/config.hpp"
#include "../core/detail/message.hpp"
#include "../core/errors.hpp"
#include "../core/extents.hpp"
#include "../core/rules/rule2_einsum.hpp"
#include "../array/detail/buffer.hpp"
#include "../plan/detail/einsum_planner.hpp"
#include "../plan/detail/einsum_steps.hpp"
#include "../plan/einsum_plan.hpp"
#include "detail/executor.hpp"
#include "detail/forward_value.hpp"
#include "detail/operand_types.hpp"

namespace typeshard {

namespace detail {

// Runs an einsum plan on the devices of a mesh (`devices`, by mesh position, on backend
// `bk`); returns the result's blocks by mesh position (laid out by c.out, unreduced over
// c.out_unreduced). Shapes are padded to the plan rank R with 1s. The one executor runs the
// plan's steps, the local product (step `local_gemm`, contraction 0: `eq`) among them: the
// operands' steps run in T, the product writes C (T, or float for bfloat16 operands: einsum's
// preferred_element), the result's steps run in C. One instantiation per (T, R, C), whatever
// the mesh (a value, core/detail/mesh_value.hpp), compiled once in typeshard::runtime for the
// common ones: the equation and the plan are values, so tests can run plans chosen at run
// time.
template <class T, std::size_t R, class C = T>
std::vector<buffer<C>> run_einsum_on(const einsum_equation& eq, const einsum_choice<R>& c,
                                     backend& bk, std::span<const device_id> devices,
                                     const mesh_value& mv,
                                     const std::vector<std::span<const T>>& a_blocks,
                                     const shape<R>& a_global,
                                     const std::vector<std::span<const T>>& b_blocks,
                                     const shape<R>& b_global) {
  constexpr auto lhs = static_cast<std::size_t>(step_operand::lhs);
  constexpr auto rhs = static_cast<std::size_t>(step_operand::rhs);
  const einsum_step_list<R> list =
      einsum_steps_of(mv, eq, c, einsum_shapes<R>{a_global, b_global, sizeof(T)});
  const std::span<const step<R>> steps = steps_span(list);
  const step_payloads payloads{std::span<const einsum_equation>(&eq, 1), {}};  // contraction 0

  std::vector<buffer<C>> out(mv.size);
  bk.run(devices, [&](std::size_t p) {
    device_state<T, R, C> st;
    st.in[lhs] = operand_block<T, R>(a_blocks[p].data(), c.lhs, a_global);
    st.in[rhs] = operand_block<T, R>(b_blocks[p].data(), c.rhs, b_global);
    run_steps<T, R, C, contraction_kernels>(bk, mv, p, steps, st, payloads);
    take_slices<C, R>(mv, p, st.out);
    out[p] = std::move(st.out.owned);
  });
  return out;
}

// The same on two arrays' blocks: one instantiation per element types and rank, whatever
// the meshes, specs and subscripts.
template <class T, std::size_t R, class C = T>
TYPESHARD_NOINLINE std::vector<buffer<C>> einsum_blocks(
    const einsum_equation& eq, const einsum_choice<R>& c, backend& bk,
    std::span<const device_id> devices, const mesh_value& mv, const std::vector<buffer<T>>& a,
    const shape<R>& a_global, const std::vector<buffer<T>>& b, const shape<R>& b_global) {
  std::vector<std::span<const T>> a_blocks(a.size()), b_blocks(b.size());
  for (std::size_t p = 0; p < a.size(); ++p) {
    a_blocks[p] = a[p].span();
    b_blocks[p] = b[p].span();
  }
  return run_einsum_on<T, R, C>(eq, c, bk, devices, mv, a_blocks, a_global, b_blocks,
                                b_global);
}

#if defined(TYPESHARD_SEPARATE_COMPILATION)
// With the separately compiled runtime (core/config.hpp), compiled once in typeshard::runtime.
#define TYPESHARD_RUN_EINSUM_INSTANCE(prefix, T, R)                                            \
  prefix std::vector<buffer<T>> run_einsum_on<T, R>(                                           \
      const einsum_equation&, const einsum_choice<R>&, backend&, std::span<const device_id>,   \
      const mesh_value&, const std::vector<std::span<const T>>&, const shape<R>&,              \
      const std::vector<std::span<const T>>&, const shape<R>&);                               \
  prefix std::vector<buffer<T>> einsum_blocks<T, R>(                                           \
      const einsum_equation&, const einsum_choice<R>&, backend&, std::span<const device_id>,   \
      const mesh_value&, const std::vector<buffer<T>>&, const shape<R>&,                       \
      const std::vector<buffer<T>>&, const shape<R>&);
TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(TYPESHARD_RUN_EINSUM_INSTANCE, extern template)
#endif

// The same on device mesh m.
template <class T, class Mesh, std::size_t R>
std::vector<buffer<T>> run_einsum(const einsum_equation& eq, const einsum_choice<R>& c,
                                  const device_mesh<Mesh>& m,
                                  const std::vector<std::span<const T>>& a_blocks,
                                  const shape<R>& a_global,
                                  const std::vector<std::span<const T>>& b_blocks,
                                  const shape<R>& b_global) {
  return run_einsum_on<T, R>(eq, c, m.get_backend(), std::span<const device_id>(m.devices()),
                             mesh_value_of<Mesh>(), a_blocks, a_global, b_blocks, b_global);
}

// check_einsum_operands's failure, out of line: a function of values, one copy per TU
// (deferred, core/config.hpp: compiled only by a TU that runs an einsum).
TYPESHARD_DEFERRED
[[noreturn]] TYPESHARD_COLD inline void throw_einsum_extent_mismatch(std::string_view subscripts,
                                                                  char letter, std::size_t l,
                                                                  std::size_t a, std::size_t r,
                                                                  std::size_t b) {
  throw shape_error(message({"typeshard: einsum ", subscripts, ": letter '",
                             std::string_view(&letter, 1), "' has extent ", a,
                             " in lhs (dimension ", l, ") but ", b, " in rhs (dimension ", r,
                             "); a letter names one dimension: pass operands whose extents "
                             "agree"}));
}

// Each letter's extents equal, on values: one copy per TU.
TYPESHARD_DEFERRED
TYPESHARD_NOINLINE inline void check_einsum_extents(const einsum_equation& eq,
                                                    std::string_view subscripts,
                                                    std::span<const std::size_t> a,
                                                    std::span<const std::size_t> b) {
  for (std::size_t l = 0; l < eq.lhs_rank; ++l) {
    const std::size_t r = eq.rhs_dim(eq.lhs[l]);
    if (r < eq.rhs_rank && a[l] != b[r])
      throw_einsum_extent_mismatch(subscripts, eq.lhs[l], l, a[l], r, b[r]);
  }
}

// The checks only run time can make: same devices, each letter's extents equal.
template <einsum_subscripts S, class A, class B>
void check_einsum_operands(const A& a, const B& b) {
  check_same_device_mesh(a.device_mesh(), b.device_mesh(), "einsum",
                         "device_put both on one device mesh");
  check_einsum_extents(equation_of<S>, S.view(), a.extents(), b.extents());
}

// The result's extents: each output letter's, static where either operand's is; extents<> for
// an empty output.
template <einsum_subscripts S, class LE, class RE,
          class = std::make_index_sequence<equation_of<S>.result_rank()>>
struct einsum_out_extents;
template <einsum_subscripts S, class LE, class RE, std::size_t... D>
struct einsum_out_extents<S, LE, RE, std::index_sequence<D...>> {
  static constexpr std::size_t pick(std::size_t d) {
    constexpr einsum_equation eq = equation_of<S>;
    const char x = eq.out[d];
    const std::size_t l = eq.lhs_dim(x), r = eq.rhs_dim(x);
    if (l < eq.lhs_rank && LE::static_extents[l] != dyn) return LE::static_extents[l];
    if (r < eq.rhs_rank) return RE::static_extents[r];
    return dyn;
  }
  using type = extents<pick(D)...>;
};

// The result of the contraction of arrays a and b by plan Plan (an einsum_plan, or a
// matmul_plan: S is then matmul_subscripts) once their run-time checks passed, of element
// type U: the plan's one run (run_einsum_on) on their blocks, padded to the plan rank.
template <einsum_subscripts S, class Plan, class U, class A, class B>
auto contraction_result(const A& a, const B& b) {
  using T = typename A::value_type;
  using Mesh = typename A::mesh_type;
  constexpr std::size_t R = Plan::rank;
  constexpr std::size_t OR = equation_of<S>.result_rank();
  constexpr einsum_equation eq = equation_of<S>;
  using result = sharded_array<
      U, Mesh, typename Plan::out_spec,
      typename einsum_out_extents<S, typename A::extents_type, typename B::extents_type>::type,
      typename Plan::out_unreduced>;
  const shape<R> ag = padded_shape<R>(a.extents());
  const shape<R> bg = padded_shape<R>(b.extents());
  const shape<R> cg = einsum_out_shape(eq, einsum_shapes<R>{ag, bg, sizeof(T)});
  shape<OR> c_global{};
  for (std::size_t d = 0; d < OR; ++d) c_global[d] = cg[d];
  const device_mesh<Mesh>& m = a.device_mesh();
  return result(adopt_shards, m, c_global,
                einsum_blocks<T, R, U>(eq, Plan::choice, m.get_backend(),
                                       std::span<const device_id>(m.devices()),
                                       mesh_value_of<Mesh>(), *a.shared_shards(), ag,
                                       *b.shared_shards(), bg));
}

// A front end's wording of rule 2 on its operands: its three diagnostics (operand_types.hpp).
template <template <class, class> class PreferredUnsupported,
          template <class, class> class MeshesDiffer,
          template <class, class> class ElementTypesDiffer>
struct operand_wording {
  template <class A, class B, class U>
  static constexpr bool check() {
    return check_contraction_operands<A, B, U, PreferredUnsupported, MeshesDiffer,
                                      ElementTypesDiffer>();
  }
};
// front_wording<F>: the operand_wording of front end F (einsum's here, matmul's in matmul.hpp).
enum class contraction_front { einsum, matmul };
template <contraction_front F>
struct front_wording;
template <>
struct front_wording<contraction_front::einsum>
    : operand_wording<diagnostic::einsum_preferred_element_unsupported,
                      diagnostic::einsum_meshes_differ, diagnostic::einsum_element_types_differ> {
};

// The one body of the array contractions' entries (ts::einsum, and ts::matmul, its front
// end): the operands' rule-2 checks in the front end's Wording, then Plan's (an einsum_plan or
// a matmul_plan: Plan::subscripts() names the contraction), then the run-time checks
// `check_operands(a, b)` (a generic lambda: instantiated only once the checks passed), then
// the contraction. After a diagnostic it returns `a`, so nothing cascades.
template <class Plan, class U, class Wording, class A, class B, class Check>
auto checked_contraction(const A& a, const B& b, Check check_operands) {
  if constexpr (!Wording::template check<A, B, U>()) {
    return a;  // the diagnostic fired
  } else if constexpr (!Plan::valid) {
    return a;  // the plan's diagnostic fired
  } else {
    check_operands(a, b);
    return contraction_result<Plan::subscripts(), Plan, U>(a, b);
  }
}

// ts::einsum's plan on arrays a and b: rule 2 in einsum's words, the plan, the run-time checks,
// the run (checked_contraction).
template <einsum_subscripts S, class OutSpec, class U, class A, class B>
auto einsum_arrays(const A& a, const B& b) {
  return checked_contraction<einsum_plan_for<S, A, B, OutSpec>, U,
                             front_wording<contraction_front::einsum>>(
      a, b, [](const auto& x, const auto& y) { check_einsum_operands<S>(x, y); });
}

// ts::einsum's backward (transpose) rule, on a traced operand: the forward is einsum_arrays on
// the values, each operand's cotangent the einsum with the transposed equation. Declared here,
// defined in ops/detail/traced_einsum.hpp, which ops/traced.hpp (where traced values come
// from) includes.
template <einsum_subscripts S, class OutSpec, class U, class A, class B>
auto traced_einsum(const A& a, const B& b);

// ts::einsum by its operands' kind: a traced operand's forward and recorded backward, or the
// arrays' plan run.
template <einsum_subscripts S, class OutSpec, class U, class A, class B>
auto einsum_any(const A& a, const B& b, source_site loc) {
  const call_site_scope site(loc);
  if constexpr (is_traced_v<A> || is_traced_v<B>)
    return traced_einsum<S, OutSpec, U>(a, b);
  else
    return einsum_arrays<S, OutSpec, U>(a, b);
}

}  // namespace detail

// einsum<Subscripts, OutSpec>(a, b, preferred_element<U>): the contraction Subscripts names,
// sharded by OutSpec (without OutSpec, sharded and possibly unreduced as the plan's rules
// give), of element type U: the operands' own, or float for bfloat16 operands (JAX's
// preferred_element_type). Either operand may be a value traced by ts::value_and_grad
// (global_operand): the forward is the arrays' plan, the backward recorded.
template <einsum_subscripts Subscripts, class OutSpec = auto_out, global_operand A,
          global_operand B, class U>
  requires(spec_like<OutSpec> || std::is_same_v<OutSpec, auto_out>)
[[nodiscard]] auto einsum(const A& a, const B& b, preferred_element_t<U>,
                          detail::source_site loc = detail::source_site::current()) {
  return detail::einsum_any<Subscripts, OutSpec, U>(a, b, loc);
}

// einsum<Subscripts, OutSpec>(a, b): the same, of the operands' element type.
template <einsum_subscripts Subscripts, class OutSpec = auto_out, global_operand A,
          global_operand B>
  requires(spec_like<OutSpec> || std::is_same_v<OutSpec, auto_out>)
[[nodiscard]] auto einsum(const A& a, const B& b,
                          detail::source_site loc = detail::source_site::current()) {
  return detail::einsum_any<Subscripts, OutSpec, typename detail::value_t<A>::value_type>(a, b,
                                                                                          loc);
}

}  // namespace typeshard
