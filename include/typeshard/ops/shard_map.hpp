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
#include "../detail/buffer.hpp"
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

namespace typeshard {

// specs<S...>: the in_specs (or out_specs) of a shard_map with several inputs (outputs).
template <spec_type... S>
struct specs {
  static constexpr std::size_t size = sizeof...(S);
};

namespace detail {

template <class S>
struct as_specs {
  using type = specs<S>;
};
template <spec_type... S>
struct as_specs<specs<S...>> {
  using type = specs<S...>;
};

template <class T>
inline constexpr bool is_specs_v = false;
template <spec_type... S>
inline constexpr bool is_specs_v<specs<S...>> = true;

template <std::size_t I, class Specs>
struct spec_element;
template <std::size_t I, spec_type... S>
struct spec_element<I, specs<S...>> {
  using type = std::tuple_element_t<I, std::tuple<S...>>;
};

// The first mesh axis the block varies over that Spec does not shard over, or "".
template <class Mesh, class Spec, std::uint64_t Varying>
constexpr axis_name first_unclaimed_axis() {
  for (std::size_t i = 0; i < Mesh::rank; ++i)
    if (((Varying >> i) & 1) && !Spec::uses(Mesh::axes[i].name)) return Mesh::axes[i].name;
  return {};
}

// The first static extent of E that does not divide by Spec's shards, as {dim, extent,
// shards}, or dim == Rank.
template <class Mesh, class Spec, class E>
constexpr std::array<std::size_t, 3> first_uneven_static_extent() {
  for (std::size_t d = 0; d < E::rank; ++d) {
    const std::size_t shards = layout<Mesh, Spec, E::rank>::shards_along(d);
    if (E::is_static(d) && E::static_extents[d] % shards != 0)
      return {d, E::static_extents[d], shards};
  }
  return {E::rank, 0, 0};
}

// Checks one argument against its in spec; one diagnostic, false, on the first problem.
template <class Mesh, class Spec, class A>
constexpr bool check_argument() {
  using arr = std::remove_cvref_t<A>;
  if constexpr (!std::is_same_v<typename arr::mesh_type, Mesh>) {
    return require<false, diagnostic::shard_map_mesh_differs<Mesh, typename arr::mesh_type>>::value &&
           false;
  } else if constexpr (!check_spec<Mesh, Spec, arr::rank>()) {
    return false;
  } else {
    constexpr auto bad = first_uneven_static_extent<Mesh, Spec, typename arr::extents_type>();
    if constexpr (bad[0] != arr::rank) {
      return require<false,
                     diagnostic::static_extent_not_divisible<bad[0], bad[1], bad[2]>>::value &&
             false;
    } else {
      return true;
    }
  }
}

template <class Mesh, class InSpecs, class... A, std::size_t... I>
constexpr bool check_arguments(std::index_sequence<I...>) {
  if constexpr (InSpecs::size != sizeof...(A)) {
    return require<false, diagnostic::shard_map_argument_count<InSpecs::size, sizeof...(A)>>::value &&
           false;
  } else {
    bool ok = true;
    // Stop at the first bad argument so only one diagnostic fires.
    ((ok = ok && check_argument<Mesh, typename spec_element<I, InSpecs>::type, A>()), ...);
    return ok;
  }
}

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

// check_even_blocks on values: one copy per TU, whatever the meshes and specs.
[[noreturn]] TYPESHARD_COLD inline void throw_uneven_block(const mesh_value& m,
                                                         const dim_spec& ds,
                                                         std::size_t argument, std::size_t d,
                                                         std::size_t extent,
                                                         std::size_t shards) {
  std::string axes;
  for (std::size_t i = 0; i < ds.count; ++i)
    axes += (i ? " x '" : "'") + std::string(ds.axes[i].view()) + "' (" +
            std::to_string(m.size_of(ds.axes[i])) + ")";
  throw shape_error("typeshard: shard_map: argument " + std::to_string(argument) +
                    ", dimension " + std::to_string(d) + " has extent " +
                    std::to_string(extent) + ", not divisible by its " +
                    std::to_string(shards) + " shards over " + axes +
                    "; shard_map needs even blocks (as JAX): use a multiple of " +
                    std::to_string(shards) + " or shard that dimension less");
}
TYPESHARD_NOINLINE inline void check_even_blocks_on(const mesh_value& m,
                                                    std::span<const dim_spec> spec,
                                                    std::span<const std::size_t> extents,
                                                    std::size_t argument) {
  for (std::size_t d = 0; d < extents.size(); ++d) {
    const std::size_t shards = shards_of(m, spec[d]);
    if (extents[d] % shards != 0)
      throw_uneven_block(m, spec[d], argument, d, extents[d], shards);
  }
}

template <class Spec, class A>
void check_even_blocks(const A& a, std::size_t argument) {
  check_even_blocks_on(mesh_value_of<typename A::mesh_type>(),
                       layout<typename A::mesh_type, Spec, A::rank>::entries, a.extents(),
                       argument);
}

// An argument on other devices than argument 0's, out of line: one copy per mesh type, not a
// message built for every argument of every shard_mapped call.
template <class Mesh>
[[noreturn]] TYPESHARD_COLD void throw_argument_on_other_devices(std::size_t argument,
                                                                 const device_mesh<Mesh>& got,
                                                                 const device_mesh<Mesh>& first) {
  throw device_mesh_error("typeshard: shard_map: argument " + std::to_string(argument) +
                          " lives on " + got.to_string() + " but argument 0 on " +
                          first.to_string() + "; put every argument on the same devices");
}

// An lvalue of T where a diagnostic has fired: declared only (the program never links, as it
// never compiles), unlike std::declval usable in evaluated code.
template <class T>
T& declared_only();

template <class Mesh, class Spec, class A>
using input_block = block<typename A::value_type, A::rank, Mesh, vary_of_spec<Mesh, Spec>>;

template <class R>
struct result_blocks {
  static constexpr bool valid = is_block_v<R>;
  using tuple = std::tuple<R>;
};
template <class... R>
struct result_blocks<std::tuple<R...>> {
  static constexpr bool valid = (is_block_v<R> && ...);
  using tuple = std::tuple<R...>;
};

// Checks f's result against the out specs: blocks of the mesh, one per out spec, valid
// specs (rule 1), and rule 4.
template <class Mesh, class OutSpecs, class R, std::size_t I>
constexpr bool check_output() {
  using b = std::tuple_element_t<I, typename result_blocks<R>::tuple>;
  using S = typename spec_element<I, OutSpecs>::type;
  if constexpr (!std::is_same_v<typename b::mesh_type, Mesh>) {
    return require<false, diagnostic::shard_map_result_not_blocks<R>>::value && false;
  } else if constexpr (!check_spec<Mesh, S, b::rank>()) {
    return false;
  } else {
    constexpr axis_name unclaimed =
        first_unclaimed_axis<Mesh, typename padded_spec<S, b::rank>::type, b::varying>();
    return require_named<unclaimed.empty(), unclaimed,
                         diagnostic::out_spec_claims_replication>::value &&
           unclaimed.empty();
  }
}

template <class Mesh, class OutSpecs, class R, std::size_t... I>
constexpr bool check_outputs(std::index_sequence<I...>) {
  if constexpr (!result_blocks<R>::valid ||
                std::tuple_size_v<typename result_blocks<R>::tuple> != OutSpecs::size) {
    return require<false, diagnostic::shard_map_result_not_blocks<R>>::value && false;
  } else {
    bool ok = true;
    ((ok = ok && check_output<Mesh, OutSpecs, R, I>()), ...);
    return ok;
  }
}

// What the devices return for one output: a buffer and a shape per mesh position.
template <class B>
struct output_parts {
  std::vector<buffer<typename B::value_type>> buffers;
  std::vector<shape<B::rank>> shapes;
  explicit output_parts(std::size_t n) : buffers(n), shapes(n) {}
};

[[noreturn]] TYPESHARD_COLD inline void throw_unequal_output_blocks(std::size_t output,
                                                                  std::size_t first,
                                                                  const std::string& first_shape,
                                                                  std::size_t p,
                                                                  const std::string& shape) {
  throw shape_error("typeshard: shard_map: output " + std::to_string(output) +
                    ": the device at mesh position " + std::to_string(first) +
                    " returned a block of shape " + first_shape + " but the one at position " +
                    std::to_string(p) + " one of shape " + shape +
                    "; every device must return blocks of equal shape");
}

// The global extents of an output of spec `spec` from the shapes of its blocks, checked to
// be equal: on values, one instantiation per rank.
template <std::size_t R>
TYPESHARD_NOINLINE shape<R> assembled_extents(backend& b, std::span<const device_id> devices,
                                              const mesh_value& m, const spec_array<R>& spec,
                                              const std::vector<shape<R>>& shapes,
                                              std::size_t output) {
  // Only the devices this process addresses returned blocks (all of them on the thread
  // pool, one per rank on MPI): compare those, and size the result from the first.
  std::size_t first = m.size;
  for (std::size_t p = 0; p < m.size; ++p) {
    if (!b.is_addressable(devices[p])) continue;
    if (first == m.size) first = p;
    if (shapes[p] != shapes[first])
      throw_unequal_output_blocks(output, first, to_string(shapes[first]), p,
                                  to_string(shapes[p]));
  }
  shape<R> global{};
  if (first < m.size)
    for (std::size_t d = 0; d < R; ++d) global[d] = shapes[first][d] * shards_of(m, spec[d]);
  // With several processes (MPI) and a mesh that leaves some out, those ran no block and
  // cannot size the result: the mesh's first device sends them its extents, decided alike on
  // every process as to_host's broadcast is (so their to_host of it matches the others').
  if (b.process_count() > 1 && m.size < b.device_count()) {
    host_tensor<std::uint64_t, 1> extents(shape<1>{R});
    for (std::size_t d = 0; d < R; ++d) extents.data()[d] = global[d];
    broadcast_host_tensor(b, devices[0], extents);
    for (std::size_t d = 0; d < R; ++d) global[d] = static_cast<std::size_t>(extents.data()[d]);
  }
  return global;
}

template <class Mesh, class Spec, class B>
auto assemble_output(const device_mesh<Mesh>& m, output_parts<B>& parts, std::size_t output) {
  constexpr std::size_t R = B::rank;
  const shape<R> global = assembled_extents<R>(
      m.get_backend(), std::span<const device_id>(m.devices()), mesh_value_of<Mesh>(),
      layout<Mesh, Spec, R>::entries, parts.shapes, output);
  return sharded_array<typename B::value_type, Mesh, Spec, dextents<R>>(
      adopt_shards, m, global, std::move(parts.buffers));
}

}  // namespace detail

// shard_mapped<Mesh, InSpecs, OutSpecs, F>: what ts::shard_map returns, a callable taking
// the global arrays.
template <mesh_type Mesh, class InSpecs, class OutSpecs, class F>
class shard_mapped {
  using ins = typename detail::as_specs<InSpecs>::type;
  using outs = typename detail::as_specs<OutSpecs>::type;

 public:
  explicit shard_mapped(F f) : f_(std::move(f)) {}

  template <sharded_array_type... A>
  auto operator()(const A&... args) const {
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
template <mesh_type Mesh, class InSpecs, class OutSpecs, class F>
  requires(spec_type<InSpecs> || detail::is_specs_v<InSpecs>) &&
          (spec_type<OutSpecs> || detail::is_specs_v<OutSpecs>)
auto shard_map(F f) {
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
template <mesh_type Mesh, class InSpecs, class F>
  requires(!spec_type<F> && !detail::is_specs_v<F>)
auto shard_map(F) {
  static_assert(detail::require<false, diagnostic::shard_map_needs_out_specs<F>>::value);
  return detail::shard_map_without_out_specs{};
}
template <mesh_type Mesh, class F>
  requires(!spec_type<F> && !detail::is_specs_v<F>)
auto shard_map(F) {
  static_assert(detail::require<false, diagnostic::shard_map_needs_out_specs<F>>::value);
  return detail::shard_map_without_out_specs{};
}

}  // namespace typeshard
