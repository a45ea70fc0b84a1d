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
#include "detail/forward_value.hpp"
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
                  run_row_steps<typename plan::out_spec, softmax_kernels>(
                      a, std::span<const step<arr::rank>>(plan::steps)));
  }
}

// softmax (Log: log_softmax) along Dim of a traced x, the forward and its recorded backward:
// declared here, defined in ops/detail/traced_reduce.hpp, which ops/traced.hpp (where traced
// values come from) includes.
template <bool Log, int Dim, class X>
auto traced_softmax(const X& x);

// softmax (Log: log_softmax) along Dim of x, by x's kind: a global array's plan run, a traced
// value's forward and recorded backward.
template <bool Log, int Dim, class X>
auto softmax_any(const X& x, source_site loc) {
  if constexpr (is_traced_v<X>) {
    (void)loc;
    return traced_softmax<Log, Dim>(x);
  } else {
    const call_site_scope site(loc);
    return softmax<Log, Dim>(x);
  }
}

}  // namespace detail

// softmax<Dim>(x): exp(x - max) / sum(exp(x - max)) along dimension Dim (-1: the last), on a
// global array or a traced value (global_operand).
template <int Dim = -1, global_operand X>
[[nodiscard]] auto softmax(const X& x, detail::source_site loc = detail::source_site::current()) {
  return detail::softmax_any<false, Dim>(x, loc);
}

// log_softmax<Dim>(x): (x - max) - log(sum(exp(x - max))) along dimension Dim.
template <int Dim = -1, global_operand X>
[[nodiscard]]
auto log_softmax(const X& x, detail::source_site loc = detail::source_site::current()) {
  return detail::softmax_any<true, Dim>(x, loc);
}

}  // namespace typeshard
