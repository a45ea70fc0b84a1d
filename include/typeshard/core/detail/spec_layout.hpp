// typeshard/core/detail/spec_layout.hpp: a spec held as a value (detail::spec_array): how
// it prints, and prefix tests. Internal: do not rely on anything in detail/.
//
// layout<Mesh, Spec, Rank> takes the spec as a type. A reshard plan passes through
// intermediate shardings that are values (the sharding after each step), so plans and
// executors work on std::array<dim_spec, Rank>; one executor then serves every pair of
// specs instead of one instantiation per pair. The arithmetic on such values (index_of,
// local_shape_of, ...) is the layout core in layout.hpp.
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "../layout.hpp"
#include "../spec.hpp"

namespace typeshard::detail {

// Whether `prefix` lists the first axes of `full`, in order.
constexpr bool is_prefix(const dim_spec& prefix, const dim_spec& full) {
  if (prefix.count > full.count) return false;
  for (std::size_t a = 0; a < prefix.count; ++a)
    if (!(prefix.axes[a] == full.axes[a])) return false;
  return true;
}

inline std::string axes_string(const dim_spec& d) {
  if (d.count == 0) return "None";
  // Appended piece by piece: g++ 12 -O3 warns falsely (-Wrestrict) on "'" + std::string.
  if (d.count == 1) return std::string("'").append(d.axes[0].view()).append("'");
  std::string out = "(";
  for (std::size_t a = 0; a < d.count; ++a) {
    if (a) out += ", ";
    out.append("'").append(d.axes[a].view()).append("'");
  }
  return out + ")";
}

// "PartitionSpec('x', None)", as spec<...>::to_string prints the same spec.
template <std::size_t Rank>
std::string spec_string(const spec_array<Rank>& s) {
  std::string out = "PartitionSpec(";
  for (std::size_t d = 0; d < Rank; ++d) {
    if (d) out += ", ";
    out += axes_string(s[d]);
  }
  if (Rank == 1) out += ",";
  return out + ")";
}

}  // namespace typeshard::detail
