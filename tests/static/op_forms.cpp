// Every operation on the three kinds of operand: global arrays, blocks inside ts::shard_map and
// values traced by ts::value_and_grad (DESIGN.md: one entry point per op over every operand
// kind). Each op of the list is checked to take all three; an op that lacks a form is listed
// below with the reason, and checked to lack it where that is a plain absence (so adding the
// form fails here until the list is updated).
#include <cstdint>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

namespace {

using mesh = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using A = ts::sharded_array<double, mesh, ts::spec<"x", ts::none>, ts::dextents<2>>;
using B = ts::block<double, 2, mesh, ts::vary<mesh, "x">>;
using T = ts::traced<A>;
using Ids = ts::sharded_array<int, mesh, ts::spec<"y">, ts::dextents<1>>;

// Elementwise, unary and with scalars.
template <class X>
constexpr bool unary_ops = requires(const X& x) {
  -x; x + 1.0; 1.0 + x; x - 1.0; 1.0 - x; x * 2.0; 2.0 * x; x / 2.0; 2.0 / x;
  ts::exp(x); ts::log(x); ts::tanh(x); ts::sin(x); ts::cos(x); ts::sqrt(x); ts::relu(x);
  ts::sigmoid(x); ts::softplus(x); ts::gelu(x); ts::gelu(x, false); ts::rsqrt(x);
  ts::pow(x, 2.0); ts::clip(x, 0.0, 1.0);
  x < 0.0; x <= 0.0; x > 0.0; x >= 0.0; ts::equal(x, 0.0); ts::not_equal(0.0, x);
};
static_assert(unary_ops<A> && unary_ops<B> && unary_ops<T>);

// Elementwise, binary (broadcasting), and where.
template <class X>
constexpr bool binary_ops = requires(const X& x) {
  x + x; x - x; x * x; x / x; ts::pow(x, x);
  x < x; ts::less(x, x); ts::greater_equal(x, x); ts::equal(x, x);
  ts::where(x > 0.0, x, x); ts::where(x > 0.0, x, 0.0); ts::where(x > 0.0, 0.0, x);
};
static_assert(binary_ops<A> && binary_ops<B> && binary_ops<T>);

// Reductions: sum and mean in every form on all three; keep_dims on all three.
template <class X>
constexpr bool sum_mean = requires(const X& x) {
  ts::sum(x); ts::sum<0>(x); ts::sum<1>(x, ts::keep_dims);
  ts::mean(x); ts::mean<-1>(x); ts::mean<0, 1>(x, ts::keep_dims);
};
static_assert(sum_mean<A> && sum_mean<B> && sum_mean<T>);
template <class X>
constexpr bool with_out_spec = requires(const X& x) {
  ts::sum<ts::spec<"x">, 1>(x); ts::mean<ts::spec<"x", ts::none>, 1>(x, ts::keep_dims);
  ts::sum<1>(ts::spec<"x">{}, x); ts::mean<1>(ts::spec<"x", ts::none>{}, x, ts::keep_dims);
};
// An output spec is a global-view notion: a block has no spec (it is one device's data).
static_assert(with_out_spec<A> && with_out_spec<T> && !with_out_spec<B>);

// max and min: all three (on traced values ties share the cotangent, as in JAX); an output
// spec on arrays and traced values.
template <class X>
constexpr bool max_min = requires(const X& x) {
  ts::max(x); ts::max<0>(x, ts::keep_dims); ts::min<1>(x); ts::maximum(x, x); ts::minimum(x, x);
};
static_assert(max_min<A> && max_min<B> && max_min<T>);
template <class X>
constexpr bool max_min_out_spec = requires(const X& x) {
  ts::max<ts::spec<"x">, 1>(x); ts::min<1>(ts::spec<"x", ts::none>{}, x, ts::keep_dims);
};
static_assert(max_min_out_spec<A> && max_min_out_spec<T> && !max_min_out_spec<B>);

// Indices: all three (argmax of a traced value reads its forward value; of a block, local:
// the block's own indices).
template <class X>
constexpr bool arg_extrema = requires(const X& x) {
  ts::argmax<1>(x); ts::argmin<0>(x, ts::keep_dims);
};
static_assert(arg_extrema<A> && arg_extrema<T> && arg_extrema<B>);

// take: a global-view table (array or traced) with global ids; a block with a block of ids
// (the block's own rows, zeros outside them: Megatron's masked lookup).
using BIds = ts::block<int, 1, mesh, ts::vary<mesh, "y">>;
template <class X, class I>
constexpr bool takes = requires(const X& x, const I& ids) { ts::take(x, ids); };
static_assert(takes<A, Ids> && takes<T, Ids> && takes<B, BIds> && !takes<B, Ids>);

// one_hot: of integer arrays and blocks.
template <class I>
constexpr bool one_hots = requires(const I& ids) { ts::one_hot(ids, 4); };
static_assert(one_hots<Ids> && one_hots<BIds>);
static_assert(requires(const B& b) { ts::iota<double, 1>(b.context(), ts::shape<2>{2, 3}); });

// Slices, split and concat: all three (on blocks, the block's own data).
template <class X>
constexpr bool slices = requires(const X& x) {
  ts::slice_in_dim<1>(x, 0, 1); ts::slice_in_dim<0, 0, 1>(x); ts::split<1, 2>(x);
  ts::concat<0>(x, x); ts::concat<1>(x, x, x);
};
static_assert(slices<A> && slices<B> && slices<T>);

// Products: ts::matmul on all three (on blocks the local GEMM).
template <class X>
constexpr bool products = requires(const X& x) { ts::matmul(ts::transpose(x), x); };
static_assert(products<A> && products<B> && products<T>);

// Global-view only (a block is one device's data: inside shard_map the collectives do these):
// ts::reshard, ts::einsum with an output spec, ts::softmax and ts::layer_norm along a sharded
// dimension, ts::permute / split_dim / merge_dims. (ts::iota makes an array from a device
// mesh, or a block from a block's context: ts::iota<T, Dim>(b.context(), extents).)
template <class X>
constexpr bool global_view = requires(const X& x) {
  ts::reshard<ts::spec<>>(x); ts::softmax<1>(x); ts::layer_norm<1>(x); ts::permute<1, 0>(x);
};
static_assert(global_view<A> && global_view<T> && !global_view<B>);

}  // namespace
