// typeshard/array/block_matmul.hpp: ts::matmul of two blocks inside ts::shard_map, the local
// product (C[..., m, n] = A[..., m, k] . B[..., k, n]), either operand possibly a
// ts::transpose view (array/block.hpp) that the GEMM reads in place. As on arrays, the
// product is the einsum of matmul's subscripts (detail::matmul_subscripts): one device's
// local einsum (detail/einsum_kernel.hpp) on the blocks as stored.
//
// Local: no communication. The collectives around it are the program's own, so a contraction
// over a sharded dimension leaves a partial sum on each device to psum or psum_scatter. Rule 2
// checks the operands' element types, meshes and ranks (one diagnostic at most); extents are
// checked at run time (a ts::shape_error names both shapes, a view's marked "(transposed)").
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "block.hpp"
#include "../core/config.hpp"
#include "detail/buffer.hpp"
#include "../core/detail/diagnose.hpp"
#include "../core/errors.hpp"
#include "host_tensor.hpp"
#include "../kernels/gemm.hpp"
#include "../plan/detail/einsum_subscripts.hpp"
#include "detail/einsum_kernel.hpp"
#include "../core/rules/rule2_matmul.hpp"

namespace typeshard {

namespace detail {

// The block an operand stores its elements in: the block, or the one a view refers to.
template <class X>
const auto& stored_block(const X& x) {
  if constexpr (transposed_block<X>)
    return x.base();
  else
    return x;
}

// block_product's failures, out of line: functions of values, one copy per TU (not a
// message built in every product of block types). An operand's shape reads "(5, 3)", or
// "(5, 3) (transposed)" for a view.
[[noreturn]] TYPESHARD_COLD inline void throw_batch_extents_differ(std::size_t d, std::size_t a,
                                                                 std::size_t b) {
  throw shape_error("typeshard: matmul of blocks: batch dimension " + std::to_string(d) +
                    " has extents " + std::to_string(a) + " and " + std::to_string(b) +
                    "; batch extents must be equal");
}
[[noreturn]] TYPESHARD_COLD inline void throw_contracting_extents_differ(
    std::span<const std::size_t> a, bool a_transposed, std::span<const std::size_t> b,
    bool b_transposed, std::size_t k, std::size_t kb) {
  throw shape_error("typeshard: matmul of blocks of shapes " + shape_string(a) +
                    (a_transposed ? " (transposed)" : "") + " and " + shape_string(b) +
                    (b_transposed ? " (transposed)" : "") + ": contracting extents " +
                    std::to_string(k) + " and " + std::to_string(kb) + " differ");
}

}  // namespace detail

// ---- local matmul ------------------------------------------------------------------------

namespace detail {

// The product of ts::matmul(block, block) once its operands are known to fit. float, double
// and bfloat16: the local einsum of "...xy,...yz->...xz" on the stored blocks (a transposed
// view's letters swapped, a rank-2 rhs without batch letters: one GEMM of all the batch's
// rows); other element types: the kernels' reference loop per batch element.
template <class A, class B>
auto block_product(const A& a, const B& b) {
  using arr_a = std::remove_cvref_t<A>;
  using arr_b = std::remove_cvref_t<B>;
  using T = typename arr_a::value_type;
  constexpr std::size_t R = arr_a::rank;
  constexpr std::size_t RB = arr_b::rank;
  constexpr bool ta = transposed_block<A>, tb = transposed_block<B>;
  const std::size_t m = a.extent(R - 2), k = a.extent(R - 1);
  const std::size_t kb = b.extent(RB - 2), n = b.extent(RB - 1);
  std::size_t batch = 1;
  for (std::size_t d = 0; d + 2 < R; ++d) {
    batch *= a.extent(d);
    if (RB == R && a.extent(d) != b.extent(d))
      detail::throw_batch_extents_differ(d, a.extent(d), b.extent(d));
  }
  if (k != kb) detail::throw_contracting_extents_differ(a.extents(), ta, b.extents(), tb, k, kb);
  shape<R> out_shape = a.extents();
  out_shape[R - 1] = n;
  detail::buffer<T> c(host_tensor<T, R>::element_count(out_shape));
  const T* a_data = detail::stored_block(a).data();
  const T* b_data = detail::stored_block(b).data();
  if constexpr (is_gemm_element_v<T>) {  // bfloat16: float sums, rounded once
    constexpr einsum_equation eq = matmul_equation<R, RB, ta, tb>();
    const shape<R> as = padded_shape<R>(detail::stored_block(a).extents());
    const shape<R> bs = padded_shape<R>(detail::stored_block(b).extents());
    local_einsum<T, R>(eq, a_data, as, shape<R>{}, as, b_data, bs, shape<R>{}, bs, c.data(),
                       out_shape);
  } else {
    // Row strides as stored: a transposed A is stored k x m, a transposed B n x k.
    const std::size_t lda = ta ? m : k, ldb = tb ? k : n;
    const std::size_t b_stride = RB == R ? k * n : 0;
    for (std::size_t i = 0; i < batch; ++i)
      kernels::detail::gemm_naive(m, n, k, a_data + i * m * k, ta ? 1 : lda, ta ? lda : 1,
                                  b_data + i * b_stride, tb ? 1 : ldb, tb ? ldb : 1,
                                  c.data() + i * m * n, n, false);
  }
  return block<T, R, typename arr_a::mesh_type, arr_a::varying | arr_b::varying>(
      a.context(), out_shape, std::move(c));
}

}  // namespace detail

// matmul(a, b): the local product of two blocks, C[..., m, n] = A[..., m, k] . B[..., k, n]
// (leading batch dimensions of equal extents, or b of rank 2 shared by every batch). It
// varies over the union of the operands' axes. No communication: inside shard_map the
// collectives are the program's own (a contraction over a sharded dimension gives each
// device a partial sum; psum or psum_scatter it). float and double use kernels::gemm.
// Either operand may be a transposed view of a rank-2 block, ts::transpose(x): the product
// reads it in place (kernels::gemm's trans flags), and extents, checks and messages are the
// transposed ones.
template <class A, class B>
  requires((block_like<A> || transposed_block<A>) && (block_like<B> || transposed_block<B>))
[[nodiscard]] auto matmul(const A& a, const B& b) {
  using arr_a = std::remove_cvref_t<A>;
  using arr_b = std::remove_cvref_t<B>;
  using T = typename arr_a::value_type;
  constexpr std::size_t R = arr_a::rank;
  // One diagnostic at most, then stop: a second error (from detail::block_product on
  // operands it cannot take) would only repeat the first (docs/rules.md: one error per
  // mistake).
  if constexpr (!std::is_same_v<T, typename arr_b::value_type>) {
    static_assert(detail::require<false, diagnostic::block_matmul_element_types_differ<
                                             T, typename arr_b::value_type>>::value);
    return a;
  } else if constexpr (!std::is_same_v<typename arr_a::mesh_type, typename arr_b::mesh_type>) {
    static_assert(detail::require<false, diagnostic::block_matmul_meshes_differ<
                                             typename arr_a::mesh_type,
                                             typename arr_b::mesh_type>>::value);
    return a;
  } else if constexpr (!(R >= 2 && (arr_b::rank == 2 || arr_b::rank == R))) {
    static_assert(
        detail::require<false, diagnostic::block_matmul_ranks_unsupported<R, arr_b::rank>>::value);
    return a;
  } else {
    return detail::block_product(a, b);
  }
}

}  // namespace typeshard
