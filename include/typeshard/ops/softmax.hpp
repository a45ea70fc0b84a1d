// typeshard/ops/softmax.hpp: softmax and log_softmax along one dimension of a sharded array.
//
//   auto p = ts::softmax<-1>(logits);       // logits: spec<"data", "model"> [B, V]
//   auto l = ts::log_softmax<1>(logits);    // a pmax and a psum over "model", one value per row
//   using plan = ts::softmax_plan_for<decltype(logits), 1>;   // inspect it
//
// Numerically stable (the row maximum is subtracted first), along a sharded dimension too:
// the plan (plan/softmax_plan.hpp) lists the row statistics' kernels and collectives and the
// normalisation, and the one executor (ops/detail/executor.hpp) runs exactly its steps in one
// multi-device run. The result has the input's spec. Dim is a
// NumPy axis number (-1: the last). Floating-point elements only (float, double, bfloat16);
// an unreduced input does not compile (rule 3: not linear). On bfloat16 the row maximum and
// sum are kept, all-reduced and applied in float, and each result element is rounded once.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "../array/sharded_array.hpp"
#include "../backend/backend.hpp"
#include "../core/detail/mesh_value.hpp"
#include "../array/detail/buffer.hpp"
#include "../plan/softmax_plan.hpp"
#include "../plan/step.hpp"
#include "detail/row_steps.hpp"

namespace typeshard {

namespace detail {

// Runs the plan's steps in the one executor (ops/detail/executor.hpp) on every device.
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
    return result(adopt_shards, a.device_mesh(), a.extents(),
                  run_row_steps<typename plan::out_spec>(
                      a, std::span<const step<arr::rank>>(plan::steps)));
  }
}

}  // namespace detail

// softmax<Dim>(x): exp(x - max) / sum(exp(x - max)) along dimension Dim (-1: the last).
template <int Dim = -1, sharded_array_like A>
[[nodiscard]] auto softmax(const A& a, detail::source_site loc = detail::source_site::current()) {
  const detail::call_site_scope site(loc);
  return detail::softmax<false, Dim>(a);
}

// log_softmax<Dim>(x): (x - max) - log(sum(exp(x - max))) along dimension Dim.
template <int Dim = -1, sharded_array_like A>
[[nodiscard]]
auto log_softmax(const A& a, detail::source_site loc = detail::source_site::current()) {
  const detail::call_site_scope site(loc);
  return detail::softmax<true, Dim>(a);
}

}  // namespace typeshard
