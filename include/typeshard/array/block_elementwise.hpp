// typeshard/array/block_elementwise.hpp: ts::map and ts::zip of blocks inside ts::shard_map, the
// two element-wise primitives every named block operation is built on (ops/elementwise.hpp
// defines + - * /, ts::exp, ts::maximum, ... once for arrays and blocks on top of them).
//
// Local: no communication. map's result varies over its operand's axes, zip's over the union
// of both operands' (rule 4); zip's operands must share the mesh and rank (rule 5, one
// diagnostic) and broadcast as NumPy's (y - mu of a [b, O] and a [1, O] block: each
// dimension of equal extents or of extent 1 in one operand, else a ts::shape_error naming
// both shapes).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "block.hpp"
#include "../core/config.hpp"
#include "detail/buffer.hpp"
#include "../core/detail/diagnose.hpp"
#include "../core/errors.hpp"
#include "../core/rules/rule5_elementwise.hpp"

namespace typeshard {

namespace detail {

template <class B, class R, std::uint64_t V>
using retyped_block =
    block<R, std::remove_cvref_t<B>::rank, typename std::remove_cvref_t<B>::mesh_type, V>;

[[noreturn]] TYPESHARD_COLD inline void throw_block_shapes_differ(std::span<const std::size_t> a,
                                                                std::span<const std::size_t> b,
                                                                const char* op) {
  throw shape_error(std::string("typeshard: ") + op + " of blocks of shapes " + shape_string(a) +
                    " and " + shape_string(b) +
                    ": elementwise operations on blocks broadcast as NumPy's (each dimension "
                    "of equal extents, or of extent 1 in one operand); fix: reduce a "
                    "dimension to extent 1 with ts::keep_dims (ts::mean<0>(b, ts::keep_dims)), "
                    "or give the blocks equal shapes");
}

// The extents of a broadcast of blocks of extents a and b (equal rank), or a shape_error.
template <std::size_t Rank>
shape<Rank> block_broadcast_shape(const shape<Rank>& a, const shape<Rank>& b, const char* op) {
  shape<Rank> r{};
  for (std::size_t d = 0; d < Rank; ++d) {
    if (a[d] != b[d] && a[d] != 1 && b[d] != 1) throw_block_shapes_differ(a, b, op);
    r[d] = a[d] == 1 ? b[d] : a[d];
  }
  return r;
}

// out[i] = f(x[ix], y[iy]) over the row-major result of extents r, x and y of extents xs and
// ys (equal to r's or 1: a stride of 0 stretches). The innermost dimension is a plain loop.
template <std::size_t Rank, class R, class T1, class T2, class F>
void broadcast_block_loop(const T1* x, const shape<Rank>& xs, const T2* y, const shape<Rank>& ys,
                          const shape<Rank>& r, R* out, F f) {
  std::size_t n = 1;
  for (std::size_t d = 0; d < Rank; ++d) n *= r[d];
  if (n == 0) return;
  std::array<std::size_t, Rank> sx{}, sy{}, idx{};
  for (std::size_t d = Rank, px = 1, py = 1; d-- > 0;) {
    sx[d] = xs[d] == 1 ? 0 : px;
    sy[d] = ys[d] == 1 ? 0 : py;
    px *= xs[d];
    py *= ys[d];
  }
  const std::size_t len = r[Rank - 1], ix = sx[Rank - 1], iy = sy[Rank - 1];
  std::size_t ox = 0, oy = 0;
  for (std::size_t i = 0; i < n; i += len) {
    for (std::size_t k = 0; k < len; ++k) out[i + k] = f(x[ox + k * ix], y[oy + k * iy]);
    for (std::size_t d = Rank - 1; d-- > 0;) {
      ox += sx[d];
      oy += sy[d];
      if (++idx[d] < r[d]) break;
      ox -= sx[d] * r[d];
      oy -= sy[d] * r[d];
      idx[d] = 0;
    }
  }
}

template <class A, class F>
auto map_block(const A& a, F f) {
  using arr = std::remove_cvref_t<A>;
  using R = std::invoke_result_t<F&, const typename arr::value_type&>;
  buffer<R> out(a.size());
  const auto* in = a.data();
  for (std::size_t i = 0; i < out.size(); ++i) out.data()[i] = f(in[i]);
  return retyped_block<A, R, arr::varying>(a.context(), a.extents(), std::move(out));
}

template <class A, class B, class F>
auto zip_blocks(const A& a, const B& b, F f, const char* op) {
  using arr_a = std::remove_cvref_t<A>;
  using arr_b = std::remove_cvref_t<B>;
  constexpr bool ok =
      std::is_same_v<typename arr_a::mesh_type, typename arr_b::mesh_type> &&
      arr_a::rank == arr_b::rank;
  static_assert(detail::require<ok, diagnostic::block_operands_differ<arr_a, arr_b>>::value);
  if constexpr (!ok) {
    (void)b, (void)f, (void)op;
    return a;  // the diagnostic fired; stop here so nothing cascades
  } else {
    using R = std::invoke_result_t<F&, const typename arr_a::value_type&,
                                   const typename arr_b::value_type&>;
    using result = retyped_block<A, R, arr_a::varying | arr_b::varying>;
    if constexpr (arr_a::rank != 0) {  // rank-0 blocks always have equal extents
      if (a.extents() != b.extents()) {
        const auto r = block_broadcast_shape(a.extents(), b.extents(), op);
        buffer<R> out(host_tensor<R, arr_a::rank>::element_count(r));
        broadcast_block_loop(a.data(), a.extents(), b.data(), b.extents(), r, out.data(), f);
        return result(a.context(), r, std::move(out));
      }
    }
    buffer<R> out(a.size());
    const auto* x = a.data();
    const auto* y = b.data();
    for (std::size_t i = 0; i < out.size(); ++i) out.data()[i] = f(x[i], y[i]);
    return result(a.context(), a.extents(), std::move(out));
  }
}

}  // namespace detail

// ---- elementwise operations on blocks (local, no communication) ---------------------------

// map(b, f) / zip(a, b, f): f per element; zip's result varies over both operands' axes.
// The named operations (+ - * /, ts::exp, ts::maximum, ...) are defined once for arrays and
// blocks in ops/elementwise.hpp, on these two.
template <block_like B, class F>
[[nodiscard]] auto map(const B& b, F f) {
  return detail::map_block(b, f);
}
template <block_like A, block_like B, class F>
[[nodiscard]] auto zip(const A& a, const B& b, F f) {
  return detail::zip_blocks(a, b, f, "zip");
}

}  // namespace typeshard
