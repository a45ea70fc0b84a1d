// typeshard/array/block_elementwise.hpp: ts::map and ts::zip of blocks inside ts::shard_map, the
// two element-wise primitives every named block operation is built on (ops/elementwise.hpp
// defines + - * /, ts::exp, ts::maximum, ... once for arrays and blocks on top of them).
//
// Local: no communication. map's result varies over its operand's axes, zip's over the union
// of both operands' (rule 4); zip's operands must share the mesh and rank (rule 5, one
// diagnostic) and, at run time, the shape (a ts::shape_error names both shapes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "block.hpp"
#include "../core/config.hpp"
#include "../detail/buffer.hpp"
#include "../core/detail/diagnose.hpp"
#include "../core/errors.hpp"
#include "../core/rules/rule5_elementwise.hpp"

namespace typeshard {

namespace detail {

template <class B, class R, std::uint64_t V>
using block_like = block<R, std::remove_cvref_t<B>::rank, typename std::remove_cvref_t<B>::mesh_type, V>;

[[noreturn]] TYPESHARD_COLD inline void throw_block_shapes_differ(std::span<const std::size_t> a,
                                                                std::span<const std::size_t> b,
                                                                const char* op) {
  throw shape_error(std::string("typeshard: ") + op + " of blocks of shapes " + shape_string(a) +
                    " and " + shape_string(b) +
                    "; elementwise operations on blocks need equal shapes");
}

// The message is built out of line (above): one copy per TU, not per pair of block types.
template <class A, class B>
void check_same_block_shape(const A& a, const B& b, const char* op) {
  if (a.extents() != b.extents()) throw_block_shapes_differ(a.extents(), b.extents(), op);
}

template <class A, class F>
auto map_block(const A& a, F f) {
  using arr = std::remove_cvref_t<A>;
  using R = std::invoke_result_t<F&, const typename arr::value_type&>;
  buffer<R> out(a.size());
  const auto* in = a.data();
  for (std::size_t i = 0; i < out.size(); ++i) out.data()[i] = f(in[i]);
  return block_like<A, R, arr::varying>(a.context(), a.extents(), std::move(out));
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
    check_same_block_shape(a, b, op);
    using R = std::invoke_result_t<F&, const typename arr_a::value_type&,
                                   const typename arr_b::value_type&>;
    buffer<R> out(a.size());
    const auto* x = a.data();
    const auto* y = b.data();
    for (std::size_t i = 0; i < out.size(); ++i) out.data()[i] = f(x[i], y[i]);
    return block_like<A, R, arr_a::varying | arr_b::varying>(a.context(), a.extents(),
                                                             std::move(out));
  }
}

}  // namespace detail

// ---- elementwise operations on blocks (local, no communication) ---------------------------

// map(b, f) / zip(a, b, f): f per element; zip's result varies over both operands' axes.
// The named operations (+ - * /, ts::exp, ts::maximum, ...) are defined once for arrays and
// blocks in ops/elementwise.hpp, on these two.
template <block_type B, class F>
auto map(const B& b, F f) {
  return detail::map_block(b, f);
}
template <block_type A, block_type B, class F>
auto zip(const A& a, const B& b, F f) {
  return detail::zip_blocks(a, b, f, "zip");
}

}  // namespace typeshard
