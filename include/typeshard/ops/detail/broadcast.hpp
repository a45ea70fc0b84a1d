// typeshard/ops/detail/broadcast.hpp: NumPy broadcasting of two sharded operands, at compile
// time (the result's spec and extents, rule 5's checks) and per device at run time (where
// each operand's elements are in its block). Internal: do not rely on anything in detail/.
//
// Trailing dimensions are aligned; an operand missing a leading dimension, or of extent 1
// there, stretches. Per result dimension the sharding is the operands' common entry, or the
// entry of the one operand that shards it (the other holds that dimension whole: each device
// reads its slice of it, no communication). Sharded over different axes in the two, or one
// axis sharding two result dimensions, is a compile error; a stretching dimension must be
// unsharded (checked at compile time for a static extent 1, at run time otherwise).
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <utility>

#include "../../array/sharded_array.hpp"
#include "../../core/config.hpp"
#include "../../core/detail/diagnose.hpp"
#include "../../core/errors.hpp"
#include "../../core/extents.hpp"
#include "../../core/layout.hpp"
#include "../../core/rules/rule5_elementwise.hpp"
#include "../../core/spec.hpp"

namespace typeshard::detail {

template <std::size_t A, std::size_t B>
inline constexpr std::size_t broadcast_rank = A < B ? B : A;

struct broadcast_problem {
  enum kind { none, extents_differ, sharded_differently, axis_on_two_dims, stretch_sharded };
  kind what = none;
  std::size_t dim = 0;
  std::size_t lhs_extent = 0, rhs_extent = 0;
  axis_name axis{};
};

// The compile-time view of `A op B` (arrays of ranks A::rank and B::rank, padded specs).
template <class A, class B>
struct broadcast_of {
  static constexpr std::size_t rank = broadcast_rank<A::rank, B::rank>;
  static constexpr std::size_t lhs_lead = rank - A::rank;  // result dimension of A's first
  static constexpr std::size_t rhs_lead = rank - B::rank;

  // An operand's entry and static extent for result dimension i (a missing leading
  // dimension: none, extent 1).
  static constexpr dim_spec lhs_entry(std::size_t i) {
    return i < lhs_lead ? dim_spec{} : A::spec::dim(i - lhs_lead);
  }
  static constexpr dim_spec rhs_entry(std::size_t i) {
    return i < rhs_lead ? dim_spec{} : B::spec::dim(i - rhs_lead);
  }
  static constexpr std::size_t lhs_extent(std::size_t i) {
    return i < lhs_lead ? 1 : A::extents_type::static_extents[i - lhs_lead];
  }
  static constexpr std::size_t rhs_extent(std::size_t i) {
    return i < rhs_lead ? 1 : B::extents_type::static_extents[i - rhs_lead];
  }

  // The result's entry: the sharded one (equal when both are, else problem() says so).
  static constexpr dim_spec entry(std::size_t i) {
    return lhs_entry(i).is_none() ? rhs_entry(i) : lhs_entry(i);
  }
  // The result's static extent: a static extent other than 1 wins; 1 only when both are 1.
  static constexpr std::size_t extent(std::size_t i) {
    const std::size_t a = lhs_extent(i), b = rhs_extent(i);
    if (a != dyn && a != 1) return a;
    if (b != dyn && b != 1) return b;
    if (a == 1 && b == 1) return 1;
    return dyn;
  }

  static constexpr broadcast_problem problem() {
    for (std::size_t i = 0; i < rank; ++i) {
      const std::size_t a = lhs_extent(i), b = rhs_extent(i);
      if (a != dyn && b != dyn && a != b && a != 1 && b != 1)
        return {broadcast_problem::extents_differ, i, a, b, {}};
    }
    for (std::size_t i = 0; i < rank; ++i) {
      const dim_spec l = lhs_entry(i), r = rhs_entry(i);
      if (!l.is_none() && !r.is_none() && !(l == r))
        return {broadcast_problem::sharded_differently, i, 0, 0, {}};
      // A static extent 1 stretching to another extent must be unsharded.
      const std::size_t a = lhs_extent(i), b = rhs_extent(i);
      if ((a == 1 && b != 1 && !l.is_none()) || (b == 1 && a != 1 && !r.is_none()))
        return {broadcast_problem::stretch_sharded, i, a, b, {}};
    }
    for (std::size_t i = 0; i < rank; ++i)
      for (std::size_t k = 0; k < entry(i).count; ++k)
        for (std::size_t j = i + 1; j < rank; ++j)
          if (entry(j).uses(entry(i).axes[k]))
            return {broadcast_problem::axis_on_two_dims, j, 0, 0, entry(i).axes[k]};
    return {};
  }

  template <std::size_t... I>
  static spec<entry(I)...> spec_of(std::index_sequence<I...>);
  template <std::size_t... I>
  static extents<extent(I)...> extents_of(std::index_sequence<I...>);
  using spec_type = decltype(spec_of(std::make_index_sequence<rank>{}));
  using extents_type = decltype(extents_of(std::make_index_sequence<rank>{}));

  // Whether the operands have one layout type (the fast path: no broadcasting unless a
  // dynamic extent turns out to be 1).
  static constexpr bool same_layout =
      A::rank == B::rank && std::is_same_v<typename A::spec, typename B::spec>;
};

// Fires rule 5's diagnostic for the first problem (one at most); true when there is none.
template <class A, class B>
constexpr bool check_broadcast() {
  using bc = broadcast_of<A, B>;
  constexpr broadcast_problem p = bc::problem();
  if constexpr (p.what == broadcast_problem::extents_differ) {
    return require<false, diagnostic::broadcast_extents_differ<p.dim, p.lhs_extent,
                                                               p.rhs_extent>>::value &&
           false;
  } else if constexpr (p.what == broadcast_problem::sharded_differently) {
    return require<false, diagnostic::elementwise_specs_differ<typename A::spec,
                                                               typename B::spec>>::value &&
           false;
  } else if constexpr (p.what == broadcast_problem::stretch_sharded) {
    return require<false, diagnostic::broadcast_dimension_sharded<p.dim>>::value && false;
  } else if constexpr (p.what == broadcast_problem::axis_on_two_dims) {
    return require_named<false, p.axis, diagnostic::elementwise_axis_on_two_dims>::value && false;
  } else {
    return true;
  }
}

// broadcast_shape's failures, out of line: functions of values, one copy per TU.
[[noreturn]] TYPESHARD_COLD inline void throw_not_broadcastable(const char* op,
                                                             std::span<const std::size_t> a,
                                                             std::span<const std::size_t> b,
                                                             std::size_t i, std::size_t ea,
                                                             std::size_t eb) {
  throw shape_error(message({"typeshard: ", op, ": the operands have shapes ", shape_string(a),
                             " and ", shape_string(b), ", which do not broadcast (dimension ",
                             i, " of the result: ", ea, " and ", eb,
                             "); fix: trailing dimensions must be equal or 1 in one operand"}));
}
[[noreturn]] TYPESHARD_COLD inline void throw_stretches_sharded(const char* op, std::size_t i,
                                                             std::size_t extent) {
  throw shape_error(message({"typeshard: ", op, ": dimension ", i,
                             " of the result stretches an operand's extent 1 to ", extent,
                             ", but that operand shards it (only one device holds its "
                             "element); fix: reshard that operand to ts::none on that "
                             "dimension first"}));
}

// The result's global extents for the operands' run-time extents; throws shape_error when
// they do not broadcast, or when a stretching dimension is sharded.
template <std::size_t Rank, std::size_t RA, std::size_t RB>
TYPESHARD_NOINLINE shape<Rank> broadcast_shape(const shape<RA>& a, const spec_array<RA>& as,
                                               const shape<RB>& b, const spec_array<RB>& bs,
                                               const char* op) {
  shape<Rank> out{};
  for (std::size_t i = 0; i < Rank; ++i) {
    const bool has_a = i >= Rank - RA, has_b = i >= Rank - RB;
    const std::size_t ea = has_a ? a[i - (Rank - RA)] : 1;
    const std::size_t eb = has_b ? b[i - (Rank - RB)] : 1;
    if (ea != eb && ea != 1 && eb != 1) throw_not_broadcastable(op, a, b, i, ea, eb);
    out[i] = ea == 1 ? eb : ea;
    const bool a_stretches = ea == 1 && eb != 1 && has_a && !as[i - (Rank - RA)].is_none();
    const bool b_stretches = eb == 1 && ea != 1 && has_b && !bs[i - (Rank - RB)].is_none();
    if (a_stretches || b_stretches) throw_stretches_sharded(op, i, out[i]);
  }
  return out;
}

// Where one operand's elements are, for the block of the result at one mesh position: the
// offset of the block's first element and a stride per result dimension (0 where the
// operand stretches or lacks the dimension).
template <std::size_t Rank>
struct operand_view {
  std::size_t offset = 0;
  std::array<std::size_t, Rank> stride{};
};

template <std::size_t Rank, std::size_t R>
operand_view<Rank> view_of(const mesh_value& m, const spec_array<R>& s, const shape<R>& global,
                           const shape<Rank>& out_global, const index_slices<Rank>& out_index,
                           std::size_t position) {
  const index_slices<R> ix = index_of(m, s, global, position);
  std::array<std::size_t, R> local_stride{};
  std::size_t st = 1;
  for (std::size_t d = R; d-- > 0;) {
    local_stride[d] = st;
    st *= ix[d].size();
  }
  operand_view<Rank> v;
  for (std::size_t d = 0; d < R; ++d) {
    const std::size_t i = d + (Rank - R);
    if (global[d] == 1 && out_global[i] != 1) continue;  // stretches: stride 0
    v.stride[i] = local_stride[d];
    // The operand holds the result's slice of this dimension (the same entry), or all of it.
    v.offset += (out_index[i].start - ix[d].start) * local_stride[d];
  }
  return v;
}

// out[k] = f(a[...], b[...]) over a row-major block of shape `s`, the operands read through
// their views; the innermost dimension is a plain loop.
template <class R, class T1, class T2, std::size_t Rank, class F>
void zip_views(const T1* a, const operand_view<Rank>& va, const T2* b,
               const operand_view<Rank>& vb, const shape<Rank>& s, R* out, F f) {
  std::size_t n = 1;
  for (std::size_t e : s) n *= e;
  if (n == 0) return;
  const std::size_t len = s[Rank - 1];
  const std::size_t sa = va.stride[Rank - 1], sb = vb.stride[Rank - 1];
  std::array<std::size_t, Rank> idx{};
  std::size_t oa = va.offset, ob = vb.offset;
  for (std::size_t i = 0; i < n; i += len) {
    const T1* pa = a + oa;
    const T2* pb = b + ob;
    R* o = out + i;
    // Along the innermost dimension an operand is contiguous (stride 1) or stretches
    // (stride 0), and never both operands stretch (the result's extent there is the other's).
    // A stretching operand is one value per row, read once: a statistic over the last
    // dimension (layer norm's x - mean, x / std). Three plain loops the compiler vectorises;
    // a strided loop took 4.8 instructions an element there, these 0.95 (g++ 12
    // -O3 -march=native, float division).
    if (sb == 0) {
      const T2 y = *pb;
      for (std::size_t k = 0; k < len; ++k) o[k] = f(pa[k], y);
    } else if (sa == 0) {
      const T1 x = *pa;
      for (std::size_t k = 0; k < len; ++k) o[k] = f(x, pb[k]);
    } else {
      for (std::size_t k = 0; k < len; ++k) o[k] = f(pa[k], pb[k]);
    }
    for (std::size_t d = Rank - 1; d-- > 0;) {
      oa += va.stride[d];
      ob += vb.stride[d];
      if (++idx[d] < s[d]) break;
      oa -= va.stride[d] * s[d];
      ob -= vb.stride[d] * s[d];
      idx[d] = 0;
    }
  }
}

}  // namespace typeshard::detail
