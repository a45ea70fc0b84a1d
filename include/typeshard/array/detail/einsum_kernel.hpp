// typeshard/array/detail/einsum_kernel.hpp: one device's local einsum, at GEMM speed: the
// local product of ts::einsum and ts::matmul on arrays (ops/einsum.hpp) and of ts::matmul on
// blocks (array/block_matmul.hpp).
// Internal: do not rely on anything in detail/.
//
// The local blocks are laid out as batched matrices, lhs as [batch, I, J] and rhs as
// [batch, J, K] (batch: the batch letters in output order, I / K: the free letters of lhs /
// rhs in output order, J: the contracting letters in lhs order), and each batch element is
// one kernels::gemm. A block whose rows and columns are each one evenly strided run of it
// (in that order, or transposed) is read in place, at any leading dimension and batch
// strides: a whole block in [batch, I, J] order, or a slice of a contracting or batch letter
// that the plan left pending (an operand holding all of J reading the other's block of it,
// as a matmul's GEMM reads A[:, j0:j1] with lda = J). Otherwise one strided copy permutes
// it, and that copy also adds up a summed letter (one operand only, not in the output). The
// product [batch, I, K] is written straight into the output block when the output's letter
// order is that one (or [batch, K, I]: the product with the operands swapped), else permuted
// into it by one more copy.
#pragma once

#include <array>
#include <cstddef>

#include "copy_box.hpp"
#include "../../core/config.hpp"
#include "../../core/layout.hpp"
#include "buffer.hpp"
#include "../../kernels/gemm.hpp"
#include "../../plan/detail/einsum_subscripts.hpp"

namespace typeshard::detail {

// An operand's extents padded to R with trailing 1s (the plan rank: trailing extent-1
// dimensions leave a row-major block as it is).
template <std::size_t R, std::size_t N>
shape<R> padded_shape(const shape<N>& s) {
  shape<R> out{};
  for (std::size_t d = 0; d < R; ++d) out[d] = d < N ? s[d] : 1;
  return out;
}

// Where every dimension of lhs, rhs and the output goes in the batched-matrix layout.
template <std::size_t R>
struct einsum_gemm_layout {
  std::size_t nb = 1, ni = 1, nj = 1, nk = 1;
  std::array<std::size_t, R> a{};  // lhs strides in [b, i, j]
  std::array<std::size_t, R> b{};  // rhs strides in [b, j, k]
  std::array<std::size_t, R> c{};         // output strides in [b, i, k]
};

// The layout for the local extents of lhs (a_loc) and rhs (b_loc).
template <std::size_t R>
einsum_gemm_layout<R> einsum_layout_of(const einsum_equation& eq, const shape<R>& a_loc,
                                       const shape<R>& b_loc) {
  einsum_gemm_layout<R> g;
  auto extent = [&](char x) { return eq.in_lhs(x) ? a_loc[eq.lhs_dim(x)] : b_loc[eq.rhs_dim(x)]; };
  // Each group's letters, and each letter's stride within its group.
  std::array<std::size_t, 128> in_group{};
  auto group = [&](const char* letters, std::size_t n, einsum_role role, std::size_t& size) {
    size = 1;
    for (std::size_t k = n; k-- > 0;) {
      const char x = letters[k];
      if (eq.role(x) != role) continue;
      in_group[static_cast<unsigned char>(x)] = size;
      size *= extent(x);
    }
  };
  group(eq.out.data(), eq.out_rank, einsum_role::batch, g.nb);
  group(eq.out.data(), eq.out_rank, einsum_role::lhs_free, g.ni);
  group(eq.out.data(), eq.out_rank, einsum_role::rhs_free, g.nk);
  group(eq.lhs.data(), eq.lhs_rank, einsum_role::contracting, g.nj);
  auto s = [&](char x) { return in_group[static_cast<unsigned char>(x)]; };
  // An operand's (or the output's) strides in its layout [batch][outer][inner], n_outer x
  // n_inner per batch element; a summed letter keeps stride 0 (its values are added up).
  auto strides = [&](const char* letters, std::size_t n, einsum_role outer, std::size_t n_outer,
                     einsum_role inner, std::size_t n_inner, std::array<std::size_t, R>& out) {
    for (std::size_t d = 0; d < n; ++d) {
      const char x = letters[d];
      const einsum_role role = eq.role(x);
      if (role == einsum_role::batch) out[d] = s(x) * n_outer * n_inner;
      else if (role == outer) out[d] = s(x) * n_inner;
      else if (role == inner) out[d] = s(x);
    }
  };
  strides(eq.lhs.data(), eq.lhs_rank, einsum_role::lhs_free, g.ni, einsum_role::contracting,
          g.nj, g.a);
  strides(eq.rhs.data(), eq.rhs_rank, einsum_role::contracting, g.nj, einsum_role::rhs_free,
          g.nk, g.b);
  strides(eq.out.data(), eq.out_rank, einsum_role::lhs_free, g.ni, einsum_role::rhs_free, g.nk,
          g.c);
  return g;
}

// Whether a row-major array of extents `ext` has the strides `want` (dimensions of extent 1
// may have any stride).
template <std::size_t R>
bool has_strides(const shape<R>& ext, const std::array<std::size_t, R>& want) {
  const auto st = strides_of(ext);
  for (std::size_t d = 0; d < R; ++d)
    if (ext[d] > 1 && st[d] != want[d]) return false;
  return true;
}

// dst[sum_d i_d * dst_stride[d]] (+)= src[row-major index of origin + i in src_shape], for
// every i in the box `box`. With a zero stride (a summed letter), the values add up
// (dst must be zeroed first).
template <class T, std::size_t R>
void strided_copy(const T* src, const shape<R>& src_shape, const shape<R>& origin,
                  const shape<R>& box, T* dst, const std::array<std::size_t, R>& dst_stride,
                  bool add) {
  for (std::size_t e : box)
    if (e == 0) return;
  const auto ss = strides_of(src_shape);
  std::array<std::size_t, R> i{};
  const std::size_t inner = box[R - 1], ds = dst_stride[R - 1];
  while (true) {
    std::size_t so = 0, dof = 0;
    for (std::size_t d = 0; d + 1 < R; ++d) {
      so += (origin[d] + i[d]) * ss[d];
      dof += i[d] * dst_stride[d];
    }
    const T* s = src + so + origin[R - 1];
    T* t = dst + dof;
    if (add)
      for (std::size_t k = 0; k < inner; ++k) t[k * ds] += s[k];
    else
      for (std::size_t k = 0; k < inner; ++k) t[k * ds] = s[k];
    if (!next_row(i, box)) return;
  }
}

// dst (row-major over `box`) = src[sum_d i_d * src_stride[d]]: the product [b, i, k] read
// into the output's letter order, one inner loop per output row.
template <class T, std::size_t R>
void strided_read(const T* src, const std::array<std::size_t, R>& src_stride, const shape<R>& box,
                  T* dst) {
  for (std::size_t e : box)
    if (e == 0) return;
  std::array<std::size_t, R> i{};
  const std::size_t inner = box[R - 1], ss = src_stride[R - 1];
  while (true) {
    std::size_t so = 0;
    for (std::size_t d = 0; d + 1 < R; ++d) so += i[d] * src_stride[d];
    const T* s = src + so;
    for (std::size_t k = 0; k < inner; ++k) dst[k] = s[k * ss];
    dst += inner;
    if (!next_row(i, box)) return;
  }
}

// One operand as the GEMM reads it: a matrix per batch element, rows x cols with leading
// dimension ld (transposed: stored cols x rows), batch element t at data + offset(t). In
// place in the held block where its letters allow (see gemm_operand_of), else a packed copy.
template <class T, std::size_t R>
struct gemm_operand {
  const T* data = nullptr;
  bool transposed = false;
  std::size_t ld = 0;
  std::size_t batch_dims = 0;                                // batch letters of extent > 1,
  std::array<std::size_t, R> batch_stride{}, batch_extent{};  // in output order
  buffer<T> packed;

  std::size_t offset(std::size_t t) const {
    std::size_t at = 0;
    for (std::size_t k = batch_dims; k-- > 0;) {
      at += t % batch_extent[k] * batch_stride[k];
      t /= batch_extent[k];
    }
    return at;
  }
};

// One operand's dimensions by group, each in the order the layout flattens it: batch and
// free letters in output order, contracting letters in lhs order.
template <std::size_t R>
struct operand_groups {
  std::array<std::size_t, R> batch{}, free{}, contracting{};
  std::size_t nb = 0, nf = 0, nc = 0;
};
template <std::size_t R>
operand_groups<R> operand_groups_of(const einsum_equation& eq, bool lhs) {
  operand_groups<R> g;
  auto dim = [&](char x) { return lhs ? eq.lhs_dim(x) : eq.rhs_dim(x); };
  const einsum_role free_role = lhs ? einsum_role::lhs_free : einsum_role::rhs_free;
  for (std::size_t o = 0; o < eq.out_rank; ++o) {
    const char x = eq.out[o];
    if (eq.role(x) == einsum_role::batch) g.batch[g.nb++] = dim(x);
    if (eq.role(x) == free_role) g.free[g.nf++] = dim(x);
  }
  for (std::size_t l = 0; l < eq.lhs_rank; ++l)
    if (eq.role(eq.lhs[l]) == einsum_role::contracting) g.contracting[g.nc++] = dim(eq.lhs[l]);
  return g;
}

inline constexpr std::size_t any_stride = static_cast<std::size_t>(-1);
inline constexpr std::size_t no_stride = static_cast<std::size_t>(-2);

// The one stride a group of dimensions (`dims`, slowest first) flattens to in a block of
// row-major strides `held` read at the box `want`: any_stride when the box holds one element
// of the group, no_stride when its dimensions are not one evenly strided run.
template <std::size_t R>
std::size_t group_stride(const std::array<std::size_t, R>& held, const shape<R>& want,
                         const std::array<std::size_t, R>& dims, std::size_t n) {
  std::size_t stride = any_stride, inner = 1;
  for (std::size_t k = n; k-- > 0;) {
    const std::size_t d = dims[k];
    if (want[d] == 1) continue;
    if (stride == any_stride)
      stride = held[d];
    else if (held[d] != stride * inner)
      return no_stride;
    inner *= want[d];
  }
  return stride;
}

// Prepares an operand whose block (extents have_shape) is read at the box `want` from
// `origin`. lhs: rows are I, cols J; rhs: rows J, cols K. Read in place, the block's own
// strides serving as the GEMM's leading dimension and batch strides, when no letter is
// summed and the row letters and the column letters each form one evenly strided run, one
// of stride 1 (the columns; the rows: read transposed). So an operand that holds all of a
// contracting or batch letter and reads the other's block of it (a pending slice) needs no
// copy, as a whole block laid out [b, i, j] needs none. Else one strided copy packs it into
// [b, rows, cols] (`strides`: the layout's), adding up summed letters.
template <class T, std::size_t R>
gemm_operand<T, R> gemm_operand_of(const einsum_equation& eq, bool lhs, const T* data,
                                   const shape<R>& have_shape, const shape<R>& origin,
                                   const shape<R>& want, const std::array<std::size_t, R>& strides,
                                   bool sums, std::size_t nb, std::size_t rows, std::size_t cols) {
  gemm_operand<T, R> g;
  if (!sums) {
    const auto held = strides_of(have_shape);
    const operand_groups<R> gr = operand_groups_of<R>(eq, lhs);
    const std::size_t row = lhs ? group_stride(held, want, gr.free, gr.nf)
                                : group_stride(held, want, gr.contracting, gr.nc);
    const std::size_t col = lhs ? group_stride(held, want, gr.contracting, gr.nc)
                                : group_stride(held, want, gr.free, gr.nf);
    const bool normal = (col == any_stride || col == 1) && row != no_stride &&
                        (row == any_stride || row >= cols);
    const bool transposed = !normal && (row == any_stride || row == 1) && col != no_stride &&
                            (col == any_stride || col >= rows);
    if (normal || transposed) {
      std::size_t at = 0;
      for (std::size_t d = 0; d < R; ++d) at += origin[d] * held[d];
      g.data = data + at;
      g.transposed = transposed;
      g.ld = normal ? (row == any_stride ? cols : row) : (col == any_stride ? rows : col);
      for (std::size_t k = 0; k < gr.nb; ++k) {
        const std::size_t d = gr.batch[k];
        if (want[d] == 1) continue;
        g.batch_stride[g.batch_dims] = held[d];
        g.batch_extent[g.batch_dims++] = want[d];
      }
      return g;
    }
  }
  const std::size_t elements = nb * rows * cols;
  g.packed = buffer<T>(elements);
  if (sums)
    for (std::size_t e = 0; e < elements; ++e) g.packed.data()[e] = T(0);
  strided_copy(data, have_shape, origin, want, g.packed.data(), strides, sums);
  g.data = g.packed.data();
  g.ld = cols;
  g.batch_dims = 1;
  g.batch_stride[0] = rows * cols;
  g.batch_extent[0] = nb;
  return g;
}

// The local product of one device: lhs block (a_data, laid out by a_have, read at the box
// a_want from a_origin), rhs likewise, into `out` (the output block, extents c_loc). C: the
// result's element type, T's, or float for bfloat16 operands (preferred_element).
template <class T, std::size_t R, class C = T>
void local_einsum(const einsum_equation& eq, const T* a_data, const shape<R>& a_have,
                  const shape<R>& a_origin, const shape<R>& a_want, const T* b_data,
                  const shape<R>& b_have, const shape<R>& b_origin, const shape<R>& b_want, C* out,
                  const shape<R>& c_loc) {
  const einsum_gemm_layout<R> g = einsum_layout_of<R>(eq, a_want, b_want);
  std::size_t c_count = 1;
  for (std::size_t e : c_loc) c_count *= e;
  if (c_count == 0) return;
  bool a_sums = false, b_sums = false;
  for (std::size_t l = 0; l < eq.lhs_rank; ++l)
    a_sums = a_sums || eq.role(eq.lhs[l]) == einsum_role::lhs_summed;
  for (std::size_t r = 0; r < eq.rhs_rank; ++r)
    b_sums = b_sums || eq.role(eq.rhs[r]) == einsum_role::rhs_summed;
  // An output laid out [b, k, i] (e.g. the weight gradient "bh,bd->dh") is the product
  // with the operands swapped, C^T = B^T A^T, written in place: no transposing copy.
  std::array<std::size_t, R> c_swapped{};
  for (std::size_t o = 0; o < eq.out_rank; ++o) {
    const einsum_role role = eq.role(eq.out[o]);
    c_swapped[o] = role == einsum_role::lhs_free   ? g.c[o] / g.nk
                   : role == einsum_role::rhs_free ? g.c[o] * g.ni
                                                   : g.c[o];
  }
  const bool direct_out = has_strides(c_loc, g.c);
  const bool swapped_out = !direct_out && has_strides(c_loc, c_swapped);
  buffer<C> c_tmp(direct_out || swapped_out ? 0 : c_count);
  C* c = direct_out || swapped_out ? out : c_tmp.data();
  // kernels::gemm for C == T; bfloat16 operands into float C: gemm_bf16.
  const auto gemm = [](auto&&... args) {
    if constexpr (std::is_same_v<C, T>)
      kernels::gemm<T>(args...);
    else
      kernels::gemm_bf16(args...);
  };
  if (g.nj == 0) {
    for (std::size_t e = 0; e < c_count; ++e) c[e] = C(0);
  } else {
    const gemm_operand<T, R> a = gemm_operand_of<T, R>(eq, true, a_data, a_have, a_origin,
                                                       a_want, g.a, a_sums, g.nb, g.ni, g.nj);
    const gemm_operand<T, R> b = gemm_operand_of<T, R>(eq, false, b_data, b_have, b_origin,
                                                       b_want, g.b, b_sums, g.nb, g.nj, g.nk);
    if (swapped_out) {
      const kernels::gemm_ops swapped{!b.transposed, !a.transposed};
      for (std::size_t t = 0; t < g.nb; ++t)
        gemm(g.nk, g.ni, g.nj, b.data + b.offset(t), b.ld, a.data + a.offset(t), a.ld,
             c + t * g.ni * g.nk, g.ni, false, swapped);
    } else {
      const kernels::gemm_ops ops{a.transposed, b.transposed};
      for (std::size_t t = 0; t < g.nb; ++t)
        gemm(g.ni, g.nk, g.nj, a.data + a.offset(t), a.ld, b.data + b.offset(t), b.ld,
             c + t * g.ni * g.nk, g.nk, false, ops);
    }
  }
  if (!direct_out && !swapped_out) strided_read(c, g.c, c_loc, out);
}

#if defined(TYPESHARD_SEPARATE_COMPILATION)
// With the separately compiled runtime (core/config.hpp), the local einsum of the common
// element types and ranks is compiled once, in typeshard::runtime, not in every TU.
#define TYPESHARD_LOCAL_EINSUM_INSTANCE(prefix, T, R)                                          \
  prefix void local_einsum<T, R>(const einsum_equation&, const T*, const shape<R>&,            \
                                 const shape<R>&, const shape<R>&, const T*, const shape<R>&,  \
                                 const shape<R>&, const shape<R>&, T*, const shape<R>&);
#define TYPESHARD_EINSUM_LAYOUT_INSTANCE(prefix, R)                                            \
  prefix einsum_gemm_layout<R> einsum_layout_of<R>(const einsum_equation&, const shape<R>&,    \
                                                   const shape<R>&);
TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(TYPESHARD_LOCAL_EINSUM_INSTANCE, extern template)
TYPESHARD_FOR_RUNTIME_RANKS(TYPESHARD_EINSUM_LAYOUT_INSTANCE, extern template)
#endif

}  // namespace typeshard::detail
