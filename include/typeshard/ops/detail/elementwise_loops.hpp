// typeshard/ops/detail/elementwise_loops.hpp: the per-device loops of the elementwise
// operations (ops/elementwise.hpp), on values: a function of one element or of two (operands
// of one layout, or broadcast, rule 5), run on every device of a mesh; the functors they are
// instantiated with beyond kernels/functors.hpp, and their extern instances for the
// separately compiled runtime.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "../../array/detail/buffer.hpp"
#include "../../backend/backend.hpp"
#include "../../core/layout.hpp"
#include "../../array/host_tensor.hpp"
#include "../../kernels/functors.hpp"
#include "../../kernels/vector_math.hpp"
#include "broadcast.hpp"

namespace typeshard::detail {

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

#if defined(TYPESHARD_SEPARATE_COMPILATION)
TYPESHARD_ELEMENTWISE_INSTANCES(extern template, float)
TYPESHARD_ELEMENTWISE_INSTANCES(extern template, double)
#endif

}  // namespace typeshard::detail
