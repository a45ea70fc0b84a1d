// typeshard/ops/detail/block_collective.hpp: what every collective on a block
// (ops/collectives.hpp) does before and after moving data: its axes checked (rule 4's
// diagnostics), the group of the calling device, the result type (invariant or varying over
// the axes), the block returned after a diagnostic fired, and its run-time errors.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "../../core/config.hpp"
#include "../../backend/backend.hpp"
#include "../../array/block.hpp"
#include "../../array/detail/buffer.hpp"
#include "collective_calls.hpp"
#include "../../core/detail/diagnose.hpp"
#include "../../core/detail/mesh_group.hpp"
#include "../../core/errors.hpp"
#include "../../core/layout.hpp"
#include "../../core/rules/collectives.hpp"
#include "../../core/rules/mesh.hpp"

namespace typeshard::detail {

template <class Mesh, axis_name... Axes>
constexpr axis_name first_unknown_axis() {
  for (const axis_name& a : std::array<axis_name, sizeof...(Axes)>{Axes...})
    if (!Mesh::contains(a)) return a;
  return {};
}

template <axis_name... Axes>
constexpr axis_name first_repeated_name() {
  const std::array<axis_name, sizeof...(Axes)> names{Axes...};
  for (std::size_t i = 0; i < names.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (names[i] == names[j]) return names[i];
  return {};
}

// Fires one diagnostic and returns false if Axes are not distinct axes of Mesh.
template <class Mesh, axis_name... Axes>
constexpr bool check_collective_axes() {
  if constexpr (sizeof...(Axes) > dim_spec::max_axes) {
    return require<false, diagnostic::collective_too_many_axes<sizeof...(Axes)>>::value && false;
  } else if constexpr (!first_unknown_axis<Mesh, Axes...>().empty()) {
    return require_named<false, first_unknown_axis<Mesh, Axes...>(),
                         diagnostic::collective_unknown_axis>::value &&
           false;
  } else if constexpr (!first_repeated_name<Axes...>().empty()) {
    return require_named<false, first_repeated_name<Axes...>(),
                         diagnostic::collective_axis_repeated>::value &&
           false;
  } else {
    return true;
  }
}

template <axis_name... Axes>
constexpr dim_spec axes_list() {
  dim_spec d;
  ((d.axes[d.count++] = Axes), ...);
  return d;
}

// The collectives' failures, out of line: functions of values, one copy per TU (not a
// message built in every collective's instantiation).
[[noreturn]] TYPESHARD_COLD inline void throw_dimension_out_of_rank(std::size_t dim,
                                                                  std::size_t rank,
                                                                  const char* op) {
  throw usage_error(std::string("typeshard: ") + op + ": dimension " + std::to_string(dim) +
                    " of a block of rank " + std::to_string(rank) +
                    "; name a dimension below the rank");
}
[[noreturn]] TYPESHARD_COLD inline void throw_split_not_divisible(std::size_t split_axis,
                                                                std::size_t extent,
                                                                std::size_t group_size) {
  throw shape_error("typeshard: all_to_all: split dimension " + std::to_string(split_axis) +
                    " has extent " + std::to_string(extent) +
                    ", not divisible by the group size " + std::to_string(group_size) +
                    "; use an extent that is a multiple of the group size");
}
[[noreturn]] TYPESHARD_COLD inline void throw_bad_permutation_pair(std::size_t source,
                                                                 std::size_t destination,
                                                                 std::size_t group_size) {
  throw usage_error("typeshard: ppermute: the pair (" + std::to_string(source) + ", " +
                    std::to_string(destination) + ") is outside a group of " +
                    std::to_string(group_size) + " or repeats a source or destination; " +
                    "give each rank at most once as a source and once as a destination");
}

template <class B>
void check_dimension(const B&, std::size_t dim, const char* op) {
  if (dim >= std::remove_cvref_t<B>::rank)
    throw_dimension_out_of_rank(dim, std::remove_cvref_t<B>::rank, op);
}

template <class B, std::uint64_t V>
using retyped = block<typename std::remove_cvref_t<B>::value_type, std::remove_cvref_t<B>::rank,
                      typename std::remove_cvref_t<B>::mesh_type, V>;

// x's block type, invariant over Axes (after a reduction or a gather over them) or varying
// over them (after a scatter or a permutation).
template <class B, axis_name... Axes>
using invariant_over = retyped<B, (std::remove_cvref_t<B>::varying &
                                   ~vary<typename std::remove_cvref_t<B>::mesh_type, Axes...>)>;
template <class B, axis_name... Axes>
using varying_over = retyped<B, (std::remove_cvref_t<B>::varying |
                                 vary<typename std::remove_cvref_t<B>::mesh_type, Axes...>)>;

// What a collective returns after its diagnostic fired: an (empty) block of x's type but
// varying over no axis. It satisfies every later check (an out spec's replication, rule 4;
// the operands of a matmul), so the one diagnostic stays the only error. Never run: the
// program does not compile.
template <class B>
auto after_diagnostic(const B& x) {
  return retyped<B, 0>(x.context(), x.extents());
}

template <class Mesh, axis_name... Axes>
mesh_group<Mesh> group_here(std::size_t position) {
  return group_of<Mesh>(axes_list<Axes...>(), position);
}

// body(g) with g the calling device's group over Axes, once Axes are checked (else the one
// diagnostic fired and the result is after_diagnostic(x)).
template <axis_name... Axes, class B, class Body>
auto checked_collective(const B& x, Body&& body) {
  using Mesh = typename std::remove_cvref_t<B>::mesh_type;
  if constexpr (!check_collective_axes<Mesh, Axes...>())
    return after_diagnostic(x);
  else
    return body(group_here<Mesh, Axes...>(x.context().position()));
}

// all_reduce of a block over its group g with `op`; the result is invariant over Axes.
template <reduce_op Op, axis_name... Axes, class B>
auto reduce_block(const B& x, const mesh_group<typename B::mesh_type>& g) {
  using T = typename B::value_type;
  buffer<T> out(x.size());
  x.context().get_backend().all_reduce(backend_group(g), element_type_of<T>, Op, x.data(),
                                       out.data(), out.size());
  return invariant_over<B, Axes...>(x.context(), x.extents(), std::move(out));
}

template <reduce_op Op, axis_name... Axes, class B>
auto checked_reduce(const B& x) {
  return checked_collective<Axes...>(
      x, [&](const auto& g) { return reduce_block<Op, Axes...>(x, g); });
}

}  // namespace typeshard::detail
