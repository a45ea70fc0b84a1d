// typeshard/ops/shard_map.hpp: per-device programs over a mesh (JAX's shard_map), with the
// replication of every output checked at compile time (rule 4).
//
//   auto f = ts::shard_map<mesh_2x2, ts::specs<ts::spec<ts::none, "model">,   // in_specs
//                                              ts::spec<ts::none, "model">>,
//                          ts::spec<ts::none, "model">>(                       // out_specs
//       [](const auto& x, const auto& a) {
//         auto xg = ts::all_gather<"model">(x, 1);   // invariant over "model"
//         return ts::matmul(xg, a);                  // varies over "model", like a
//       });
//   auto B = f(X, A);                                // sharded_array, spec<none, "model">
//
// f runs once per device of the inputs' device mesh, concurrently, on that device's local
// blocks (block.hpp: element type, rank and varying axes in the type, extents at run
// time), and returns a block (or a std::tuple of blocks for several out specs). f may take
// a `const ts::shard_context<Mesh>&` first, for axis_index and the device.
//
// Rule 4: a block's type carries the mesh axes it varies over (an input varies over the
// axes its in spec shards over; collectives and operations update the set). An out spec
// that does not shard over an axis the returned block varies over claims a replication
// the value does not have: a compile error naming the axis. The reverse is fine: an out
// spec that shards over an axis the block is invariant over concatenates the (equal)
// blocks, as JAX does (seed 001's all_gather example returns four copies).
//
// Inputs: an input whose spec differs from its in spec, or that is unreduced, is first
// brought to the in spec with ts::reshard (as JAX reshards implicitly); with equal specs
// the blocks are views of the input's shards, no copy. Like JAX, shard_map needs even
// blocks: a static extent that does not divide by its dimension's shards is a compile
// error (rule 6), a dynamic one a shape_error naming the dimension, extent and axis sizes.
// Outputs: the blocks become the result's shards without a copy (unless f returns an
// input block unchanged); all devices must return blocks of equal shape. Under MPI every
// process calls the shard_mapped function; one holding none of the mesh's devices learns the
// result's extents from the mesh's first device.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../array/block.hpp"
#include "../array/block_elementwise.hpp"
#include "../array/block_matmul.hpp"
#include "collectives.hpp"
#include "../array/detail/buffer.hpp"
#include "../core/detail/diagnose.hpp"
#include "../array/device_mesh.hpp"
#include "../core/errors.hpp"
#include "../core/extents.hpp"
#include "../core/layout.hpp"
#include "../core/mesh.hpp"
#include "reshard.hpp"
#include "../array/sharded_array.hpp"
#include "../core/spec.hpp"
#include "../core/rules/rule4_shard_map.hpp"
#include "../core/rules/rule6_extents.hpp"
#include "../core/rules/rule9_gradients.hpp"
#include "detail/shard_map_checks.hpp"
#include "detail/shard_map_outputs.hpp"

namespace typeshard {

// specs<S...>: the in_specs (or out_specs) of a shard_map with several inputs (outputs).
template <spec_like... S>
struct specs {
  static constexpr std::size_t size = sizeof...(S);
};

namespace detail {

// The argument brought to its in spec (itself when it already has it: a cheap copy that
// shares the shards).
template <class Spec, class A>
auto to_in_spec(const A& a) {
  using padded = typename padded_spec<Spec, A::rank>::type;
  if constexpr (std::is_same_v<padded, typename A::spec> && A::unreduced_type::empty)
    return a;
  else
    return reshard<Spec>(a);
}

// An lvalue of T where a diagnostic has fired: declared only (the program never links, as it
// never compiles), unlike std::declval usable in evaluated code.
template <class T>
T& declared_only();

template <class Mesh, class Spec, class A>
using input_block = block<typename A::value_type, A::rank, Mesh, vary_of_spec<Mesh, Spec>>;

}  // namespace detail

// shard_mapped<Mesh, InSpecs, OutSpecs, F>: what ts::shard_map returns, a callable taking
// the global arrays.
template <mesh_like Mesh, class InSpecs, class OutSpecs, class F>
class shard_mapped {
  using ins = typename detail::as_specs<InSpecs>::type;
  using outs = typename detail::as_specs<OutSpecs>::type;

 public:
  explicit shard_mapped(F f) : f_(std::move(f)) {}

  template <sharded_array_like... A>
  [[nodiscard]] auto operator()(const A&... args) const {
    if constexpr (!detail::check_arguments<Mesh, ins, A...>(
                      std::index_sequence_for<A...>{})) {
      // The diagnostic fired; stop here so nothing cascades, returning what the call would
      // have returned where f can still tell (one argument per in spec).
      if constexpr (ins::size == sizeof...(A))
        return after_diagnostic<result_of<std::index_sequence_for<A...>, A...>>();
      else
        return 0;
    } else {
      return call(std::index_sequence_for<A...>{}, args...);
    }
  }

  // A value traced by ts::value_and_grad: shard_map bodies are not differentiated (rule 9),
  // one message instead of "no matching call".
  template <class... A>
    requires(detail::is_traced_v<std::remove_cvref_t<A>> || ...)
  int operator()(const A&...) const {
    static_assert(detail::require<false, diagnostic::grad_shard_map_not_differentiable<F>>::value);
    return 0;
  }

 private:
  // The type f returns on the blocks of arguments A (its blocks are typed by Mesh and the in
  // specs, so this holds even when an argument is on another mesh).
  template <class Indices, class... A>
  struct result_of_impl;
  template <std::size_t... I, class... A>
  struct result_of_impl<std::index_sequence<I...>, A...> {
    using type = std::remove_cvref_t<decltype(std::declval<const shard_mapped&>().invoke(
        std::declval<const shard_context<Mesh>&>(),
        std::declval<detail::input_block<Mesh, typename detail::spec_element<I, ins>::type,
                                         A>&>()...))>;
  };
  template <class Indices, class... A>
  using result_of = typename result_of_impl<Indices, A...>::type;

  // The arrays a call returning R produces, made without running anything: what the call
  // returns after a diagnostic fired, so that the code using its result compiles on and
  // the diagnostic stays the only error. (An R that is not blocks for every out spec has
  // no such arrays: then 0.)
  template <class R, std::size_t... O>
  static auto outputs_of(std::index_sequence<O...>) {
    using blocks = typename detail::result_blocks<R>::tuple;
    auto outputs = std::make_tuple(
        sharded_array<typename std::tuple_element_t<O, blocks>::value_type, Mesh,
                      typename detail::spec_element<O, outs>::type,
                      dextents<std::tuple_element_t<O, blocks>::rank>>(
            adopt_shards, detail::declared_only<const device_mesh<Mesh>>(), {},
            std::vector<detail::buffer<
                typename std::tuple_element_t<O, blocks>::value_type>>())...);
    if constexpr (detail::is_specs_v<OutSpecs>)
      return outputs;
    else
      return std::get<0>(std::move(outputs));
  }
  template <class R>
  static auto after_diagnostic() {
    if constexpr (detail::result_blocks<R>::valid &&
                  std::tuple_size_v<typename detail::result_blocks<R>::tuple> == outs::size)
      return outputs_of<R>(std::make_index_sequence<outs::size>{});
    else
      return 0;
  }

  template <std::size_t... I, class... A>
  auto call(std::index_sequence<I...>, const A&... args) const {
    auto inputs = std::make_tuple(
        detail::to_in_spec<typename detail::spec_element<I, ins>::type>(args)...);
    (detail::check_even_blocks<typename detail::spec_element<I, ins>::type>(
         std::get<I>(inputs), I),
     ...);
    const device_mesh<Mesh>& m = std::get<0>(inputs).device_mesh();
    ((std::get<I>(inputs).device_mesh() == m
          ? void()
          : detail::throw_argument_on_other_devices(I, std::get<I>(inputs).device_mesh(), m)),
     ...);

    using R = std::remove_cvref_t<decltype(invoke(
        std::declval<const shard_context<Mesh>&>(),
        std::declval<detail::input_block<Mesh, typename detail::spec_element<I, ins>::type,
                                         A>&>()...))>;
    if constexpr (!detail::check_outputs<Mesh, outs, R>(
                      std::make_index_sequence<outs::size>{})) {
      return after_diagnostic<R>();  // the diagnostic fired: nothing else may
    } else {
      using result_tuple = typename detail::result_blocks<R>::tuple;
      return run<R, result_tuple>(m, inputs, std::index_sequence<I...>{},
                                  std::make_index_sequence<outs::size>{});
    }
  }

  template <class R, class Tuple, class Inputs, std::size_t... I, std::size_t... O>
  auto run(const device_mesh<Mesh>& m, const Inputs& inputs, std::index_sequence<I...>,
           std::index_sequence<O...>) const {
    std::tuple<detail::output_parts<std::tuple_element_t<O, Tuple>>...> parts{
        detail::output_parts<std::tuple_element_t<O, Tuple>>(Mesh::size)...};
    detail::for_each_position(m, [&](std::size_t p) {
      const shard_context<Mesh> context(m, p);
      auto blocks = std::make_tuple(
          detail::input_block<Mesh, typename detail::spec_element<I, ins>::type,
                              std::tuple_element_t<I, Inputs>>(
              block_view, context, std::get<I>(inputs).local_shape(p),
              std::get<I>(inputs).local_data(p).data())...);
      auto store = [&](auto&& out_tuple) {
        ((std::get<O>(parts).shapes[p] = std::get<O>(out_tuple).extents(),
          std::get<O>(parts).buffers[p] = std::move(std::get<O>(out_tuple)).release()),
         ...);
      };
      if constexpr (is_block_v<R>)
        store(std::tuple<R>(invoke(context, std::get<I>(blocks)...)));
      else
        store(invoke(context, std::get<I>(blocks)...));
    });
    auto outputs = std::make_tuple(
        detail::assemble_output<Mesh, typename detail::spec_element<O, outs>::type>(
            m, std::get<O>(parts), O)...);
    if constexpr (detail::is_specs_v<OutSpecs>)
      return outputs;
    else
      return std::get<0>(std::move(outputs));
  }

  // f(context, blocks...) when f takes the context, else f(blocks...).
  template <class... B>
  decltype(auto) invoke(const shard_context<Mesh>& context, B&... blocks) const {
    if constexpr (std::is_invocable_v<const F&, const shard_context<Mesh>&, B&...>)
      return f_(context, blocks...);
    else
      return f_(blocks...);
  }

  F f_;
};

// shard_map<Mesh, InSpecs, OutSpecs>(f): f mapped over the devices (see the top of this
// file). InSpecs / OutSpecs: one ts::spec, or ts::specs<...> for several.
template <mesh_like Mesh, class InSpecs, class OutSpecs, class F>
  requires(spec_like<InSpecs> || detail::is_specs_v<InSpecs>) &&
          (spec_like<OutSpecs> || detail::is_specs_v<OutSpecs>)
[[nodiscard]] auto shard_map(F f) {
  return shard_mapped<Mesh, InSpecs, OutSpecs, F>(std::move(f));
}

namespace diagnostic {
template <class F>
struct shard_map_needs_out_specs {
  static constexpr bool fire() {
    static_assert(detail::always_false<F>,
                  "typeshard: shard_map: the out specs are missing (JAX's out_specs: they "
                  "are not inferred); fix: name them after the in specs, "
                  "ts::shard_map<Mesh, InSpecs, OutSpecs>(f), one ts::spec per output or "
                  "ts::specs<...> for several");
    return true;
  }
};
}  // namespace diagnostic

namespace detail {
// What shard_map without out specs returns after its diagnostic: a callable whose result is
// its first argument, so the code around it compiles on and the user sees one error.
struct shard_map_without_out_specs {
  template <class A, class... Rest>
  const A& operator()(const A& a, const Rest&...) const {
    return a;
  }
};
}  // namespace detail

// shard_map<Mesh, InSpecs>(f) and shard_map<Mesh>(f): the out specs are missing.
template <mesh_like Mesh, class InSpecs, class F>
  requires(!spec_like<F> && !detail::is_specs_v<F>)
[[nodiscard]] auto shard_map(F) {
  static_assert(detail::require<false, diagnostic::shard_map_needs_out_specs<F>>::value);
  return detail::shard_map_without_out_specs{};
}
template <mesh_like Mesh, class F>
  requires(!spec_like<F> && !detail::is_specs_v<F>)
[[nodiscard]] auto shard_map(F) {
  static_assert(detail::require<false, diagnostic::shard_map_needs_out_specs<F>>::value);
  return detail::shard_map_without_out_specs{};
}

}  // namespace typeshard
