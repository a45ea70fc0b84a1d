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
// same device mesh, leading dimensions being batch dimensions sharded alike (seed 004's
// 8 x 4096 x 4096 batch with the batch sharded). The plan (matmul_plan.hpp) is chosen at
// compile time; here it runs as ONE multi-device operation: each device reshards its
// operand blocks (the collectives of reshard_plan), multiplies its blocks with
// kernels::gemm (an operand holding all of J is read in place at the other's J block),
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

#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backend/backend.hpp"
#include "../detail/buffer.hpp"
#include "../core/detail/diagnose.hpp"
#include "../plan/detail/matmul_planner.hpp"
#include "../core/detail/spec_layout.hpp"
#include "../array/device_mesh.hpp"
#include "../core/errors.hpp"
#include "../core/extents.hpp"
#include "../kernels/gemm.hpp"
#include "../plan/matmul_plan.hpp"
#include "reshard.hpp"
#include "../array/sharded_array.hpp"

namespace typeshard {

namespace detail {

// The local GEMM of one device: C0 block = A block . B block, per batch element. The
// operand that holds all of J (slice_lhs / slice_rhs) is read at the other's J block.
template <class T, class Mesh, std::size_t Rank>
void local_matmul(const matmul_choice<Rank>& c, std::size_t p, const T* a, const shape<Rank>& a_global,
                  const T* b, const shape<Rank>& b_global, T* out, const shape<Rank>& out_local) {
  using D = matmul_dims<Rank>;
  const shape<Rank> a_loc = local_shape_of<Mesh>(c.lhs_gemm, a_global, p);
  const shape<Rank> b_loc = local_shape_of<Mesh>(c.rhs_gemm, b_global, p);
  std::size_t batches = 1;
  for (std::size_t d = 0; d < D::batch; ++d) batches *= out_local[d];
  const std::size_t m = out_local[D::out_i], n = out_local[D::out_k];
  if (batches == 0 || m == 0 || n == 0) return;
  const std::size_t lda = a_loc[D::lhs_j], ldb = b_loc[D::rhs_k];
  std::size_t k = a_loc[D::lhs_j], a_offset = 0, b_offset = 0;
  if (c.slice_lhs) {  // A holds all of J: read columns [start, start + k) of it
    k = b_loc[D::rhs_j];
    a_offset = index_of<Mesh>(c.rhs_gemm, b_global, p)[D::rhs_j].start;
  } else if (c.slice_rhs) {  // B holds all of J: read rows [start, start + k) of it
    b_offset = index_of<Mesh>(c.lhs_gemm, a_global, p)[D::lhs_j].start * ldb;
  }
  const std::size_t a_stride = a_loc[D::lhs_i] * a_loc[D::lhs_j];
  const std::size_t b_stride = b_loc[D::rhs_j] * b_loc[D::rhs_k];
  for (std::size_t t = 0; t < batches; ++t) {
    const T* at = k ? a + t * a_stride + a_offset : nullptr;
    const T* bt = k ? b + t * b_stride + b_offset : nullptr;
    kernels::gemm<T>(m, n, k, at, lda, bt, ldb, out + t * m * n, n);
  }
}

template <std::size_t Rank>
std::span<const reshard_step<Rank>> steps_span(const step_list<Rank>& l) {
  return {l.steps.data(), l.count};
}

// Runs a matmul plan on every addressable device of `m`: returns the result's blocks by
// mesh position (laid out by c.out, unreduced over c.out_unreduced). One instantiation per
// (T, Mesh, Rank): the plan is a value, so tests can run plans chosen at run time.
// a_blocks[p] / b_blocks[p]: the operands' blocks at position p, sharded by c.lhs / c.rhs.
template <class T, class Mesh, std::size_t Rank>
std::vector<buffer<T>> run_matmul(const matmul_choice<Rank>& c, const device_mesh<Mesh>& m,
                                  const std::vector<std::span<const T>>& a_blocks,
                                  const shape<Rank>& a_global,
                                  const std::vector<std::span<const T>>& b_blocks,
                                  const shape<Rank>& b_global) {
  using D = matmul_dims<Rank>;
  shape<Rank> c_global = a_global;
  c_global[D::out_k] = b_global[D::rhs_k];
  // The even or uneven variant of each reshard, for these extents (as ts::reshard decides).
  const step_list<Rank> a_steps = lhs_steps<Mesh>(c, a_global);
  const step_list<Rank> b_steps = rhs_steps<Mesh>(c, b_global);
  step_list<Rank> c_steps;
  if (c.out_named) c_steps = out_steps<Mesh>(c, c_global);

  std::vector<buffer<T>> out(Mesh::size);
  backend& bk = m.get_backend();
  for_each_position(m, [&](std::size_t p) {
    buffer<T> a_own, b_own;
    const T* a = a_blocks[p].data();
    const T* b = b_blocks[p].data();
    if (a_steps.count) {
      a_own = run_steps_on<T, Mesh, Rank>(bk, p, a, a_global, c.lhs, steps_span(a_steps));
      a = a_own.data();
    }
    if (b_steps.count) {
      b_own = run_steps_on<T, Mesh, Rank>(bk, p, b, b_global, c.rhs, steps_span(b_steps));
      b = b_own.data();
    }
    const shape<Rank> c_loc = local_shape_of<Mesh>(c.local, c_global, p);
    buffer<T> c0(host_tensor<T, Rank>::element_count(c_loc));
    local_matmul<T, Mesh, Rank>(c, p, a, a_global, b, b_global, c0.data(), c_loc);
    a_own = {};  // free the gathered operands before the output's collectives
    b_own = {};
    if (c_steps.count)
      out[p] = run_steps_on<T, Mesh, Rank>(bk, p, c0.data(), c_global, c.local, steps_span(c_steps));
    else
      out[p] = std::move(c0);
  });
  return out;
}

// The checks only run time can make: same devices, equal J and batch extents.
template <class A, class B>
void check_matmul_operands(const A& a, const B& b) {
  constexpr std::size_t R = A::rank;
  if (!(a.device_mesh() == b.device_mesh()))
    throw device_mesh_error("typeshard: matmul: the operands live on different devices: " +
                            a.device_mesh().to_string() + " and " + b.device_mesh().to_string() +
                            "; move one with ts::reshard(x, mesh) or device_put it on the "
                            "other's mesh");
  if (a.extent(R - 1) != b.extent(R - 2))
    throw shape_error("typeshard: matmul: lhs has " + std::to_string(a.extent(R - 1)) +
                      " columns (J, its last dimension) but rhs has " +
                      std::to_string(b.extent(R - 2)) +
                      " rows (J, its second-to-last); A[..., I, J] . B[..., J, K] needs them "
                      "equal: pass operands of matching inner extent");
  for (std::size_t d = 0; d + 2 < R; ++d)
    if (a.extent(d) != b.extent(d))
      throw shape_error("typeshard: matmul: batch dimension " + std::to_string(d) + " has extent " +
                        std::to_string(a.extent(d)) + " in lhs but " + std::to_string(b.extent(d)) +
                        " in rhs; batched operands need the same batch extents");
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

template <class A, class B>
constexpr bool check_matmul_arrays() {
  using a_t = std::remove_cvref_t<A>;
  using b_t = std::remove_cvref_t<B>;
  if constexpr (!std::is_same_v<typename a_t::mesh_type, typename b_t::mesh_type>) {
    return require<false, diagnostic::matmul_meshes_differ<typename a_t::mesh_type,
                                                           typename b_t::mesh_type>>::value &&
           false;
  } else if constexpr (!std::is_same_v<typename a_t::value_type, typename b_t::value_type>) {
    return require<false, diagnostic::matmul_element_types_differ<typename a_t::value_type,
                                                                  typename b_t::value_type>>::value &&
           false;
  } else {
    return true;
  }
}

}  // namespace detail

// matmul<OutSpec>(a, b): a . b over the last two dimensions, sharded by OutSpec; without
// OutSpec, sharded (and possibly unreduced) as the plan's rules give.
template <class OutSpec = auto_out, sharded_array_type A, sharded_array_type B>
  requires(spec_type<OutSpec> || std::is_same_v<OutSpec, auto_out>)
auto matmul(const A& a, const B& b) {
  if constexpr (!detail::check_matmul_arrays<A, B>()) {
    return a;  // the diagnostic fired; stop here so nothing cascades
  } else {
    using plan = matmul_plan_for<A, B, OutSpec>;
    if constexpr (!plan::valid) {
      return a;  // the plan's diagnostic fired
    } else {
      using T = typename A::value_type;
      using Mesh = typename A::mesh_type;
      constexpr std::size_t R = A::rank;
      using result = sharded_array<
          T, Mesh, typename plan::out_spec,
          typename detail::matmul_out_extents<typename A::extents_type,
                                              typename B::extents_type>::type,
          typename plan::out_unreduced>;
      detail::check_matmul_operands(a, b);
      std::vector<std::span<const T>> a_blocks(Mesh::size), b_blocks(Mesh::size);
      for (std::size_t p = 0; p < Mesh::size; ++p) {
        a_blocks[p] = a.local_data(p);
        b_blocks[p] = b.local_data(p);
      }
      shape<R> c_global = a.extents();
      c_global[R - 1] = b.extent(R - 1);
      return result(adopt_shards, a.device_mesh(), c_global,
                    detail::run_matmul<T, Mesh, R>(plan::choice, a.device_mesh(), a_blocks,
                                                   a.extents(), b_blocks, b.extents()));
    }
  }
}

}  // namespace typeshard
