// typeshard/plan/dims_plan.hpp: the compile-time plans of the dimension moves (rule 8):
// permute (transpose), split_dim and merge_dims. None of them communicates.
//
//   using p = ts::permute_plan<mesh_2x2, ts::spec<"x", "y", ts::none>, ts::dextents<3>,
//                              ts::unreduced<>, 2, 0, 1>;
//   static_assert(std::is_same_v<p::out_spec, ts::spec<ts::none, "x", "y">>);
//   static_assert(ts::communication_free<p>);
//   p::describe();  // "local permute (2, 0, 1), no communication => PartitionSpec(None, 'x', 'y')"
//
//   // [B, S, D] with D = 8 x 64 sharded over "model" -> [B, S, 8, 64], heads over "model"
//   using s = ts::split_dim_plan<mesh, ts::spec<"data", ts::none, "model">,
//                                ts::extents<ts::dyn, ts::dyn, 512>, ts::unreduced<>, 2, 8>;
//   static_assert(std::is_same_v<s::out_spec, ts::spec<"data", ts::none, "model", ts::none>>);
//
// A permutation moves each dimension with its spec entry (NumPy's transpose(axes): output
// dimension i is input dimension Perm[i]): every device permutes its own block. A split or a
// merge is NumPy's reshape of one dimension into two (row-major) or of two into one; the
// major dimension keeps the spec entry. It is local (and copies nothing: a row-major block
// reshaped is the same bytes) exactly when the blocks of core/layout.hpp before and after
// cover the same flat index ranges (see core/rules/rule8_dimension_moves.hpp); where the
// extents decide it and are dynamic, `checked_at_run_time` says so and ts::split_dim /
// ts::merge_dims throw shape_error.
//
// Members: valid, rank, out_rank, out_spec, out_extents, out_unreduced, steps (empty:
// std::array<ts::step<rank>, 0>), communicates (false), collectives (0), bytes_per_device
// (0), copies_data (permute: true unless the identity; split/merge: false),
// checked_at_run_time, out_shape(shape), keeps_blocks(shape), describe().
//
// Compile-time vocabulary only: no runtime header is included.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <utility>

#include "../core/detail/diagnose.hpp"
#include "../core/detail/spec_layout.hpp"
#include "../core/extents.hpp"
#include "../core/layout.hpp"
#include "../core/mesh.hpp"
#include "../core/rules/rule8_dimension_moves.hpp"
#include "../core/spec.hpp"
#include "../core/unreduced.hpp"
#include "reshard_plan.hpp"  // ts::communication_free
#include "step.hpp"

namespace typeshard {

namespace detail {

// What is wrong with a dimension move, if anything (statically known), in the order a
// reader would fix it.
enum class dims_problem {
  none,
  permutation_invalid,
  dimension_out_of_range,
  split_not_divisible,
  split_needs_communication,
  merge_minor_sharded,
  merge_needs_communication
};

// Whether (Parts, extent / Parts) split from a dimension of `extent` in `shards` blocks
// (the major part keeping them) leaves every device the elements it holds: the flat block
// ceil(extent / shards) equals the major block ceil(Parts / shards) times the minor extent.
// Also the condition for merging (Parts, minor) back. Needs Parts >= 1 dividing extent.
constexpr bool split_keeps_blocks(std::size_t extent, std::size_t parts, std::size_t shards) {
  return shard_extent(extent, shards) == shard_extent(parts, shards) * (extent / parts);
}

template <std::size_t N>
constexpr bool is_permutation_of_rank(const std::array<std::size_t, N>& perm, std::size_t rank) {
  if (N != rank) return false;
  std::array<bool, N> seen{};
  for (std::size_t i = 0; i < N; ++i) {
    if (perm[i] >= N || seen[perm[i]]) return false;
    seen[perm[i]] = true;
  }
  return true;
}

// dims_spec_from<Array>(index_sequence): declared only, for decltype: the spec type whose
// entries are a spec_array's values.
template <auto Array, std::size_t... I>
spec<Array[I]...> dims_spec_from(std::index_sequence<I...>);
template <auto Array, std::size_t... I>
extents<Array[I]...> dims_extents_from(std::index_sequence<I...>);
// The spec and extents types of a constexpr array of spec entries or of static extents.
template <auto Array>
using dims_spec_of = decltype(dims_spec_from<Array>(std::make_index_sequence<Array.size()>{}));
template <auto Array>
using dims_extents_of =
    decltype(dims_extents_from<Array>(std::make_index_sequence<Array.size()>{}));

template <std::size_t Rank>
std::string shape_or_dyn_string(const std::array<std::size_t, Rank>& e) {
  std::string out = "(";
  for (std::size_t d = 0; d < Rank; ++d) {
    if (d) out += ", ";
    out += e[d] == dyn ? std::string("dyn") : std::to_string(e[d]);
  }
  if (Rank == 1) out += ",";
  return out + ")";
}

// `in` (spec entries or extents) with dimension d split into (major, minor) at d and d + 1.
template <class E, std::size_t R>
constexpr std::array<E, R + 1> split_dim_of(const std::array<E, R>& in, std::size_t d, E major,
                                            E minor) {
  std::array<E, R + 1> out{};
  for (std::size_t i = 0; i < R; ++i) out[i < d ? i : i + 1] = in[i];
  out[d] = major;
  out[d + 1] = minor;
  return out;
}

// The first OutRank entries of `in` without dimension m (with it, when !drop).
template <std::size_t OutRank, class E, std::size_t R>
constexpr std::array<E, OutRank> without_dim(const std::array<E, R>& in, std::size_t m,
                                             bool drop) {
  std::array<E, OutRank> out{};
  for (std::size_t i = 0, o = 0; i < R && o < OutRank; ++i)
    if (i != m || !drop) out[o++] = in[i];
  return out;
}

// The plans' common members: no collective, no bytes moved, the input's unreduced axes.
template <std::size_t Rank, class Unreduced>
struct local_dims_plan {
  using out_unreduced = Unreduced;
  static constexpr std::array<step<Rank>, 0> steps{};
  template <std::size_t N>
  static constexpr std::span<const step<Rank>> steps_for(const shape<N>&) {
    return {};
  }
  static constexpr std::size_t collectives = 0;
  static constexpr bool communicates = false;
  static constexpr std::size_t bytes_per_device = 0;
};

}  // namespace detail

// permute_plan<Mesh, Spec, Extents, Unreduced, Perm...>: output dimension i is input
// dimension Perm[i], with its spec entry and extent.
template <mesh_like Mesh, spec_like Spec, extents_like Extents, unreduced_like Unreduced,
          std::size_t... Perm>
struct permute_plan : detail::local_dims_plan<Extents::rank, Unreduced> {
  static constexpr std::size_t rank = Extents::rank;
  static constexpr std::size_t out_rank = rank;
  static constexpr std::array<std::size_t, sizeof...(Perm)> perm{Perm...};
  static constexpr detail::dims_problem problem =
      detail::is_permutation_of_rank(perm, rank) ? detail::dims_problem::none
                                                 : detail::dims_problem::permutation_invalid;
  static constexpr bool valid = problem == detail::dims_problem::none;
  static constexpr bool checked_at_run_time = false;

  // Where output dimension i comes from (the identity when the permutation is invalid, so
  // the members stay well-formed after the diagnostic).
  static constexpr std::size_t source(std::size_t i) { return valid ? perm[i] : i; }

 private:
  using padded = typename detail::padded_spec<Spec, rank>::type;
  static constexpr detail::spec_array<rank> in_entries = detail::spec_array_of<padded, rank>();
  static constexpr detail::spec_array<rank> out_entries = [] {
    detail::spec_array<rank> out{};
    for (std::size_t i = 0; i < rank; ++i) out[i] = in_entries[source(i)];
    return out;
  }();
  static constexpr std::array<std::size_t, rank> out_static = [] {
    std::array<std::size_t, rank> out{};
    for (std::size_t i = 0; i < rank; ++i) out[i] = Extents::static_extents[source(i)];
    return out;
  }();

 public:
  using out_spec = detail::dims_spec_of<out_entries>;
  using out_extents = detail::dims_extents_of<out_static>;

  static constexpr bool is_identity = [] {
    for (std::size_t i = 0; i < rank; ++i)
      if (source(i) != i) return false;
    return true;
  }();
  static constexpr bool copies_data = valid && !is_identity;

  static constexpr shape<rank> out_shape(const shape<rank>& in) {
    shape<rank> out{};
    for (std::size_t i = 0; i < rank; ++i) out[i] = in[source(i)];
    return out;
  }
  static constexpr bool keeps_blocks(const shape<rank>&) { return true; }

  // "local permute (1, 0), no communication => PartitionSpec(None, 'x')".
  static std::string describe() {
    std::string out = "local permute (";
    for (std::size_t i = 0; i < rank; ++i) out += (i ? ", " : "") + std::to_string(source(i));
    if (rank == 1) out += ",";
    out += is_identity ? "), nothing to do" : "), no communication";
    return out + " => " + detail::spec_string(out_entries);
  }
};

// split_dim_plan<Mesh, Spec, Extents, Unreduced, Dim, Parts>: dimension Dim of extent n
// becomes (Parts, n / Parts), row-major (NumPy's reshape); Parts keeps Dim's spec entry,
// n / Parts is unsharded.
template <mesh_like Mesh, spec_like Spec, extents_like Extents, unreduced_like Unreduced,
          std::size_t Dim, std::size_t Parts>
struct split_dim_plan : detail::local_dims_plan<Extents::rank + 1, Unreduced> {
  static constexpr std::size_t rank = Extents::rank;
  static constexpr std::size_t out_rank = rank + 1;
  static constexpr std::size_t dim = Dim;
  static constexpr std::size_t parts = Parts;

 private:
  static constexpr bool in_range = Dim < rank;
  static constexpr std::size_t D = in_range ? Dim : 0;  // keeps the members well-formed
  using padded = typename detail::padded_spec<Spec, rank>::type;
  static constexpr detail::spec_array<rank> in_entries = detail::spec_array_of<padded, rank>();

 public:
  // The dimension's extent when static (else ts::dyn).
  static constexpr bool extent_static = Extents::is_static(D);
  static constexpr std::size_t extent = Extents::static_extents[D];
  // The dimension's number of shards (the product of its axes' sizes).
  static constexpr std::size_t shards = detail::shards_of<Mesh>(in_entries[D]);
  // Parts a multiple of the shards: local whatever the extent.
  static constexpr bool local_for_any_extent = Parts != 0 && Parts % shards == 0;

  static constexpr detail::dims_problem problem = [] {
    using detail::dims_problem;
    if (!in_range) return dims_problem::dimension_out_of_range;
    if (Parts == 0 || (extent_static && extent % Parts != 0))
      return dims_problem::split_not_divisible;
    if (extent_static && !detail::split_keeps_blocks(extent, Parts, shards))
      return dims_problem::split_needs_communication;
    return dims_problem::none;
  }();
  static constexpr bool valid = problem == detail::dims_problem::none;
  // Whether ts::split_dim checks the extent when it runs (it is dynamic, and either Parts
  // must divide it or the blocks' agreement depends on it).
  static constexpr bool checked_at_run_time = valid && !extent_static;

 private:
  static constexpr detail::spec_array<out_rank> out_entries =
      detail::split_dim_of(in_entries, D, in_entries[D], dim_spec{});
  static constexpr std::array<std::size_t, out_rank> out_static = detail::split_dim_of(
      Extents::static_extents, D, Parts, extent_static && Parts != 0 ? extent / Parts : dyn);

 public:
  using out_spec = detail::dims_spec_of<out_entries>;
  using out_extents = detail::dims_extents_of<out_static>;
  static constexpr bool copies_data = false;

  static constexpr shape<out_rank> out_shape(const shape<rank>& in) {
    return detail::split_dim_of(in, D, Parts, Parts != 0 ? in[D] / Parts : 0);
  }
  // Whether extents `in` split locally (what ts::split_dim checks at run time).
  static constexpr bool divides(const shape<rank>& in) { return Parts != 0 && in[D] % Parts == 0; }
  static constexpr bool keeps_blocks(const shape<rank>& in) {
    return divides(in) && detail::split_keeps_blocks(in[D], Parts, shards);
  }

  // "local split of dimension 2: (512,) -> (8, 64), no communication, no copy =>
  // PartitionSpec(None, None, 'model', None)".
  static std::string describe() {
    return "local split of dimension " + std::to_string(D) + ": " +
           (extent_static ? std::to_string(extent) : std::string("dyn")) + " -> " +
           detail::shape_or_dyn_string(
               std::array<std::size_t, 2>{out_static[D], out_static[D + 1]}) +
           ", no communication, no copy => " + detail::spec_string(out_entries);
  }
};

// merge_dims_plan<Mesh, Spec, Extents, Unreduced, Dim>: dimensions Dim and Dim + 1, of
// extents (A, B), become one of extent A * B (NumPy's reshape); it keeps Dim's spec entry;
// Dim + 1 must be unsharded.
template <mesh_like Mesh, spec_like Spec, extents_like Extents, unreduced_like Unreduced,
          std::size_t Dim>
struct merge_dims_plan
    : detail::local_dims_plan<(Extents::rank > 1 ? Extents::rank - 1 : 1), Unreduced> {
  static constexpr std::size_t rank = Extents::rank;
  static constexpr std::size_t out_rank = rank > 1 ? rank - 1 : 1;
  static constexpr std::size_t dim = Dim;

 private:
  static constexpr bool in_range = Dim + 1 < rank;
  static constexpr std::size_t D = in_range ? Dim : 0;  // keeps the members well-formed
  static constexpr std::size_t M = in_range ? Dim + 1 : 0;
  using padded = typename detail::padded_spec<Spec, rank>::type;
  static constexpr detail::spec_array<rank> in_entries = detail::spec_array_of<padded, rank>();
  static constexpr bool major_static = Extents::is_static(D);
  static constexpr bool both_static = major_static && Extents::is_static(M);

 public:
  // The two extents when static (else ts::dyn).
  static constexpr std::size_t major = Extents::static_extents[D];
  static constexpr std::size_t minor = Extents::static_extents[M];
  static constexpr std::size_t shards = detail::shards_of<Mesh>(in_entries[D]);
  // The major extent a multiple of the shards: local whatever the extents.
  static constexpr bool local_for_any_extent = shards == 1 || (major_static && major % shards == 0);

  static constexpr detail::dims_problem problem = [] {
    using detail::dims_problem;
    if (!in_range) return dims_problem::dimension_out_of_range;
    if (!in_entries[M].is_none()) return dims_problem::merge_minor_sharded;
    if (both_static && !local_for_any_extent && major * minor != 0 &&
        !detail::split_keeps_blocks(major * minor, major, shards))
      return dims_problem::merge_needs_communication;
    return dims_problem::none;
  }();
  static constexpr bool valid = problem == detail::dims_problem::none;
  static constexpr bool checked_at_run_time = valid && !local_for_any_extent && !both_static;

 private:
  static constexpr detail::spec_array<out_rank> out_entries =
      detail::without_dim<out_rank>(in_entries, M, in_range);
  static constexpr std::array<std::size_t, out_rank> out_static = [] {
    auto out = detail::without_dim<out_rank>(Extents::static_extents, M, in_range);
    if (in_range) out[D] = both_static ? major * minor : dyn;
    return out;
  }();

 public:
  using out_spec = detail::dims_spec_of<out_entries>;
  using out_extents = detail::dims_extents_of<out_static>;
  static constexpr bool copies_data = false;

  static constexpr shape<out_rank> out_shape(const shape<rank>& in) {
    shape<out_rank> out = detail::without_dim<out_rank>(in, M, true);
    out[D] = in[D] * in[M];
    return out;
  }
  // Whether extents `in` merge locally (what ts::merge_dims checks at run time).
  static constexpr bool keeps_blocks(const shape<rank>& in) {
    return in[D] * in[M] == 0 || detail::split_keeps_blocks(in[D] * in[M], in[D], shards);
  }

  // "local merge of dimensions 2 and 3: (8, 64) -> 512, no communication, no copy =>
  // PartitionSpec(None, None, 'model')".
  static std::string describe() {
    return "local merge of dimensions " + std::to_string(D) + " and " + std::to_string(M) +
           ": " + detail::shape_or_dyn_string(std::array<std::size_t, 2>{major, minor}) + " -> " +
           (both_static ? std::to_string(major * minor) : std::string("dyn")) +
           ", no communication, no copy => " + detail::spec_string(out_entries);
  }
};

namespace detail {

// check_permute / check_reshape<Plan>() (a split_dim_plan or merge_dims_plan): fire the one
// diagnostic of a plan's problem (nothing when it is valid) and return Plan::valid, so the
// operation can stop there without a second error.
template <class Plan>
constexpr bool check_permute() {
  static_assert(require<Plan::problem != dims_problem::permutation_invalid,
                        diagnostic::permutation_invalid<Plan::rank, Plan::perm.size()>>::value);
  return Plan::valid;
}

template <class Plan>
constexpr bool check_reshape() {
  constexpr dims_problem p = Plan::problem;
  if constexpr (p == dims_problem::dimension_out_of_range) {
    static_assert(require<false, diagnostic::dimension_out_of_range<Plan::dim, Plan::rank>>::value);
  } else if constexpr (p == dims_problem::split_not_divisible) {
    static_assert(require<false, diagnostic::split_extent_not_divisible<Plan::dim, Plan::extent,
                                                                        Plan::parts>>::value);
  } else if constexpr (p == dims_problem::split_needs_communication) {
    static_assert(require<false, diagnostic::split_needs_communication<Plan::dim, Plan::parts,
                                                                       Plan::shards>>::value);
  } else if constexpr (p == dims_problem::merge_minor_sharded) {
    static_assert(require<false, diagnostic::merge_minor_sharded<Plan::dim>>::value);
  } else if constexpr (p == dims_problem::merge_needs_communication) {
    static_assert(require<false, diagnostic::merge_needs_communication<Plan::dim, Plan::major,
                                                                       Plan::shards>>::value);
  }
  return Plan::valid;
}

}  // namespace detail

}  // namespace typeshard
