// typeshard/ops/softmax.hpp: softmax and log_softmax along one dimension of a sharded array.
//
//   auto p = ts::softmax<-1>(logits);       // logits: spec<"data", "model"> [B, V]
//   auto l = ts::log_softmax<1>(logits);    // a pmax and a psum over "model", one value per row
//   using plan = ts::softmax_plan_for<decltype(logits), 1>;   // inspect it
//
// Numerically stable (the row maximum is subtracted first), along a sharded dimension too:
// the plan (plan/softmax_plan.hpp) lists the row statistics' collectives, and this runs
// exactly its steps in one multi-device run. The result has the input's spec. Dim is a
// NumPy axis number (-1: the last). Floating-point elements only (float, double, bfloat16);
// an unreduced input does not compile (rule 3: not linear). On bfloat16 the row maximum and
// sum are kept, all-reduced and applied in float, and each result element is rounded once.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "../array/sharded_array.hpp"
#include "../backend/backend.hpp"
#include "../core/bfloat16.hpp"
#include "../core/detail/mesh_group.hpp"
#include "../detail/buffer.hpp"
#include "../kernels/functors.hpp"
#include "../kernels/vector_math.hpp"
#include "../plan/softmax_plan.hpp"
#include "detail/collective_calls.hpp"

namespace typeshard {

namespace detail {

// One device's softmax: its block is [outer, n, inner] around the dimension (n its local
// extent); the row statistics are [outer, inner]. Its work is bounded by its block's
// elements plus its rows, never by an extent alone: with no rows (outer or inner empty) it
// returns at once, and so do the other members of its collective groups (they hold the same
// rows: a group varies only along the dimension). A device whose own block is empty along
// the dimension (n == 0, an uneven shard) still takes part in the max and sum collectives
// with the identities -inf and 0, so that its peers' rows are complete.
// The type of the row statistics and the arithmetic: float for bfloat16 (its 8 fraction
// bits would lose the row sum), T otherwise.
template <class T>
using softmax_accumulator = std::conditional_t<std::is_same_v<T, bfloat16>, float, T>;

// Rows along the last dimension (inner == 1) with float arithmetic: a row kernel over the
// contiguous row, with kernels::exp_sum (vectorised exp, the row sum accumulated in vector
// lanes); bfloat16 rows go through a float copy of one row. Returns false (nothing done) for
// other layouts and types.
template <class T, class A>
bool softmax_rows_contiguous(step_kind kind, std::size_t reductions, const T* x, T* out,
                             std::size_t rows, std::size_t n, A* max, A* sum, bool log) {
  if constexpr (!std::is_same_v<A, float>) {
    return false;
  } else {
    buffer<float> row;
    if constexpr (!std::is_same_v<T, float>) row = buffer<float>(n);
    // The row as floats: x itself, or its float copy in `row`.
    const auto as_float = [&](std::size_t r) -> const float* {
      if constexpr (std::is_same_v<T, float>) {
        return x + r * n;
      } else {
        for (std::size_t k = 0; k < n; ++k) row.data()[k] = static_cast<float>(x[r * n + k]);
        return row.data();
      }
    };
    if (kind == step_kind::local_reduce && reductions == 0) {  // the row maximum
      for (std::size_t r = 0; r < rows; ++r) {
        float m = -std::numeric_limits<float>::infinity();
        for (std::size_t k = 0; k < n; ++k) m = fn::maximum(m, static_cast<float>(x[r * n + k]));
        max[r] = m;
      }
    } else if (kind == step_kind::local_reduce) {  // the row sum of exp(x - max)
      // float rows: the exponentials go to `out` (overwritten by the last step); bfloat16
      // rows: to the scratch row, recomputed in the last step (out holds bfloat16 only).
      for (std::size_t r = 0; r < rows; ++r) {
        float* y = row.data();
        if constexpr (std::is_same_v<T, float>) y = out + r * n;
        sum[r] = n == 0 ? 0.0f : kernels::exp_sum(as_float(r), max[r], y, n);
      }
    } else if (log) {  // (x - max) - log(sum)
      for (std::size_t r = 0; r < rows; ++r) {
        const float m = max[r], l = std::log(sum[r]);
        for (std::size_t k = 0; k < n; ++k)
          out[r * n + k] = static_cast<T>((static_cast<float>(x[r * n + k]) - m) - l);
      }
    } else {  // exp(x - max) / sum
      for (std::size_t r = 0; r < rows; ++r) {
        const float z = sum[r];
        if constexpr (std::is_same_v<T, float>) {
          float* y = out + r * n;  // exp(x - max), from the sum's step
          for (std::size_t k = 0; k < n; ++k) y[k] = y[k] / z;
        } else {
          (void)kernels::exp_sum(as_float(r), max[r], row.data(), n);
          for (std::size_t k = 0; k < n; ++k) out[r * n + k] = static_cast<T>(row.data()[k] / z);
        }
      }
    }
    return true;
  }
}

template <class Plan, class T, class Mesh, std::size_t Rank>
void softmax_block(backend& b, std::size_t p, const T* x, const shape<Rank>& s, T* out) {
  using A = softmax_accumulator<T>;
  constexpr std::size_t dim = Plan::dim;
  std::size_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < dim; ++d) outer *= s[d];
  for (std::size_t d = dim + 1; d < Rank; ++d) inner *= s[d];
  const std::size_t n = s[dim];
  const std::size_t rows = outer * inner;
  if (rows == 0) return;  // no rows: nothing to compute, and no peer waits for statistics
  buffer<A> max(rows), sum(rows);
  std::size_t reductions = 0;
  for (const step<Rank>& st : Plan::steps) {
    if ((st.kind == step_kind::local_reduce || st.kind == step_kind::local_elementwise) &&
        inner == 1 &&
        softmax_rows_contiguous(st.kind, reductions, x, out, rows, n, max.data(), sum.data(),
                                Plan::log)) {
      if (st.kind == step_kind::local_reduce) ++reductions;
      continue;
    }
    switch (st.kind) {
      case step_kind::local_reduce:
        if (reductions++ == 0) {  // the row maximum
          for (std::size_t r = 0; r < rows; ++r)
            max.data()[r] = -std::numeric_limits<A>::infinity();
          for (std::size_t o = 0; o < outer; ++o)
            for (std::size_t k = 0; k < n; ++k)
              for (std::size_t i = 0; i < inner; ++i)
                max.data()[o * inner + i] = fn::maximum(
                    max.data()[o * inner + i], static_cast<A>(x[(o * n + k) * inner + i]));
        } else {  // the row sum of exp(x - max)
          for (std::size_t r = 0; r < rows; ++r) sum.data()[r] = A{0};
          for (std::size_t o = 0; o < outer; ++o)
            for (std::size_t k = 0; k < n; ++k)
              for (std::size_t i = 0; i < inner; ++i)
                sum.data()[o * inner + i] += std::exp(static_cast<A>(x[(o * n + k) * inner + i]) -
                                                      max.data()[o * inner + i]);
        }
        break;
      case step_kind::pmax:
      case step_kind::psum: {
        const mesh_group<Mesh> g = group_of<Mesh>(st.axes, p);
        A* stats = st.kind == step_kind::pmax ? max.data() : sum.data();
        b.all_reduce(backend_group(g), element_type_of<A>,
                     st.kind == step_kind::pmax ? reduce_op::max : reduce_op::sum, stats, stats,
                     rows);
        break;
      }
      case step_kind::local_elementwise:
        for (std::size_t o = 0; o < outer; ++o)
          for (std::size_t k = 0; k < n; ++k)
            for (std::size_t i = 0; i < inner; ++i) {
              const std::size_t e = (o * n + k) * inner + i;
              const A m = max.data()[o * inner + i], z = sum.data()[o * inner + i];
              const A v = static_cast<A>(x[e]);
              out[e] = static_cast<T>(Plan::log ? (v - m) - std::log(z) : std::exp(v - m) / z);
            }
        break;
      default:
        break;  // softmax plans hold no other step
    }
  }
}

template <bool Log, int Dim, class A>
auto softmax(const A& a) {
  using arr = std::remove_cvref_t<A>;
  using plan = softmax_plan_for<arr, Dim, Log>;
  using T = typename arr::value_type;
  using Mesh = typename arr::mesh_type;
  using result = sharded_array<T, Mesh, typename plan::out_spec, typename arr::extents_type>;
  if constexpr (!plan::valid) {
    // The plan's diagnostic fired: a value of the type the caller expects (never run).
    return result(adopt_shards, a.device_mesh(), a.extents(),
                  std::shared_ptr<const std::vector<buffer<T>>>{});
  } else {
    std::vector<buffer<T>> out(Mesh::size);
    backend& b = a.device_mesh().get_backend();
    // An empty array: every block is empty (some global extent is 0, so every block's is),
    // so there is nothing to compute and no statistic to exchange, whatever the other extents.
    if (a.size() == 0) return result(adopt_shards, a.device_mesh(), a.extents(), std::move(out));
    for_each_position(a.device_mesh(), [&](std::size_t p) {
      const std::span<const T> x = a.local_data(p);
      buffer<T> y(x.size());
      softmax_block<plan, T, Mesh, arr::rank>(b, p, x.data(), a.local_shape(p), y.data());
      out[p] = std::move(y);
    });
    return result(adopt_shards, a.device_mesh(), a.extents(), std::move(out));
  }
}

}  // namespace detail

// softmax<Dim>(x): exp(x - max) / sum(exp(x - max)) along dimension Dim (-1: the last).
template <int Dim = -1, sharded_array_type A>
auto softmax(const A& a, detail::source_site loc = detail::source_site::current()) {
  const detail::call_site_scope site(loc);
  return detail::softmax<false, Dim>(a);
}

// log_softmax<Dim>(x): (x - max) - log(sum(exp(x - max))) along dimension Dim.
template <int Dim = -1, sharded_array_type A>
auto log_softmax(const A& a, detail::source_site loc = detail::source_site::current()) {
  const detail::call_site_scope site(loc);
  return detail::softmax<true, Dim>(a);
}

}  // namespace typeshard
