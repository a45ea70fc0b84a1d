// typeshard/ops/move.hpp: move an array onto another device mesh of any mesh type and any
// spec (jax.device_put(x, NamedSharding(other_mesh, P(...))), DTensor's redistribute onto
// another DeviceMesh), planned as transfers of the boxes where source and target shards
// overlap: no host or device ever holds more than its own blocks.
//
//   auto B = ts::device_put<ts::spec<"data", "model">>(A, mesh_4x2);   // A on a 2x2 mesh
//   std::cout << ts::plan_device_put<ts::spec<"data", "model">>(A, mesh_4x2).describe();
//
// Onto the same devices with the same mesh type, this is ts::reshard<Spec>(a, target) (the
// collectives of its plan). Otherwise, in one process (the thread pool), each target device
// copies the boxes it needs straight from the source blocks, a box held on its own device
// staying there; on MPI the boxes travel as messages (rounds of permutes over the union of the
// two device sets, one box in flight per rank and direction), and every rank of either mesh
// calls it.
#pragma once

#include <cstddef>
#include <type_traits>

#include "../array/device_mesh.hpp"
#include "../array/sharded_array.hpp"
#include "../core/diagnostics.hpp"
#include "../core/mesh.hpp"
#include "../core/spec.hpp"
#include "detail/move_blocks.hpp"
#include "reshard.hpp"

namespace typeshard {

// plan_device_put<Spec>(a, target): the transfers device_put<Spec>(a, target) makes in one
// process: move_plan's transfers, bytes_moved() (between devices), bytes_kept(), describe().
template <spec_like Spec, sharded_array_like A, mesh_like Target>
[[nodiscard]] move_plan plan_device_put(const A& a, const device_mesh<Target>& target) {
  using result = sharded_array<typename A::value_type, Target, Spec, typename A::extents_type>;
  constexpr std::size_t Rank = A::rank;
  move_plan plan = detail::plan_move<Rank>(
      a.placement(), detail::placement_of<Target, typename result::spec, Rank>(target),
      a.extents(), sizeof(typename A::value_type));
  plan.from = A::sharding_string();
  plan.to = result::sharding_string();
  return plan;
}

// device_put<Spec>(a, target): the same values on device mesh `target` (any mesh type),
// sharded by Spec. Onto the same mesh type this is reshard<Spec>(a, target), which reduces a
// partial sum; onto another mesh type a must be fully reduced (rule 3: reshard or psum it
// first).
template <spec_like Spec, sharded_array_like A, mesh_like Target>
[[nodiscard]] auto device_put(const A& a, const device_mesh<Target>& target) {
  if constexpr (std::is_same_v<typename A::mesh_type, Target>) {
    return reshard<Spec>(a, target);  // same devices: collectives; others: the move below
  } else if constexpr (!A::unreduced_type::empty) {
    static_assert(detail::require<false, diagnostic::move_unreduced<
                                             typename A::unreduced_type>>::value);
    return a;  // the diagnostic fired; stop here so nothing cascades
  } else {
    return detail::move_array<Spec>(a, target);
  }
}

}  // namespace typeshard
