// typeshard/plan/reshard_plan.hpp: the compile-time plan of a reshard, a type you can inspect.
//
//   using plan = ts::reshard_plan<mesh_2x2, ts::spec<"x", ts::none>, ts::spec<ts::none, "x">,
//                                 ts::extents<8, 8>>;
//   static_assert(plan::steps.size() == 1);
//   static_assert(plan::steps[0].kind == ts::step_kind::all_to_all);
//   static_assert(!ts::communication_free<plan>);
//   std::cout << plan::describe();
//
// A plan moves an array from one sharding (plus the mesh axes it is unreduced over) to
// another on the same mesh, in steps, each a collective over some mesh axes or a local
// slice:
//   1. reduce: every unreduced axis the target shards a dimension over, in the next
//      place of that dimension's axes, is reduced by psum_scatter (reduce-scatter) along
//      it; the other unreduced axes by one psum (all-reduce) over all of them.
//   2. move: while some dimension's axes are not a prefix of the target's, the
//      minor-most extra axis leaves it: by all_to_all when it is the next axis the target
//      wants on another dimension (both dimensions change in one exchange), else by
//      all_gather (one multi-axis all_gather when several axes leave one dimension).
//   3. slice: the axes the target adds to each dimension are taken locally, one copy, no
//      communication (replicated -> sharded is free).
// Communication is only what the target needs: every all_gather removes an axis the
// target does not want there, every all_to_all puts one where it wants it.
//
// Uneven shards (an extent not divisible by its dimension's shards) do not nest: the
// blocks of P(('x', 'y')) are not sub-blocks of P('x')'s. For them the plan is simpler
// (uneven_steps): reduce (psum_scatter only onto a dimension not yet sharded), gather
// every dimension whose axes change completely, then slice. When every extent is static
// the plan knows which applies (`evenness`); with dynamic extents the executor checks the
// shapes at run time and runs `steps` when both shardings are even, `uneven_steps`
// otherwise.
//
// Compile-time vocabulary only: no runtime header is included.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <type_traits>

#include "../core/config.hpp"
#include "../core/detail/diagnose.hpp"
#include "../core/detail/mesh_group.hpp"
#include "../core/detail/spec_layout.hpp"
#include "../core/extents.hpp"
#include "../core/mesh.hpp"
#include "../core/spec.hpp"
#include "../core/unreduced.hpp"
#include "detail/reshard_planner.hpp"
#include "step.hpp"
#include "../core/rules/rule3_unreduced.hpp"

namespace typeshard {

// shard_evenness: whether a plan's shards are known to divide evenly.
enum class shard_evenness { even, uneven, decided_at_run_time };

namespace detail {

template <class Unreduced>
constexpr dim_spec unreduced_list() {
  dim_spec out;
  for (std::size_t i = 0; i < Unreduced::size && i < dim_spec::max_axes; ++i)
    append(out, Unreduced::axes[i]);
  return out;
}

// The first axis of Unreduced that Spec also shards (or an empty name).
template <class Spec, class Unreduced>
constexpr axis_name unreduced_sharding_axis() {
  for (std::size_t i = 0; i < Unreduced::size; ++i)
    if (Spec::uses(Unreduced::axes[i])) return Unreduced::axes[i];
  return {};
}

// Whether the extents are all static, and if so whether both shardings are even.
template <class Mesh, class Extents, std::size_t Rank>
constexpr shard_evenness evenness_of(const spec_array<Rank>& from, const spec_array<Rank>& to) {
  if constexpr (!Extents::all_static) {
    return shard_evenness::decided_at_run_time;
  } else {
    shape<Rank> global{};
    for (std::size_t d = 0; d < Rank; ++d) global[d] = Extents::static_extents[d];
    return is_even<Mesh>(from, global) && is_even<Mesh>(to, global) ? shard_evenness::even
                                                                     : shard_evenness::uneven;
  }
}

template <std::size_t N, std::size_t Rank>
constexpr bool any_communicates(const std::array<step<Rank>, N>& steps) {
  for (const auto& s : steps)
    if (s.communicates()) return true;
  return false;
}

// Checks a plan's inputs (rule 1 for the target, rule 3 for the unreduced axes); fires one
// diagnostic and returns false on the first problem.
template <class Mesh, class From, class To, std::size_t Rank, class Unreduced, class Keep>
constexpr bool check_reshard() {
  if constexpr (!check_spec<Mesh, To, Rank>()) {
    return false;
  } else if constexpr (Unreduced::size > dim_spec::max_axes) {
    return require<false, diagnostic::too_many_unreduced_axes<Unreduced::size>>::value && false;
  } else if constexpr (!unreduced_sharding_axis<typename padded_spec<From, Rank>::type,
                                                Unreduced>()
                            .empty()) {
    return require_named<false,
                         unreduced_sharding_axis<typename padded_spec<From, Rank>::type,
                                                 Unreduced>(),
                         diagnostic::unreduced_axis_also_shards>::value &&
           false;
  } else {
    (void)sizeof(Keep);
    return true;
  }
}

}  // namespace detail

namespace detail {
template <std::size_t Rank>
std::string describe_plan(std::string title, shard_evenness evenness,
                          std::span<const step<Rank>> even,
                          std::span<const step<Rank>> uneven);
}  // namespace detail

// reshard_plan<Mesh, From, To, Extents, Unreduced, Keep>: how an array of extents Extents,
// sharded by From and unreduced over Unreduced, becomes sharded by To and unreduced over
// Keep only (Keep: a subset of Unreduced, empty for ts::reshard). Every member is constexpr.
template <mesh_like Mesh, spec_like From, spec_like To, extents_like Extents,
          unreduced_like Unreduced = unreduced<>, unreduced_like Keep = unreduced<>>
struct reshard_plan {
  static constexpr std::size_t rank = Extents::rank;
  using mesh_type = Mesh;
  using from_spec = typename detail::padded_spec<From, rank>::type;
  using to_spec = typename detail::padded_spec<To, rank>::type;
  using unreduced_type = Unreduced;
  using step_type = step<rank>;

  // Whether the inputs are valid (else a diagnostic fired and the plan is empty).
  static constexpr bool valid = detail::check_reshard<Mesh, From, To, rank, Unreduced, Keep>();

 private:
  static constexpr detail::spec_array<rank> from_ = detail::spec_array_of<from_spec, rank>();
  static constexpr detail::spec_array<rank> to_ = detail::spec_array_of<to_spec, rank>();
  static constexpr detail::step_list<rank> make(bool even) {
    if constexpr (!valid) {
      (void)even;
      return {};
    } else {
      return detail::plan_reshard(from_, detail::unreduced_list<Unreduced>(), to_,
                                  detail::unreduced_list<Keep>(), even);
    }
  }
  static constexpr detail::step_list<rank> even_ = make(true);
  static constexpr detail::step_list<rank> uneven_ = make(false);

 public:
  // The steps when both shardings divide evenly (the usual case), and when they do not.
  static constexpr std::array<step_type, even_.count> even_steps =
      detail::take_steps<even_.count>(even_);
  static constexpr std::array<step_type, uneven_.count> uneven_steps =
      detail::take_steps<uneven_.count>(uneven_);

  static constexpr shard_evenness evenness = detail::evenness_of<Mesh, Extents>(from_, to_);

  // The steps that run: even_steps unless the static extents are known to be uneven
  // (with dynamic extents, uneven_steps run instead when the shapes turn out uneven).
  static constexpr auto steps = [] {
    if constexpr (evenness == shard_evenness::uneven)
      return uneven_steps;
    else
      return even_steps;
  }();

  // Whether any collective may run (for dynamic extents: in either variant).
  static constexpr bool communicates =
      evenness == shard_evenness::even     ? detail::any_communicates(even_steps)
      : evenness == shard_evenness::uneven ? detail::any_communicates(uneven_steps)
                                           : detail::any_communicates(even_steps) ||
                                                 detail::any_communicates(uneven_steps);

  // The steps for given extents: even_steps when both shardings divide them evenly, else
  // uneven_steps (what ts::reshard runs).
  static constexpr std::span<const step_type> steps_for(const shape<rank>& global) {
    if (detail::is_even<Mesh>(from_, global) && detail::is_even<Mesh>(to_, global))
      return std::span<const step_type>(even_steps);
    return std::span<const step_type>(uneven_steps);
  }

  // How many collectives `steps` runs, and the elements one device receives by them with
  // static extents (0 when an extent is dynamic); a reshard plan knows no element type:
  // bytes are elements_per_device times the element's size (ts::bytes_per_device_of).
  static constexpr std::size_t collectives = detail::count_collectives(steps);
  static constexpr std::size_t elements_per_device = [] {
    if constexpr (Extents::all_static && valid) {
      shape<rank> g{};
      for (std::size_t d = 0; d < rank; ++d) g[d] = Extents::static_extents[d];
      return static_cast<std::size_t>(detail::elements_received_by<Mesh>(steps, from_, g) + 0.5);
    } else {
      return std::size_t{0};
    }
  }();

  // How many steps of a kind `steps` has.
  template <step_kind Kind>
  static constexpr std::size_t count = [] {
    std::size_t n = 0;
    for (const auto& s : steps) n += s.kind == Kind;
    return n;
  }();

  // A readable account, one numbered line per step.
  static std::string describe() {
    return detail::describe_plan<rank>(
        "reshard " + from_spec::to_string() + Unreduced::to_string() + " -> " +
            to_spec::to_string() + Keep::to_string() + " on " + Mesh::to_string(),
        evenness, even_steps, uneven_steps);
  }
};

namespace detail {

template <std::size_t Rank>
constexpr bool same_steps(std::span<const step<Rank>> a,
                          std::span<const step<Rank>> b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].kind != b[i].kind || !(a[i].axes == b[i].axes) || a[i].dim != b[i].dim ||
        a[i].to_dim != b[i].to_dim || a[i].spec_after != b[i].spec_after)
      return false;
  return true;
}

// reshard_plan::describe's body, one instantiation per rank.
template <std::size_t Rank>
std::string describe_plan(std::string out, shard_evenness evenness,
                          std::span<const step<Rank>> even,
                          std::span<const step<Rank>> uneven) {
  auto list = [&out](std::span<const step<Rank>> steps) {
    if (steps.empty()) out += "  (nothing to do)\n";
    for (std::size_t i = 0; i < steps.size(); ++i)
      out += "  " + std::to_string(i + 1) + ". " + steps[i].describe() + "\n";
  };
  if (evenness == shard_evenness::decided_at_run_time && !same_steps(even, uneven)) {
    out += ":\n when the shards divide evenly:\n";
    list(even);
    out += " otherwise:\n";
    list(uneven);
  } else {
    out += ":\n";
    list(evenness == shard_evenness::uneven ? uneven : even);
  }
  return out;
}

}  // namespace detail

// communication_free<Plan>: the plan runs no collective (write
// static_assert(ts::communication_free<plan>) to forbid hidden communication).
template <class Plan>
concept communication_free = requires {
  { Plan::communicates } -> std::convertible_to<bool>;
} && !Plan::communicates;

}  // namespace typeshard
