// typeshard/ops/elementwise.hpp: elementwise operations, run per shard in parallel.
//
//   auto y = ts::sin(x);              // same spec as x, no communication
//   auto z = x + y;                   // x: spec<"x", none> [B, D], y: the same
//   auto b = x + bias;                // bias: spec<none> [D]: broadcast, no communication
//   auto u = 1 - x;  auto v = 2 / x;  // scalars on either side of + - * /
//   auto w = ts::map(x, [](float v) { return v * v + 1; });
//
// Every device computes its own shard, replicas included, as JAX does. Rule 5: binary
// operands broadcast as NumPy's do (detail/broadcast.hpp: trailing dimensions aligned,
// extent 1 stretches); a dimension sharded in one operand and whole in the other needs no
// communication (each device reads its slice of the whole one); sharded over different
// axes is a compile error that suggests ts::reshard. Operands of one layout and shape take
// the plain loop of old. The same device mesh is needed (else a device_mesh_error naming
// both). Rule 3: on a value unreduced over some axis only linear operations compile
// (negation, scaling by a scalar, adding or subtracting a value unreduced over the same
// axes); adding a scalar to one is not linear (it would add it once per partial sum).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../detail/buffer.hpp"
#include "../core/detail/diagnose.hpp"
#include "../core/bfloat16.hpp"
#include "../core/errors.hpp"
#include "../array/block.hpp"
#include "../array/device_mesh.hpp"
#include "../array/block_elementwise.hpp"
#include "../array/sharded_array.hpp"
#include "../kernels/functors.hpp"
#include "../kernels/vector_math.hpp"
#include "../core/rules/rule3_unreduced.hpp"
#include "../core/rules/rule5_elementwise.hpp"
#include "detail/broadcast.hpp"

namespace typeshard {

namespace detail {

// The run-time loops below take the blocks, the mesh and the specs as values: templates of
// the element types, ranks and f only, so an operation instantiates them once for every
// mesh, spec and extents of a program (f is a functor of kernels/functors.hpp, the same
// type wherever the operation is used), kept out of line (TYPESHARD_NOINLINE).

// out[p][i] = f(in[p][i]) on the device of every mesh position (kernels::map_elements: a
// vector loop for the functors that have one).
template <class R, class T, class F>
TYPESHARD_NOINLINE std::vector<buffer<R>> map_blocks_on(backend& b,
                                                        std::span<const device_id> devices,
                                                        const std::vector<buffer<T>>& in, F f) {
  std::vector<buffer<R>> out(in.size());
  b.run(devices, [&](std::size_t p) {
    const std::span<const T> x = in[p].span();
    buffer<R> r(x.size());
    kernels::map_elements(f, x.data(), r.data(), x.size());
    out[p] = std::move(r);
  });
  return out;
}

// out[p][i] = f(x[p][i], y[p][i]): operands of one layout and shape.
template <class R, class T1, class T2, class F>
TYPESHARD_NOINLINE std::vector<buffer<R>> zip_blocks_on(backend& b,
                                                        std::span<const device_id> devices,
                                                        const std::vector<buffer<T1>>& xs,
                                                        const std::vector<buffer<T2>>& ys, F f) {
  std::vector<buffer<R>> out(xs.size());
  b.run(devices, [&](std::size_t p) {
    const std::span<const T1> x = xs[p].span();
    const std::span<const T2> y = ys[p].span();
    buffer<R> r(x.size());
    kernels::zip_elements(f, x.data(), y.data(), r.data(), x.size());
    out[p] = std::move(r);
  });
  return out;
}

// One operand of a broadcast, as values padded to the result's rank (a missing leading
// dimension: extent 1 and unsharded, which view_of stretches), so that the loop below is a
// template of the result's rank only, whatever the operands' ranks.
template <class T, std::size_t Rank>
struct broadcast_operand {
  spec_array<Rank> spec;
  shape<Rank> global;
  const std::vector<buffer<T>>& blocks;
};

template <std::size_t Rank, class T, std::size_t R>
broadcast_operand<T, Rank> padded_operand(const spec_array<R>& s, const shape<R>& global,
                                          const std::vector<buffer<T>>& blocks) {
  broadcast_operand<T, Rank> out{{}, {}, blocks};
  for (std::size_t d = 0; d < Rank; ++d) out.global[d] = 1;
  for (std::size_t d = 0; d < R; ++d) {
    out.spec[Rank - R + d] = s[d];
    out.global[Rank - R + d] = global[d];
  }
  return out;
}

// Broadcasting: each device computes its block (spec rs, global extents `global`) of the
// result, reading each operand's elements where its own block holds them
// (detail/broadcast.hpp).
template <class R, std::size_t Rank, class T1, class T2, class F>
TYPESHARD_NOINLINE std::vector<buffer<R>> broadcast_blocks_on(
    backend& b, std::span<const device_id> devices, const mesh_value& m,
    const spec_array<Rank>& rs, const shape<Rank>& global, const broadcast_operand<T1, Rank>& x,
    const broadcast_operand<T2, Rank>& y, F f) {
  std::vector<buffer<R>> out(m.size);
  b.run(devices, [&](std::size_t p) {
    const index_slices<Rank> ix = index_of(m, rs, global, p);
    shape<Rank> local{};
    for (std::size_t d = 0; d < Rank; ++d) local[d] = ix[d].size();
    buffer<R> r(host_tensor<R, Rank>::element_count(local));
    zip_views(x.blocks[p].data(), view_of(m, x.spec, x.global, global, ix, p),
              y.blocks[p].data(), view_of(m, y.spec, y.global, global, ix, p), local, r.data(),
              f);
    out[p] = std::move(r);
  });
  return out;
}

// relu's derivative applied to a cotangent g at x: g where x > 0, else 0 (the backward of
// ts::relu on a traced value; a functor, not a lambda, so its loops are one instantiation
// for every array type, compiled once in typeshard::runtime).
struct relu_backward_t {
  template <class G, class X>
  G operator()(G g, X x) const {
    return x > X{} ? g : G{};
  }
};

#if defined(TYPESHARD_SEPARATE_COMPILATION)
// The loops of the operations' own functors (kernels/functors.hpp), for float and double:
// compiled once in typeshard::runtime. A user's function (ts::map, ts::zip) is compiled where
// it is used.
#define TYPESHARD_MAP_BLOCKS_INSTANCE(prefix, T, ...)                                          \
  prefix std::vector<buffer<T>> map_blocks_on<T, T, __VA_ARGS__>(                              \
      backend&, std::span<const device_id>, const std::vector<buffer<T>>&, __VA_ARGS__);
#define TYPESHARD_ZIP_BLOCKS_INSTANCE(prefix, T, ...)                                          \
  prefix std::vector<buffer<T>> zip_blocks_on<T, T, T, __VA_ARGS__>(                           \
      backend&, std::span<const device_id>, const std::vector<buffer<T>>&,                     \
      const std::vector<buffer<T>>&, __VA_ARGS__);
#define TYPESHARD_BROADCAST_BLOCKS_INSTANCE(prefix, T, R, ...)                                 \
  prefix std::vector<buffer<T>> broadcast_blocks_on<T, R, T, T, __VA_ARGS__>(                  \
      backend&, std::span<const device_id>, const mesh_value&, const spec_array<R>&,           \
      const shape<R>&, const broadcast_operand<T, R>&, const broadcast_operand<T, R>&,         \
      __VA_ARGS__);
#define TYPESHARD_BROADCAST_BLOCKS_RANKS(prefix, T, ...)                                       \
  TYPESHARD_BROADCAST_BLOCKS_INSTANCE(prefix, T, 1, __VA_ARGS__)                               \
  TYPESHARD_BROADCAST_BLOCKS_INSTANCE(prefix, T, 2, __VA_ARGS__)                               \
  TYPESHARD_BROADCAST_BLOCKS_INSTANCE(prefix, T, 3, __VA_ARGS__)                               \
  TYPESHARD_BROADCAST_BLOCKS_INSTANCE(prefix, T, 4, __VA_ARGS__)
#define TYPESHARD_BINARY_ELEMENTWISE_INSTANCES(prefix, T, ...)                                 \
  TYPESHARD_ZIP_BLOCKS_INSTANCE(prefix, T, __VA_ARGS__)                                        \
  TYPESHARD_BROADCAST_BLOCKS_RANKS(prefix, T, __VA_ARGS__)
#define TYPESHARD_ELEMENTWISE_INSTANCES(prefix, T)                                             \
  TYPESHARD_MAP_BLOCKS_INSTANCE(prefix, T, fn::negate_t)                                       \
  TYPESHARD_MAP_BLOCKS_INSTANCE(prefix, T, fn::abs_t)                                          \
  TYPESHARD_MAP_BLOCKS_INSTANCE(prefix, T, fn::relu_t)                                         \
  TYPESHARD_MAP_BLOCKS_INSTANCE(prefix, T, fn::sin_t)                                          \
  TYPESHARD_MAP_BLOCKS_INSTANCE(prefix, T, fn::cos_t)                                          \
  TYPESHARD_MAP_BLOCKS_INSTANCE(prefix, T, fn::exp_t)                                          \
  TYPESHARD_MAP_BLOCKS_INSTANCE(prefix, T, fn::log_t)                                          \
  TYPESHARD_MAP_BLOCKS_INSTANCE(prefix, T, fn::tanh_t)                                         \
  TYPESHARD_MAP_BLOCKS_INSTANCE(prefix, T, fn::sqrt_t)                                         \
  TYPESHARD_MAP_BLOCKS_INSTANCE(prefix, T, fn::with_scalar<fn::plus_t, T>)                     \
  TYPESHARD_MAP_BLOCKS_INSTANCE(prefix, T, fn::with_scalar<fn::minus_t, T>)                    \
  TYPESHARD_MAP_BLOCKS_INSTANCE(prefix, T, fn::with_scalar<fn::multiplies_t, T>)               \
  TYPESHARD_MAP_BLOCKS_INSTANCE(prefix, T, fn::with_scalar<fn::divides_t, T>)                  \
  TYPESHARD_MAP_BLOCKS_INSTANCE(prefix, T, scalar_first<fn::minus_t, T>)                       \
  TYPESHARD_MAP_BLOCKS_INSTANCE(prefix, T, scalar_first<fn::divides_t, T>)                     \
  TYPESHARD_BINARY_ELEMENTWISE_INSTANCES(prefix, T, fn::plus_t)                                \
  TYPESHARD_BINARY_ELEMENTWISE_INSTANCES(prefix, T, fn::minus_t)                               \
  TYPESHARD_BINARY_ELEMENTWISE_INSTANCES(prefix, T, fn::multiplies_t)                          \
  TYPESHARD_BINARY_ELEMENTWISE_INSTANCES(prefix, T, fn::divides_t)                             \
  TYPESHARD_BINARY_ELEMENTWISE_INSTANCES(prefix, T, fn::maximum_t)                             \
  TYPESHARD_BINARY_ELEMENTWISE_INSTANCES(prefix, T, fn::minimum_t)                             \
  TYPESHARD_BINARY_ELEMENTWISE_INSTANCES(prefix, T, relu_backward_t)
#endif

// Applies f to every element of every shard of `a` (on its device) and returns the
// resulting array, with result element type R and unreduced axes U.
template <class R, class U, class T, class M, class S, class E, class U0, class F>
auto map_shards(const sharded_array<T, M, S, E, U0>& a, F f) {
  const device_mesh<M>& m = a.device_mesh();
  return sharded_array<R, M, typename sharded_array<T, M, S, E, U0>::spec, E, U>(
      adopt_shards, m, a.extents(),
      map_blocks_on<R, T, F>(m.get_backend(), std::span<const device_id>(m.devices()),
                             *a.shared_shards(), f));
}

template <class A, class B>
void check_same_devices(const A& a, const B& b, const char* op);

// The fast path: operands of one layout and shape, element by element.
template <class Result, class A, class B, class F>
Result zip_shards(const A& a, const B& b, F f) {
  using R = typename Result::value_type;
  const auto& m = a.device_mesh();
  return Result(adopt_shards, m, a.extents(),
                zip_blocks_on<R, typename A::value_type, typename B::value_type, F>(
                    m.get_backend(), std::span<const device_id>(m.devices()),
                    *a.shared_shards(), *b.shared_shards(), f));
}

// Broadcasting on values: the result's extents (checked: broadcast_shape) into `global`,
// then broadcast_blocks_on. A template of the element types, ranks and f, whatever the
// operands' meshes and specs.
template <class R, std::size_t Rank, class T1, std::size_t RA, class T2, std::size_t RB, class F>
TYPESHARD_NOINLINE std::vector<buffer<R>> broadcast_on(
    backend& b, std::span<const device_id> devices, const mesh_value& m,
    const spec_array<Rank>& rs, const spec_array<RA>& as, const shape<RA>& ae,
    const std::vector<buffer<T1>>& ablocks, const spec_array<RB>& bs, const shape<RB>& be,
    const std::vector<buffer<T2>>& bblocks, F f, const char* op, shape<Rank>& global) {
  global = broadcast_shape<Rank>(ae, as, be, bs, op);
  return broadcast_blocks_on<R, Rank>(b, devices, m, rs, global,
                                      padded_operand<Rank>(as, ae, ablocks),
                                      padded_operand<Rank>(bs, be, bblocks), f);
}

// Broadcasting (broadcast_on), the operands' layouts given as values.
template <class Result, class A, class B, class F>
Result broadcast_shards(const A& a, const B& b, F f, const char* op) {
  constexpr std::size_t Rank = Result::rank;
  const auto& m = a.device_mesh();
  shape<Rank> global{};
  std::vector<buffer<typename Result::value_type>> blocks =
      broadcast_on<typename Result::value_type, Rank>(
          m.get_backend(), std::span<const device_id>(m.devices()),
          mesh_value_of<typename A::mesh_type>(), Result::layout_type::entries,
          A::layout_type::entries, a.extents(), *a.shared_shards(), B::layout_type::entries,
          b.extents(), *b.shared_shards(), f, op, global);
  return Result(adopt_shards, m, global, std::move(blocks));
}

// f on the operands (checked: check_elementwise_operands), result element R, unreduced U.
template <class R, class U, class A, class B, class F>
auto zip_broadcast(const A& a, const B& b, F f, const char* op) {
  using bc = broadcast_of<A, B>;
  using Result = sharded_array<R, typename A::mesh_type, typename bc::spec_type,
                               typename bc::extents_type, U>;
  check_same_devices(a, b, op);
  if constexpr (bc::same_layout && A::extents_type::all_static &&
                std::is_same_v<typename A::extents_type, typename B::extents_type>) {
    return zip_shards<Result>(a, b, f);  // equal static shapes: no broadcasting possible
  } else {
    if constexpr (bc::same_layout)
      if (a.extents() == b.extents()) return zip_shards<Result>(a, b, f);
    return broadcast_shards<Result>(a, b, f, op);
  }
}

template <class A, class B>
constexpr bool check_elementwise_operands() {
  using a = std::remove_cvref_t<A>;
  using b = std::remove_cvref_t<B>;
  if constexpr (!std::is_same_v<typename a::mesh_type, typename b::mesh_type>) {
    return require<false, diagnostic::elementwise_meshes_differ<typename a::mesh_type,
                                                                typename b::mesh_type>>::value &&
           false;
  } else {
    return check_broadcast<a, b>();
  }
}

// The device meshes must be the same devices, in the same order (seed 002's "incompatible
// devices" error, at run time because device lists are run-time values).
template <class A, class B>
void check_same_devices(const A& a, const B& b, const char* op) {
  check_same_device_mesh(a.device_mesh(), b.device_mesh(), op, move_to_other_devices_fix);
}

}  // namespace detail

// map(x, f): f applied to every element; the result keeps x's spec. f must be a pure
// function of one element. Not allowed on unreduced values (f need not be linear).
template <sharded_array_type A, class F>
auto map(const A& a, F f) {
  using arr = std::remove_cvref_t<A>;
  using R = std::invoke_result_t<F&, const typename arr::value_type&>;
  if constexpr (!arr::unreduced_type::empty) {
    static_assert(detail::require<false, diagnostic::nonlinear_op_on_unreduced<
                                             typename arr::unreduced_type>>::value);
    return a;
  } else {
    return detail::map_shards<R, unreduced<>>(a, f);
  }
}

// zip(x, y, f): f applied to every pair of elements, broadcast (rule 5).
template <sharded_array_type A, sharded_array_type B, class F>
auto zip(const A& a, const B& b, F f) {
  using arr_a = std::remove_cvref_t<A>;
  using arr_b = std::remove_cvref_t<B>;
  if constexpr (!detail::check_elementwise_operands<A, B>()) {
    return a;  // the diagnostic above already fired; stop here so nothing cascades
  } else if constexpr (!arr_a::unreduced_type::empty || !arr_b::unreduced_type::empty) {
    static_assert(detail::require<false, diagnostic::nonlinear_op_on_unreduced<
                                             typename arr_a::unreduced_type>>::value);
    return a;
  } else {
    using R = std::invoke_result_t<F&, const typename arr_a::value_type&,
                                   const typename arr_b::value_type&>;
    return detail::zip_broadcast<R, unreduced<>>(a, b, f, "zip");
  }
}

namespace detail {

// A linear binary operation (+, -): allowed on unreduced values with equal unreduced axes.
template <class A, class B, class F>
auto linear_zip(const A& a, const B& b, F f, const char* op) {
  if constexpr (!check_elementwise_operands<A, B>()) {
    return a;
  } else if constexpr (!std::is_same_v<typename A::unreduced_type, typename B::unreduced_type>) {
    static_assert(require<false, diagnostic::unreduced_axes_differ<
                                     typename A::unreduced_type, typename B::unreduced_type>>::value);
    return a;
  } else {
    using R = std::common_type_t<typename A::value_type, typename B::value_type>;
    return zip_broadcast<R, typename A::unreduced_type>(a, b, f, op);
  }
}

template <class A>
using scalar_of = typename std::remove_cvref_t<A>::value_type;
// The type of a scalar operand beside A (core/bfloat16.hpp: any arithmetic value beside
// bfloat16).
template <class A>
using scalar_arg = scalar_parameter_t<scalar_of<A>>;

}  // namespace detail

// ---- the operations, on global arrays and on blocks ---------------------------------------
// One definition each, for both kinds of operand (a sharded_array, or a block inside
// shard_map), with the functions of kernels/functors.hpp. Blocks have no unreduced axes;
// on arrays rule 3 allows only the linear operations on unreduced values.

template <class A>
concept elementwise_operand = sharded_array_type<A> || block_type<A>;

template <class A, class B>
concept same_operand_kind = (sharded_array_type<A> && sharded_array_type<B>) ||
                            (block_type<A> && block_type<B>);

namespace detail {

// f on every element, allowed on unreduced values (negation, scaling): an array keeps its
// element type and unreduced axes; a block takes f's result type.
template <class A, class F>
auto map_linear(const A& a, F f) {
  if constexpr (block_type<A>) {
    return map_block(a, f);
  } else {
    using arr = std::remove_cvref_t<A>;
    return map_shards<typename arr::value_type, typename arr::unreduced_type>(a, f);
  }
}

// f on every pair of elements: linear (+, -: equal unreduced axes allowed) or not.
template <bool Linear, class A, class B, class F>
auto zip_op(const A& a, const B& b, F f, const char* op) {
  if constexpr (block_type<A>)
    return zip_blocks(a, b, f, op);
  else if constexpr (Linear)
    return linear_zip(a, b, f, op);
  else
    return zip(a, b, f);
}

}  // namespace detail

// ---- linear operations: defined on unreduced values too ----------------------------------

template <elementwise_operand A, elementwise_operand B>
  requires same_operand_kind<A, B>
auto operator+(const A& a, const B& b) {
  return detail::zip_op<true>(a, b, fn::plus, "operator+");
}
template <elementwise_operand A, elementwise_operand B>
  requires same_operand_kind<A, B>
auto operator-(const A& a, const B& b) {
  return detail::zip_op<true>(a, b, fn::minus, "operator-");
}
template <elementwise_operand A>
auto operator-(const A& a) {
  return detail::map_linear(a, fn::negate);
}
// Scaling by a scalar: x * s, s * x, x / s.
template <elementwise_operand A>
auto operator*(const A& a, detail::scalar_arg<A> s) {
  return detail::map_linear(a, fn::with_scalar{fn::multiplies, s});
}
template <elementwise_operand A>
auto operator*(detail::scalar_arg<A> s, const A& a) {
  return a * s;
}
template <elementwise_operand A>
auto operator/(const A& a, detail::scalar_arg<A> s) {
  return detail::map_linear(a, fn::with_scalar{fn::divides, s});
}

// ---- a scalar added or subtracted, or divided by an array: not linear in partial sums ------
// (x + s adds s once per partial sum), so an unreduced array does not compile (rule 3).

namespace detail {
// s - x and s / x as a functor of the operation and the scalar's type (not a lambda, whose
// type would differ per array type and instantiate the loops of map_blocks_on once each).
template <class F, class S>
struct scalar_first {
  S s;
  template <class X>
  constexpr auto operator()(const X& v) const {
    return F{}(s, v);
  }
};

#if defined(TYPESHARD_SEPARATE_COMPILATION)
TYPESHARD_ELEMENTWISE_INSTANCES(extern template, float)
TYPESHARD_ELEMENTWISE_INSTANCES(extern template, double)
#endif

template <class A, class F>
auto map_nonlinear(const A& a, F f) {
  if constexpr (block_type<A>)
    return map_block(a, f);
  else
    return map(a, f);
}
}  // namespace detail

template <elementwise_operand A>
auto operator+(const A& a, detail::scalar_arg<A> s) {
  return detail::map_nonlinear(a, fn::with_scalar{fn::plus, s});
}
template <elementwise_operand A>
auto operator+(detail::scalar_arg<A> s, const A& a) {
  return a + s;
}
template <elementwise_operand A>
auto operator-(const A& a, detail::scalar_arg<A> s) {
  return detail::map_nonlinear(a, fn::with_scalar{fn::minus, s});
}
template <elementwise_operand A>
auto operator-(detail::scalar_arg<A> s, const A& a) {
  return detail::map_nonlinear(a, detail::scalar_first<fn::minus_t, detail::scalar_of<A>>{s});
}
template <elementwise_operand A>
auto operator/(detail::scalar_arg<A> s, const A& a) {
  return detail::map_nonlinear(a, detail::scalar_first<fn::divides_t, detail::scalar_of<A>>{s});
}

// ---- non-linear operations: need fully reduced values ------------------------------------

template <elementwise_operand A, elementwise_operand B>
  requires same_operand_kind<A, B>
auto operator*(const A& a, const B& b) {
  return detail::zip_op<false>(a, b, fn::multiplies, "operator*");
}
template <elementwise_operand A, elementwise_operand B>
  requires same_operand_kind<A, B>
auto operator/(const A& a, const B& b) {
  return detail::zip_op<false>(a, b, fn::divides, "operator/");
}
template <elementwise_operand A, elementwise_operand B>
  requires same_operand_kind<A, B>
auto maximum(const A& a, const B& b) {
  return detail::zip_op<false>(a, b, fn::maximum, "maximum");
}
template <elementwise_operand A, elementwise_operand B>
  requires same_operand_kind<A, B>
auto minimum(const A& a, const B& b) {
  return detail::zip_op<false>(a, b, fn::minimum, "minimum");
}

// sin cos exp log tanh sqrt abs relu: ts::map with the function of the same name.
#define TYPESHARD_UNARY_OPERATION(name)   \
  template <elementwise_operand A>        \
  auto name(const A& a) {                 \
    return map(a, fn::name);              \
  }
TYPESHARD_UNARY_OPERATION(sin)
TYPESHARD_UNARY_OPERATION(cos)
TYPESHARD_UNARY_OPERATION(exp)
TYPESHARD_UNARY_OPERATION(log)
TYPESHARD_UNARY_OPERATION(tanh)
TYPESHARD_UNARY_OPERATION(sqrt)
TYPESHARD_UNARY_OPERATION(abs)
TYPESHARD_UNARY_OPERATION(relu)
#undef TYPESHARD_UNARY_OPERATION

}  // namespace typeshard
