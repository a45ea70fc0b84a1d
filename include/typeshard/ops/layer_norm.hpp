// typeshard/ops/layer_norm.hpp: layer normalisation along one dimension of a sharded array,
// without gains (flax.linen.LayerNorm(use_scale=False, use_bias=False), reduction_axes=Dim).
//
//   auto y = ts::layer_norm<-1>(h, 1e-5f);   // h: spec<"data", none, none> [B, S, D]
//   auto z = ts::layer_norm<1>(x);           // x: spec<none, "model">: psums over "model"
//   using plan = ts::layer_norm_plan_for<decltype(x), 1>;   // inspect it
//   plan::describe();  // "local reduce(out); psum(out, over model); local reduce(out);
//                      //  psum(out, over model); local elementwise"
//
// y = (x - mean) / sqrt(var + eps), mean and (biased) variance along Dim (a NumPy axis
// number, -1 the last). Per device it is a row kernel (kernels/layer_norm_row.hpp): the mean,
// then the sum of squared deviations from it (two passes, no cancellation), then the
// normalise pass, over a row that stays in cache. Along a dimension sharded over axes A the
// row sums are partial over A: each is completed by a psum over A (an all-reduce of one value
// per row), so the plan has two psums; along an unsharded dimension it is communication-free.
// The result has the input's spec. Floating-point elements only (float, double, bfloat16);
// bfloat16 rows are computed in a float copy of the row and each result rounded once. An
// unreduced input does not compile (rule 3: not linear); nor does a Dim out of range (rule 7).
//
// On traced values (ops/detail/traced_layer_norm.hpp) the backward is one fused row pass too:
//   dx = (g - mean(g) - y * mean(g * y)) / sqrt(var + eps)
// with both row sums in one pass and one psum (of the two sums together) where Dim is sharded
// (plan::backward_steps, plan::describe_backward()).
//
//   layer_norm_plan<Mesh, Spec, Extents, T = float, Unreduced = unreduced<>, Dim = -1>
//   layer_norm_plan_for<X, Dim>
//   layer_norm<Dim = -1>(x, eps = 1e-6)   (Flax's default epsilon; ts::layer_norm<>(x) for -1)
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../array/sharded_array.hpp"
#include "../backend/backend.hpp"
#include "../core/bfloat16.hpp"
#include "../core/detail/mesh_group.hpp"
#include "../detail/buffer.hpp"
#include "../kernels/layer_norm_row.hpp"
#include "../plan/reduce_plan.hpp"
#include "../plan/softmax_plan.hpp"
#include "../plan/step.hpp"
#include "detail/collective_calls.hpp"

namespace typeshard {

namespace detail {

// The forward: a row sum, its psum, a row sum of squared deviations, its psum, the normalise
// pass. The backward: the row sums of g and g * y (one pass), their psum, the dx pass.
template <std::size_t Rank>
constexpr step_array<Rank, 5> layer_norm_steps(const spec_array<Rank>& in, std::size_t dim,
                                               bool backward) {
  step_array<Rank, 5> out;
  std::array<bool, Rank> mask{};
  mask[dim] = true;
  const dim_spec partial = partial_axes_of(in, mask);
  const spec_array<Rank> stats = without_reduced(in, mask);
  const bool sharded = partial.count != 0;
  for (int pass = 0; pass < (backward ? 1 : 2); ++pass) {
    out.push(step<Rank>{step_kind::local_reduce, step_operand::out, dim, dim, partial, stats,
                        partial});
    if (sharded)
      out.push(step<Rank>{step_kind::psum, step_operand::out, dim, dim, partial, stats,
                          dim_spec{}});
  }
  out.push(step<Rank>{step_kind::local_elementwise, step_operand::array, dim, dim, dim_spec{}, in,
                      dim_spec{}});
  return out;
}

}  // namespace detail

template <mesh_type Mesh, spec_type Spec, extents_type Extents, class T = float,
          unreduced_type Unreduced = unreduced<>, int Dim = -1>
struct layer_norm_plan {
  static constexpr std::size_t rank = Extents::rank;
  using mesh_type = Mesh;
  using value_type = T;

  // Whether the inputs satisfy rules 1, 3 and 7 (else exactly one diagnostic fired).
  static constexpr bool valid = detail::check_softmax_inputs<Mesh, Spec, rank, T, Unreduced, Dim>();

  // The dimension, counted from the front.
  static constexpr std::size_t dim = [] {
    const long long d = Dim < 0 ? Dim + static_cast<long long>(rank) : Dim;
    return d >= 0 && d < static_cast<long long>(rank) ? static_cast<std::size_t>(d) : rank - 1;
  }();

  using out_spec = typename detail::padded_spec<Spec, rank>::type;
  using out_unreduced = unreduced<>;

 private:
  static constexpr detail::step_array<rank, 5> list_ =
      detail::layer_norm_steps(detail::spec_array_of<out_spec, rank>(), dim, false);
  static constexpr detail::step_array<rank, 5> back_ =
      detail::layer_norm_steps(detail::spec_array_of<out_spec, rank>(), dim, true);

 public:
  // The mesh axes Dim is sharded over: the row sums are all-reduced over them.
  static constexpr dim_spec partial_axes = list_.steps[0].axes;

  static constexpr std::array<step<rank>, list_.count> steps =
      detail::take_steps<list_.count>(list_);
  static constexpr std::array<step<rank>, back_.count> backward_steps =
      detail::take_steps<back_.count>(back_);
  static constexpr std::size_t collectives = detail::count_collectives(steps);
  static constexpr bool communicates = collectives != 0;

  static std::string describe() { return detail::describe_calls(steps); }
  static std::string describe_backward() { return detail::describe_calls(backward_steps); }
};

// layer_norm_plan_for<X, Dim>: the plan ts::layer_norm<Dim>(x) runs.
template <class X, int Dim>
using layer_norm_plan_for =
    layer_norm_plan<typename X::mesh_type, typename X::spec, typename X::extents_type,
                    typename X::value_type, typename X::unreduced_type, Dim>;

namespace detail {

// The row statistics' type and arithmetic: float for bfloat16, T otherwise.
template <class T>
using layer_norm_accumulator = std::conditional_t<std::is_same_v<T, bfloat16>, float, T>;

// One device's block as rows: [outer, n, inner] around the dimension.
struct row_geometry {
  std::size_t outer = 1, n = 0, inner = 1;
  std::size_t rows() const { return outer * inner; }
  std::size_t at(std::size_t r, std::size_t k) const {  // element k of row r
    return ((r / inner) * n + k) * inner + r % inner;
  }
};
template <std::size_t Rank>
row_geometry rows_of(const shape<Rank>& s, std::size_t dim) {
  row_geometry g;
  for (std::size_t d = 0; d < dim; ++d) g.outer *= s[d];
  for (std::size_t d = dim + 1; d < Rank; ++d) g.inner *= s[d];
  g.n = s[dim];
  return g;
}

// Row r of a block as A values: the block itself (contiguous rows of A), or a copy in `row`.
template <class A, class T>
const A* row_as(const T* x, const row_geometry& g, std::size_t r, A* row) {
  if constexpr (std::is_same_v<A, T>)
    if (g.inner == 1) return x + r * g.n;
  for (std::size_t k = 0; k < g.n; ++k) row[k] = static_cast<A>(x[g.at(r, k)]);
  return row;
}
// Stores an A row y into row r of a block (nothing when it is the block's own row).
template <class A, class T>
void store_row(const A* y, const row_geometry& g, std::size_t r, T* out) {
  if constexpr (std::is_same_v<A, T>)
    if (g.inner == 1) return;
  for (std::size_t k = 0; k < g.n; ++k) out[g.at(r, k)] = static_cast<T>(y[k]);
}
// The row r of `out` to write A results into: out's own row, or the scratch `row`.
template <class A, class T>
A* out_row(T* out, const row_geometry& g, std::size_t r, A* row) {
  if constexpr (std::is_same_v<A, T>)
    if (g.inner == 1) return out + r * g.n;
  return row;
}

template <class Mesh, class A>
void all_reduce_rows(backend& b, const dim_spec& axes, std::size_t p, A* v, std::size_t count) {
  const mesh_group<Mesh> grp = group_of<Mesh>(axes, p);
  b.all_reduce(backend_group(grp), element_type_of<A>, reduce_op::sum, v, v, count);
}

// One device's layer norm: the plan's steps over its block (count: the global extent along
// the dimension). A block with no rows returns at once, and so do its collective peers (they
// hold the same rows); a block empty along the dimension (an uneven shard) still takes part
// in the psums with zeros. rstd (rows values, or null) receives 1 / sqrt(var + eps).
template <class Plan, class T, class Mesh, std::size_t Rank>
void layer_norm_block(backend& b, std::size_t p, const T* x, const shape<Rank>& s,
                      std::size_t count, layer_norm_accumulator<T> eps, T* out,
                      layer_norm_accumulator<T>* rstd_out) {
  using A = layer_norm_accumulator<T>;
  const row_geometry g = rows_of(s, Plan::dim);
  const std::size_t rows = g.rows();
  if (rows == 0) return;
  buffer<A> row(g.n), rstd(rstd_out ? 0 : rows);
  A* rs = rstd_out ? rstd_out : rstd.data();
  if constexpr (!Plan::communicates) {
    // Every row whole on this device: the three passes row by row, the row in cache.
    for (std::size_t r = 0; r < rows; ++r) {
      const A* xr = row_as<A>(x, g, r, row.data());
      A* yr = out_row<A>(out, g, r, row.data());
      rs[r] = kernels::layer_norm_row(xr, yr, g.n, eps);
      store_row<A>(yr, g, r, out);
    }
  } else {
    buffer<A> mu(rows);
    std::size_t pass = 0;
    const A inv_count = A(1) / static_cast<A>(count);
    for (const step<Rank>& st : Plan::steps) {
      if (st.kind == step_kind::psum) {
        all_reduce_rows<Mesh>(b, st.axes, p, pass == 1 ? mu.data() : rs, rows);
      } else if (st.kind == step_kind::local_reduce && pass++ == 0) {  // the row sums
        for (std::size_t r = 0; r < rows; ++r)
          mu.data()[r] = kernels::row_sum(row_as<A>(x, g, r, row.data()), g.n);
      } else if (st.kind == step_kind::local_reduce) {  // the squared deviations' sums
        for (std::size_t r = 0; r < rows; ++r) {
          mu.data()[r] *= inv_count;
          rs[r] = kernels::row_sum_sq_dev(row_as<A>(x, g, r, row.data()), mu.data()[r], g.n);
        }
      } else if (st.kind == step_kind::local_elementwise) {
        for (std::size_t r = 0; r < rows; ++r) {
          rs[r] = A(1) / std::sqrt(rs[r] * inv_count + eps);
          const A* xr = row_as<A>(x, g, r, row.data());
          A* yr = out_row<A>(out, g, r, row.data());
          kernels::normalize_row(xr, mu.data()[r], rs[r], yr, g.n);
          store_row<A>(yr, g, r, out);
        }
      }
    }
  }
}

// One device's backward: dx = (g - mean(g) - y * mean(g * y)) * rstd, the two row sums in
// one pass and (Dim sharded) one psum of both.
template <class Plan, class T, class Mesh, std::size_t Rank>
void layer_norm_backward_block(backend& b, std::size_t p, const T* gr, const T* y,
                               const shape<Rank>& s, std::size_t count,
                               const layer_norm_accumulator<T>* rstd, T* dx) {
  using A = layer_norm_accumulator<T>;
  const row_geometry geo = rows_of(s, Plan::dim);
  const std::size_t rows = geo.rows();
  if (rows == 0) return;
  buffer<A> grow(geo.n), yrow(geo.n);
  const A inv_count = A(1) / static_cast<A>(count);
  if constexpr (!Plan::communicates) {
    // Every row whole on this device: both passes row by row, the row in cache.
    for (std::size_t r = 0; r < rows; ++r) {
      const A* g_r = row_as<A>(gr, geo, r, grow.data());
      const A* y_r = row_as<A>(y, geo, r, yrow.data());
      A sg, sgy;
      kernels::row_sums_g_gy(g_r, y_r, geo.n, sg, sgy);
      A* d_r = out_row<A>(dx, geo, r, grow.data());
      kernels::layer_norm_backward_row(g_r, y_r, sg * inv_count, sgy * inv_count, rstd[r], d_r,
                                       geo.n);
      store_row<A>(d_r, geo, r, dx);
    }
    return;
  }
  buffer<A> sums(2 * rows);
  for (const step<Rank>& st : Plan::backward_steps) {
    if (st.kind == step_kind::local_reduce) {
      for (std::size_t r = 0; r < rows; ++r)
        kernels::row_sums_g_gy(row_as<A>(gr, geo, r, grow.data()),
                               row_as<A>(y, geo, r, yrow.data()), geo.n, sums.data()[r],
                               sums.data()[rows + r]);
    } else if (st.kind == step_kind::psum) {
      all_reduce_rows<Mesh>(b, st.axes, p, sums.data(), 2 * rows);
    } else if (st.kind == step_kind::local_elementwise) {
      for (std::size_t r = 0; r < rows; ++r) {
        const A* g_r = row_as<A>(gr, geo, r, grow.data());
        const A* y_r = row_as<A>(y, geo, r, yrow.data());
        A* d_r = out_row<A>(dx, geo, r, grow.data());  // g's scratch row: dx == g allowed
        kernels::layer_norm_backward_row(g_r, y_r, sums.data()[r] * inv_count,
                                         sums.data()[rows + r] * inv_count, rstd[r], d_r,
                                         geo.n);
        store_row<A>(d_r, geo, r, dx);
      }
    }
  }
}

// Per device rows of 1 / sqrt(var + eps), kept by the traced form for its backward.
template <class T>
using layer_norm_stats = std::shared_ptr<const std::vector<buffer<layer_norm_accumulator<T>>>>;

// The forward over every device; `stats` (or null) receives each device's rstd rows.
template <int Dim, class X>
auto layer_norm(const X& a, layer_norm_accumulator<typename X::value_type> eps,
                layer_norm_stats<typename X::value_type>* stats) {
  using arr = std::remove_cvref_t<X>;
  using plan = layer_norm_plan_for<arr, Dim>;
  using T = typename arr::value_type;
  using A = layer_norm_accumulator<T>;
  using Mesh = typename arr::mesh_type;
  using result = sharded_array<T, Mesh, typename plan::out_spec, typename arr::extents_type>;
  if constexpr (!plan::valid) {
    (void)eps, (void)stats;
    return result(adopt_shards, a.device_mesh(), a.extents(),
                  std::shared_ptr<const std::vector<buffer<T>>>{});
  } else {
    std::vector<buffer<T>> out(Mesh::size);
    auto rs = std::make_shared<std::vector<buffer<A>>>(Mesh::size);
    if (a.size() != 0) {
      backend& b = a.device_mesh().get_backend();
      const std::size_t count = a.extents()[plan::dim];
      for_each_position(a.device_mesh(), [&](std::size_t p) {
        const std::span<const T> x = a.local_data(p);
        const shape<arr::rank> s = a.local_shape(p);
        buffer<T> y(x.size());
        buffer<A> r(stats ? rows_of(s, plan::dim).rows() : 0);
        layer_norm_block<plan, T, Mesh, arr::rank>(b, p, x.data(), s, count, eps, y.data(),
                                                   stats ? r.data() : nullptr);
        out[p] = std::move(y);
        (*rs)[p] = std::move(r);
      });
    }
    if (stats) *stats = std::move(rs);
    return result(adopt_shards, a.device_mesh(), a.extents(), std::move(out));
  }
}

// The backward over every device: g the cotangent of y = layer_norm<Dim>(x), y's rstd rows.
template <int Dim, class G>
G layer_norm_backward(const G& g, const G& y,
                      const layer_norm_stats<typename G::value_type>& rstd) {
  using plan = layer_norm_plan_for<G, Dim>;
  using T = typename G::value_type;
  using Mesh = typename G::mesh_type;
  std::vector<buffer<T>> out(Mesh::size);
  if (g.size() != 0) {
    backend& b = g.device_mesh().get_backend();
    const std::size_t count = g.extents()[plan::dim];
    for_each_position(g.device_mesh(), [&](std::size_t p) {
      const std::span<const T> gp = g.local_data(p);
      buffer<T> dx(gp.size());
      layer_norm_backward_block<plan, T, Mesh, G::rank>(b, p, gp.data(), y.local_data(p).data(),
                                                        g.local_shape(p), count,
                                                        (*rstd)[p].data(), dx.data());
      out[p] = std::move(dx);
    });
  }
  return G(adopt_shards, g.device_mesh(), g.extents(), std::move(out));
}

}  // namespace detail

namespace detail {
// The traced form (ops/detail/traced_layer_norm.hpp, included by ops/traced.hpp).
template <int Dim, class X>
auto traced_layer_norm(const X& x, double eps);
}  // namespace detail

// layer_norm<Dim>(x, eps): (x - mean) / sqrt(var + eps) along dimension Dim (-1: the last),
// on arrays and traced values. A function object (as std::ranges' algorithms are): argument-
// dependent lookup never finds it, so a user's own unqualified layer_norm(x) helper called
// with typeshard arrays stays theirs, neither ambiguous nor replaced.
template <int Dim = -1>
struct layer_norm_fn {
  template <sharded_array_type A>
  [[nodiscard]] auto operator()(const A& a, double eps = 1e-6,
                                detail::source_site loc = detail::source_site::current()) const {
    const detail::call_site_scope site(loc);
    using acc = detail::layer_norm_accumulator<typename A::value_type>;
    return detail::layer_norm<Dim>(a, static_cast<acc>(eps), nullptr);
  }
  template <class X>
    requires(!sharded_array_type<X> && requires { typename X::array_type; })
  [[nodiscard]] auto operator()(const X& x, double eps = 1e-6) const {
    return detail::traced_layer_norm<Dim>(x, eps);
  }
};
template <int Dim = -1>
inline constexpr layer_norm_fn<Dim> layer_norm{};

}  // namespace typeshard
