// typeshard/plan/detail/reduce_dims.hpp: which dimensions a reduction reduces and keeps, and
// the types (extents, specs) of its result, for plan/reduce_plan.hpp.
// Internal: do not rely on anything in detail/.
#pragma once

#include <array>
#include <cstddef>
#include <utility>

#include "../../core/detail/spec_layout.hpp"
#include "../../core/extents.hpp"
#include "../../core/spec.hpp"

namespace typeshard::detail {

// ---- which dimensions: NumPy's axis numbers (negative counts from the last) ---------------

struct reduce_dims_problem {
  enum kind { none, out_of_range, repeated } what = none;
  int dim = 0;
};

template <std::size_t Rank, int... Dims>
constexpr reduce_dims_problem find_reduce_dims_problem() {
  std::array<bool, Rank> seen{};
  for (const int d : std::array<int, sizeof...(Dims)>{Dims...}) {
    const long long r = static_cast<long long>(Rank);
    if (d >= r || d < -r) return {reduce_dims_problem::out_of_range, d};
    const std::size_t i = static_cast<std::size_t>(d < 0 ? d + r : d);
    if (seen[i]) return {reduce_dims_problem::repeated, d};
    seen[i] = true;
  }
  return {};
}

// The reduced dimensions as a mask (no Dims: every dimension).
template <std::size_t Rank, int... Dims>
constexpr std::array<bool, Rank> reduced_mask() {
  std::array<bool, Rank> m{};
  if constexpr (sizeof...(Dims) == 0) {
    m.fill(true);
  } else {
    for (const int d : std::array<int, sizeof...(Dims)>{Dims...}) {
      const long long i = d < 0 ? d + static_cast<long long>(Rank) : d;
      if (i >= 0 && i < static_cast<long long>(Rank)) {
        m[static_cast<std::size_t>(i)] = true;
      } else {
        // Out of range (rule 7 fired): mark the last dimension not yet marked, so the
        // result still has the rank the caller expects and nothing else fails.
        for (std::size_t k = Rank; k-- > 0;)
          if (!m[k]) {
            m[k] = true;
            break;
          }
      }
    }
  }
  return m;
}

// The input dimensions the result keeps, in order (its dimension j is input dimension
// kept[j]); none (a rank-0 result) without keep_dims and with every dimension reduced.
template <std::size_t Rank>
struct kept_dims {
  std::array<std::size_t, Rank> dims{};
  std::size_t count = 0;
};
template <std::size_t Rank>
constexpr kept_dims<Rank> kept_dims_of(const std::array<bool, Rank>& mask, bool keep_all) {
  kept_dims<Rank> k;
  for (std::size_t d = 0; d < Rank; ++d)
    if (keep_all || !mask[d]) k.dims[k.count++] = d;
  return k;
}

// The mesh axes the reduced dimensions are sharded over, in dimension order.
template <std::size_t Rank>
constexpr std::size_t partial_axis_count(const spec_array<Rank>& s,
                                         const std::array<bool, Rank>& mask) {
  std::size_t n = 0;
  for (std::size_t d = 0; d < Rank; ++d)
    if (mask[d]) n += s[d].count;
  return n;
}
template <std::size_t Rank>
constexpr dim_spec partial_axes_of(const spec_array<Rank>& s, const std::array<bool, Rank>& mask) {
  dim_spec out;
  for (std::size_t d = 0; d < Rank; ++d)
    if (mask[d])
      for (std::size_t a = 0; a < s[d].count && out.count < dim_spec::max_axes; ++a)
        out.axes[out.count++] = s[d].axes[a];
  return out;
}

// `a` followed by the axes of `b` (disjoint: an unreduced axis never shards a dimension).
constexpr dim_spec join_axes(const dim_spec& a, const dim_spec& b) {
  dim_spec out = a;
  for (std::size_t i = 0; i < b.count && out.count < dim_spec::max_axes; ++i)
    out.axes[out.count++] = b.axes[i];
  return out;
}

template <std::size_t Rank>
constexpr spec_array<Rank> without_reduced(spec_array<Rank> s, const std::array<bool, Rank>& mask) {
  for (std::size_t d = 0; d < Rank; ++d)
    if (mask[d]) s[d] = dim_spec{};
  return s;
}

// The result's extents: at the input's rank with the reduced dimensions kept (extent 1),
// and at the output's rank. Types and integers only as template arguments: g++ 12 confuses
// function templates whose arguments are std::array<bool, N> values.
template <class Extents, bool Keep, int... Dims>
struct reduce_extents {
  static constexpr std::size_t rank = Extents::rank;
  static constexpr std::array<bool, rank> mask = reduced_mask<rank, Dims...>();
  static constexpr kept_dims<rank> kept = kept_dims_of<rank>(mask, Keep);
  static constexpr std::size_t keep_extent(std::size_t d) {
    return mask[d] ? std::size_t{1} : Extents::static_extents[d];
  }
  template <std::size_t... D>
  static extents<keep_extent(D)...> keep_of(std::index_sequence<D...>);
  template <std::size_t... J>
  static extents<keep_extent(kept.dims[J])...> out_of(std::index_sequence<J...>);
  using keep_type = decltype(keep_of(std::make_index_sequence<rank>{}));
  using out_type = decltype(out_of(std::make_index_sequence<kept.count>{}));
};

// The output spec at the input's rank: OutSpec's entries on the kept dimensions, none on the
// others.
template <class OutSpec, std::size_t Rank, std::size_t OutRank>
constexpr spec_array<Rank> spread_out_spec(const kept_dims<Rank>& k) {
  spec_array<Rank> s{};
  for (std::size_t j = 0; j < k.count && j < OutRank; ++j) s[k.dims[j]] = OutSpec::dim(j);
  return s;
}

// The spec types of a plan, entry by entry from fresh values: spec<entry(I)...> rather than
// spec<Array[I]...> of a constexpr member, which g++ 12 fails to substitute for some values
// (multi-axis entries copied out of a constexpr object, as detail/contraction_members.hpp notes).
template <class InSpec, std::size_t Rank, class OutSpec, bool Named, bool Keep, int... Dims>
struct reduce_spec_types {
  static constexpr std::size_t out_rank =
      kept_dims_of<Rank>(reduced_mask<Rank, Dims...>(), Keep).count;
  static constexpr dim_spec local_entry(std::size_t d) {
    return reduced_mask<Rank, Dims...>()[d] ? dim_spec{} : InSpec::dim(d);
  }
  static constexpr dim_spec target_entry(std::size_t d) {
    if constexpr (Named) {
      return spread_out_spec<OutSpec, Rank, out_rank>(
          kept_dims_of<Rank>(reduced_mask<Rank, Dims...>(), Keep))[d];
    } else {
      return local_entry(d);
    }
  }
  static constexpr dim_spec out_entry(std::size_t j) {
    return target_entry(kept_dims_of<Rank>(reduced_mask<Rank, Dims...>(), Keep).dims[j]);
  }
  template <std::size_t... I>
  static spec<local_entry(I)...> local_of(std::index_sequence<I...>);
  template <std::size_t... I>
  static spec<target_entry(I)...> target_of(std::index_sequence<I...>);
  template <std::size_t... I>
  static spec<out_entry(I)...> out_of(std::index_sequence<I...>);
  using local_type = decltype(local_of(std::make_index_sequence<Rank>{}));
  using target_type = decltype(target_of(std::make_index_sequence<Rank>{}));
  using out_type = decltype(out_of(std::make_index_sequence<out_rank>{}));
};

}  // namespace typeshard::detail
