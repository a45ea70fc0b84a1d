// typeshard/ops/matmul.hpp: the sharded matrix product (DESIGN rule 2), run on the devices.
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
// batch sharded). The plan (matmul_plan.hpp) is chosen at
// compile time; here it runs as ONE multi-device operation: each device reshards its
// operand blocks (the collectives of reshard_plan), multiplies its blocks with
// kernels::gemm (an operand holding all of J, or of a batch dimension the other shards, is
// read in place at the other's block),
// and reduces / reshards the product when an output spec is named. Without one, a result
// unreduced over some axes keeps them in its type (reduce it with ts::reshard<Spec>).
//
// An operand may be a partial sum (unreduced over some axes, rule 3): matmul is linear in
// each operand, so the product is a partial sum over those axes too (reduced when an output
// spec is named), provided the other operand neither shards nor is partial over them.
//
// Run-time checks (dynamic extents): equal J and batch extents (shape_error), the same
// device mesh (device_mesh_error).
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backend/backend.hpp"
#include "../core/config.hpp"
#include "../detail/buffer.hpp"
#include "../core/detail/diagnose.hpp"
#include "../plan/detail/einsum_planner.hpp"
#include "../plan/detail/matmul_planner.hpp"
#include "../core/detail/spec_layout.hpp"
#include "../array/device_mesh.hpp"
#include "../core/detail/message.hpp"
#include "../core/errors.hpp"
#include "../core/extents.hpp"
#include "../kernels/gemm.hpp"
#include "../plan/matmul_plan.hpp"
#include "detail/executor.hpp"
#include "detail/operand_types.hpp"
#include "../array/sharded_array.hpp"
#include "../core/rules/rule2_matmul.hpp"

namespace typeshard {

namespace detail {

// Takes the pending slices of x except along the batch dimensions and dimension `keep`
// (which the GEMM reads in place): one copy, and only when some other dimension is sliced.
template <class T, std::size_t Rank>
void take_slices_except(const mesh_value& mv, std::size_t p, operand_block<T, Rank>& x,
                        std::size_t keep) {
  spec_array<Rank> others = x.spec;
  for (std::size_t d = 0; d < Rank; ++d)
    if (d + 2 < Rank || d == keep) others[d] = x.held[d];
  if (others == x.held) return;
  const spec_array<Rank> wanted = x.spec;
  x.spec = others;
  take_slices<T, Rank>(mv, p, x);
  x.spec = wanted;
}

// Where an operand block's matrices are read in place: the offset of its slice's first
// element (along J and the batch dimensions) and the held block's stride per batch dimension.
template <std::size_t Rank>
struct matmul_reads {
  std::size_t offset = 0;
  std::array<std::size_t, Rank> batch_stride{};
};
template <class T, std::size_t Rank>
matmul_reads<Rank> matmul_reads_of(const mesh_value& mv, std::size_t p,
                                   const operand_block<T, Rank>& x, std::size_t j) {
  const shape<Rank> held = local_shape_of(mv, x.held, x.global, p);
  const index_slices<Rank> want = index_of(mv, x.spec, x.global, p);
  const index_slices<Rank> have = index_of(mv, x.held, x.global, p);
  matmul_reads<Rank> r;
  std::size_t stride = held[Rank - 2] * held[Rank - 1];
  r.offset = (want[j].start - have[j].start) * (j == Rank - 1 ? 1 : held[Rank - 1]);
  for (std::size_t d = Rank - 2; d-- > 0;) {
    r.batch_stride[d] = stride;
    r.offset += (want[d].start - have[d].start) * stride;
    stride *= held[d];
  }
  return r;
}

// The local GEMM of one device: C0 block = A block . B block, per batch element. An operand
// sliced along J or a batch dimension (the one that holds all of it, sliced to the other's
// blocks) is read at its slice in place. C: the result's element type, T's, or float for
// bfloat16 operands (matmul's preferred_element).
template <class T, std::size_t Rank, class C = T>
void local_matmul(const mesh_value& mv, std::size_t p, operand_block<T, Rank>& a,
                  operand_block<T, Rank>& b, C* out, const shape<Rank>& out_local) {
  using D = matmul_dims<Rank>;
  take_slices_except<T, Rank>(mv, p, a, D::lhs_j);
  take_slices_except<T, Rank>(mv, p, b, D::rhs_j);
  const shape<Rank> a_loc = local_shape_of(mv, a.held, a.global, p);
  const shape<Rank> b_loc = local_shape_of(mv, b.held, b.global, p);
  std::size_t batches = 1;
  for (std::size_t d = 0; d < D::batch; ++d) batches *= out_local[d];
  const std::size_t m = out_local[D::out_i], n = out_local[D::out_k];
  if (batches == 0 || m == 0 || n == 0) return;
  const std::size_t lda = a_loc[D::lhs_j], ldb = b_loc[D::rhs_k];
  const std::size_t k = local_shape_of(mv, a.spec, a.global, p)[D::lhs_j];
  const matmul_reads<Rank> ar = matmul_reads_of(mv, p, a, D::lhs_j);
  const matmul_reads<Rank> br = matmul_reads_of(mv, p, b, D::rhs_j);
  for (std::size_t t = 0; t < batches; ++t) {
    std::size_t a_at = ar.offset, b_at = br.offset, rest = t;
    for (std::size_t d = D::batch; d-- > 0;) {
      a_at += rest % out_local[d] * ar.batch_stride[d];
      b_at += rest % out_local[d] * br.batch_stride[d];
      rest /= out_local[d];
    }
    const T* at = k ? a.data + a_at : nullptr;
    const T* bt = k ? b.data + b_at : nullptr;
    if constexpr (std::is_same_v<C, T>)
      kernels::gemm<T>(m, n, k, at, lda, bt, ldb, out + t * m * n, n);
    else
      kernels::gemm_bf16(m, n, k, at, lda, bt, ldb, out + t * m * n, n);
  }
}

// Runs a matmul plan on the devices of a mesh (`devices`, by mesh position, on backend `bk`):
// returns the result's blocks by mesh position (laid out by c.out, unreduced over
// c.out_unreduced). The steps are matmul_steps_of's for these extents (what
// matmul_plan::steps lists), run by the one executor: the operands' steps in T, the GEMM
// writing C (T, or float for bfloat16 operands: matmul's preferred_element), the result's
// steps in C. One instantiation per (T, Rank, C), whatever the mesh (a value,
// core/detail/mesh_value.hpp), compiled once in typeshard::runtime for the common ones: the
// plan is a value, so tests can run plans chosen at run time. a_blocks[p] / b_blocks[p]: the
// operands' blocks at position p, sharded by c.lhs / c.rhs.
template <class T, std::size_t Rank, class C = T>
std::vector<buffer<C>> run_matmul_on(const matmul_choice<Rank>& c, backend& bk,
                                     std::span<const device_id> devices, const mesh_value& mv,
                                     const std::vector<std::span<const T>>& a_blocks,
                                     const shape<Rank>& a_global,
                                     const std::vector<std::span<const T>>& b_blocks,
                                     const shape<Rank>& b_global) {
  using D = matmul_dims<Rank>;
  using block = operand_block<T, Rank>;
  constexpr auto lhs = static_cast<std::size_t>(step_operand::lhs);
  constexpr auto rhs = static_cast<std::size_t>(step_operand::rhs);
  shape<Rank> c_global = a_global;
  c_global[D::out_k] = b_global[D::rhs_k];
  const matmul_step_list<Rank> list =
      matmul_steps_of(mv, c, matmul_shapes<Rank>{a_global, b_global, sizeof(T)});
  const product_steps<Rank> steps = split_at_product(steps_span(list));

  std::vector<buffer<C>> out(mv.size);
  bk.run(devices, [&](std::size_t p) {
    std::array<block, 4> x;
    x[lhs] = block(a_blocks[p].data(), c.lhs, a_global);
    x[rhs] = block(b_blocks[p].data(), c.rhs, b_global);
    run_steps<T, Rank>(bk, mv, p, steps.before, std::span<block>(x), [](auto) {});
    const shape<Rank> c_loc = local_shape_of(mv, c.local, c_global, p);
    const std::size_t c_count = host_tensor<C, Rank>::element_count(c_loc);
    buffer<C> c0(c_count);
    {
      const std::size_t k = local_shape_of(mv, x[lhs].spec, a_global, p)[D::lhs_j];
      const backend::kernel_slot slot = bk.acquire_kernel_slot(c_count * k);
      local_matmul<T, Rank, C>(mv, p, x[lhs], x[rhs], c0.data(), c_loc);
    }
    x[lhs] = block{};  // free the gathered operands before the result's collectives
    x[rhs] = block{};
    out[p] = run_result_steps<C, Rank>(bk, mv, p, steps.after, std::move(c0), c.local, c_global);
  });
  return out;
}

// A matmul's run on two arrays' blocks, on values: one instantiation per element types and
// rank, whatever the meshes, specs and plans (the plan's choice is a value too).
template <class T, std::size_t R, class C = T>
TYPESHARD_NOINLINE std::vector<buffer<C>> matmul_blocks(
    const matmul_choice<R>& c, backend& bk, std::span<const device_id> devices,
    const mesh_value& mv, const std::vector<buffer<T>>& a, const shape<R>& a_global,
    const std::vector<buffer<T>>& b, const shape<R>& b_global) {
  std::vector<std::span<const T>> a_blocks(a.size()), b_blocks(b.size());
  for (std::size_t p = 0; p < a.size(); ++p) {
    a_blocks[p] = a[p].span();
    b_blocks[p] = b[p].span();
  }
  return run_matmul_on<T, R, C>(c, bk, devices, mv, a_blocks, a_global, b_blocks, b_global);
}

#if defined(TYPESHARD_SEPARATE_COMPILATION)
// With the separately compiled runtime (core/config.hpp), compiled once in typeshard::runtime.
#define TYPESHARD_RUN_MATMUL_INSTANCE(prefix, T, R)                                            \
  prefix std::vector<buffer<T>> run_matmul_on<T, R>(                                           \
      const matmul_choice<R>&, backend&, std::span<const device_id>, const mesh_value&,        \
      const std::vector<std::span<const T>>&, const shape<R>&,                                 \
      const std::vector<std::span<const T>>&, const shape<R>&);                               \
  prefix std::vector<buffer<T>> matmul_blocks<T, R>(                                           \
      const matmul_choice<R>&, backend&, std::span<const device_id>, const mesh_value&,        \
      const std::vector<buffer<T>>&, const shape<R>&, const std::vector<buffer<T>>&,           \
      const shape<R>&);
#define TYPESHARD_FOR_RUN_MATMUL_INSTANCES(X, prefix)                                          \
  X(prefix, float, 2) X(prefix, float, 3) X(prefix, float, 4)                                  \
  X(prefix, double, 2) X(prefix, double, 3) X(prefix, double, 4)
TYPESHARD_FOR_RUN_MATMUL_INSTANCES(TYPESHARD_RUN_MATMUL_INSTANCE, extern template)
#endif

// The same on device mesh m.
template <class T, class Mesh, std::size_t Rank>
std::vector<buffer<T>> run_matmul(const matmul_choice<Rank>& c, const device_mesh<Mesh>& m,
                                  const std::vector<std::span<const T>>& a_blocks,
                                  const shape<Rank>& a_global,
                                  const std::vector<std::span<const T>>& b_blocks,
                                  const shape<Rank>& b_global) {
  return run_matmul_on<T, Rank>(c, m.get_backend(), std::span<const device_id>(m.devices()),
                                mesh_value_of<Mesh>(), a_blocks, a_global, b_blocks, b_global);
}

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

// The result's extents: batch and I from lhs, K from rhs, static where either side is.
template <class LE, class RE, class = std::make_index_sequence<LE::rank>>
struct matmul_out_extents;
template <class LE, class RE, std::size_t... D>
struct matmul_out_extents<LE, RE, std::index_sequence<D...>> {
  static constexpr std::size_t R = LE::rank;
  static constexpr std::size_t pick(std::size_t d) {
    if (d == R - 1) return RE::static_extents[R - 1];
    if (d == R - 2) return LE::static_extents[R - 2];
    return LE::static_extents[d] != dyn ? LE::static_extents[d] : RE::static_extents[d];
  }
  using type = extents<pick(D)...>;
};

}  // namespace detail

// matmul<OutSpec>(a, b, preferred_element<U>): a . b over the last two dimensions, sharded
// by OutSpec (without OutSpec, sharded and possibly unreduced as the plan's rules give), of
// element type U: the operands' own, or float for bfloat16 operands (JAX's
// preferred_element_type: float sums either way, rounded once).
template <class OutSpec = auto_out, sharded_array_type A, sharded_array_type B, class U>
  requires(spec_type<OutSpec> || std::is_same_v<OutSpec, auto_out>)
[[nodiscard]] auto matmul(const A& a, const B& b, preferred_element_t<U>,
                          detail::source_site loc = detail::source_site::current()) {
  const detail::call_site_scope site(loc);
  using T = typename A::value_type;
  if constexpr (!std::is_same_v<T, U> &&
                (!std::is_same_v<T, bfloat16> || !std::is_same_v<U, float>)) {
    static_assert(
        detail::require<false, diagnostic::matmul_preferred_element_unsupported<T, U>>::value);
    return a;  // the diagnostic fired
  } else if constexpr (!detail::check_operand_types<A, B, diagnostic::matmul_meshes_differ,
                                                     diagnostic::matmul_element_types_differ>()) {
    return a;  // the diagnostic fired; stop here so nothing cascades
  } else {
    using plan = matmul_plan_for<A, B, OutSpec>;
    if constexpr (!plan::valid) {
      return a;  // the plan's diagnostic fired
    } else {
      using Mesh = typename A::mesh_type;
      constexpr std::size_t R = A::rank;
      using result = sharded_array<
          U, Mesh, typename plan::out_spec,
          typename detail::matmul_out_extents<typename A::extents_type,
                                              typename B::extents_type>::type,
          typename plan::out_unreduced>;
      detail::check_matmul_operands(a, b);
      shape<R> c_global = a.extents();
      c_global[R - 1] = b.extent(R - 1);
      const device_mesh<Mesh>& m = a.device_mesh();
      return result(adopt_shards, m, c_global,
                    detail::matmul_blocks<T, R, U>(
                        plan::choice, m.get_backend(), std::span<const device_id>(m.devices()),
                        detail::mesh_value_of<Mesh>(), *a.shared_shards(), a.extents(),
                        *b.shared_shards(), b.extents()));
    }
  }
}

// matmul<OutSpec>(a, b): the same, of the operands' element type.
template <class OutSpec = auto_out, sharded_array_type A, sharded_array_type B>
  requires(spec_type<OutSpec> || std::is_same_v<OutSpec, auto_out>)
[[nodiscard]] auto matmul(const A& a, const B& b, detail::source_site loc = detail::source_site::current()) {
  return matmul<OutSpec>(a, b, preferred_element<typename A::value_type>, loc);
}

}  // namespace typeshard
