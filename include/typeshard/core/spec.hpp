// typeshard/core/spec.hpp: PartitionSpec as a type.
//
//   ts::spec<"x", ts::none>                 // P('x', None): rows over x, columns replicated
//   ts::spec<ts::axes("x", "y"), ts::none>  // P(('x', 'y'), None): rows over x then y
//
// One entry per array dimension: ts::none, one mesh axis, or several (ts::axes(...), the
// first axis major). Missing trailing entries mean ts::none. Rule 1 of DESIGN.md (every
// axis exists in the mesh, no mesh axis twice, no more entries than dimensions) is checked
// where a spec meets a mesh and a rank: see check_spec below.
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "config.hpp"
#include "detail/axis_name.hpp"
#include "detail/diagnose.hpp"
#include "mesh.hpp"
#include "rules/rule1_spec.hpp"

namespace typeshard {

// none: a replicated (unsharded) dimension, JAX's None in a PartitionSpec.
struct none_t {
  explicit constexpr none_t() = default;
};
inline constexpr none_t none{};

// dim_spec: the sharding of one array dimension: no axis, one axis, or several.
struct dim_spec {
  static constexpr std::size_t max_axes = 4;

  axis_name axes[max_axes]{};
  std::size_t count = 0;

  constexpr dim_spec() = default;
  consteval dim_spec(none_t) {}  // NOLINT: implicit so that spec<ts::none> reads naturally
  template <std::size_t N>
  consteval dim_spec(const char (&axis_label)[N]) : count(1) {  // NOLINT: spec<"x">
    axes[0] = axis_name(axis_label);
  }

  constexpr bool is_none() const { return count == 0; }
  constexpr bool uses(axis_name name) const {
    for (std::size_t i = 0; i < count; ++i)
      if (axes[i] == name) return true;
    return false;
  }
  friend constexpr bool operator==(const dim_spec&, const dim_spec&) = default;
};

// axes("x", "y"): one dimension sharded over several mesh axes, the first one major.
template <std::size_t... N>
consteval dim_spec axes(const char (&... axis_labels)[N]) {
  static_assert(sizeof...(N) >= 1 && sizeof...(N) <= dim_spec::max_axes,
                "typeshard: ts::axes(...) takes 1 to 4 mesh axis names; fix: name 1 to 4 axes "
                "for one dimension (a dimension is sharded over at most 4 axes)");
  dim_spec d;
  if constexpr (sizeof...(N) <= dim_spec::max_axes)  // else only the message above
    ((d.axes[d.count++] = axis_name(axis_labels)), ...);
  return d;
}

// spec<dim_spec...>: a PartitionSpec.
template <dim_spec... Dims>
struct spec {
  static constexpr std::size_t size = sizeof...(Dims);
  static constexpr std::array<dim_spec, size> dims{Dims...};

  // The entry for dimension d; none past the end.
  static constexpr dim_spec dim(std::size_t d) { return d < size ? dims[d] : dim_spec{}; }

  // Whether any dimension is sharded over the named axis.
  static constexpr bool uses(axis_name name) {
    for (const dim_spec& d : dims)
      if (d.uses(name)) return true;
    return false;
  }

  // Which dimension is sharded over the named axis, or size when none is.
  static constexpr std::size_t dimension_of(axis_name name) {
    for (std::size_t i = 0; i < size; ++i)
      if (dims[i].uses(name)) return i;
    return size;
  }

  // "PartitionSpec('x', None)" / "PartitionSpec(('x', 'y'),)", as JAX prints it. Built
  // with append, not "'" + std::string: g++ 12 -O3 warns falsely there (-Wrestrict).
  TYPESHARD_COLD static std::string to_string() {
    std::string out = "PartitionSpec(";
    for (std::size_t i = 0; i < size; ++i) {
      if (i) out += ", ";
      const dim_spec& d = dims[i];
      if (d.is_none()) {
        out += "None";
      } else if (d.count == 1) {
        out.append("'").append(d.axes[0].view()).append("'");
      } else {
        out += "(";
        for (std::size_t a = 0; a < d.count; ++a) {
          if (a) out += ", ";
          out.append("'").append(d.axes[a].view()).append("'");
        }
        out += ")";
      }
    }
    if (size == 1) out += ",";
    return out + ")";
  }
};

template <class T>
inline constexpr bool is_spec_v = false;
template <dim_spec... Dims>
inline constexpr bool is_spec_v<spec<Dims...>> = true;

template <class T>
concept spec_like = is_spec_v<T>;

namespace detail {

// padded_spec<Spec, Rank>: Spec with trailing nones up to Rank entries, the canonical
// form an array's type carries, so spec<"x"> and spec<"x", none> mean one type for a
// matrix. A spec longer than Rank is left as it is (check_spec reports it).
template <class Spec, std::size_t Rank, class = std::make_index_sequence<Rank>>
struct padded_spec {
  using type = Spec;
};
template <dim_spec... Dims, std::size_t Rank, std::size_t... I>
  requires(sizeof...(Dims) <= Rank)
struct padded_spec<spec<Dims...>, Rank, std::index_sequence<I...>> {
  using type = spec<spec<Dims...>::dim(I)...>;
};

struct spec_problem {
  enum kind { none, too_long, unknown_axis, repeated_axis } what = none;
  axis_name axis{};
};

// The first problem of Spec on Mesh for an array of rank Rank (rule 1), in the order a
// reader would fix them.
template <class Mesh, class Spec, std::size_t Rank>
constexpr spec_problem find_spec_problem() {
  if (Spec::size > Rank) return {spec_problem::too_long, {}};
  std::array<axis_name, Spec::size * dim_spec::max_axes + 1> seen{};
  std::size_t n = 0;
  for (const dim_spec& d : Spec::dims) {
    for (std::size_t a = 0; a < d.count; ++a) {
      if (!Mesh::contains(d.axes[a])) return {spec_problem::unknown_axis, d.axes[a]};
      for (std::size_t s = 0; s < n; ++s)
        if (seen[s] == d.axes[a]) return {spec_problem::repeated_axis, d.axes[a]};
      seen[n++] = d.axes[a];
    }
  }
  return {};
}

// check_spec<Mesh, Spec, Rank>(): true when Spec is valid; otherwise fires the rule's
// diagnostic (one error, naming the axis) and still returns a value so nothing cascades.
template <class Mesh, class Spec, std::size_t Rank>
constexpr bool check_spec() {
  constexpr spec_problem p = find_spec_problem<Mesh, Spec, Rank>();
  static_assert(require<p.what != spec_problem::too_long,
                        diagnostic::spec_longer_than_rank<Spec::size, Rank>>::value);
  static_assert(require_named<p.what != spec_problem::unknown_axis, p.axis,
                              diagnostic::axis_not_in_mesh>::value);
  static_assert(require_named<p.what != spec_problem::repeated_axis, p.axis,
                              diagnostic::axis_used_twice>::value);
  return p.what == spec_problem::none;
}

}  // namespace detail

// valid_spec<Mesh, Spec, Rank>: whether Spec is a valid sharding of a rank-Rank array on
// Mesh, without diagnosing (for requires-clauses and static_assert(!...) tests).
template <class Mesh, class Spec, std::size_t Rank>
inline constexpr bool valid_spec =
    detail::find_spec_problem<Mesh, Spec, Rank>().what == detail::spec_problem::none;

}  // namespace typeshard
