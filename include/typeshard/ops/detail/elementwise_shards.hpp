// typeshard/ops/detail/elementwise_shards.hpp: elementwise operations on sharded arrays'
// shards: f on every element (map_shards), or on the elements of two operands, broadcast as
// rule 5 says (zip_broadcast: the plain loop for operands of one layout and shape, else each
// device reads its slice of each operand), with the operands' checks (same mesh type, rule 5,
// same devices).
#pragma once

#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../array/detail/buffer.hpp"
#include "../../core/detail/diagnose.hpp"
#include "../../array/device_mesh.hpp"
#include "../../array/sharded_array.hpp"
#include "../../core/rules/rule5_elementwise.hpp"
#include "broadcast.hpp"
#include "elementwise_loops.hpp"

namespace typeshard::detail {

// Applies f to every element of every shard of `a` (on its device) and returns the
// resulting array, with result element type R and unreduced axes U.
template <class R, class U, class T, class M, class S, class E, class U0, class F>
auto map_shards(const sharded_array<T, M, S, E, U0>& a, F f) {
  const device_mesh<M>& m = a.device_mesh();
  return sharded_array<R, M, typename sharded_array<T, M, S, E, U0>::spec, E, U>(
      adopt_shards, m, a.extents(),
      map_blocks_on<R, T, F>(m.get_backend(), std::span<const device_id>(m.devices()),
                             *a.shared_shards(), f));
}

template <class A, class B>
void check_same_devices(const A& a, const B& b, const char* op);

// The fast path: operands of one layout and shape, element by element.
template <class Result, class A, class B, class F>
Result zip_shards(const A& a, const B& b, F f) {
  using R = typename Result::value_type;
  const auto& m = a.device_mesh();
  return Result(adopt_shards, m, a.extents(),
                zip_blocks_on<R, typename A::value_type, typename B::value_type, F>(
                    m.get_backend(), std::span<const device_id>(m.devices()),
                    *a.shared_shards(), *b.shared_shards(), f));
}

// Broadcasting on values: the result's extents (checked: broadcast_shape) into `global`,
// then broadcast_blocks_on. A template of the element types, ranks and f, whatever the
// operands' meshes and specs.
template <class R, std::size_t Rank, class T1, std::size_t RA, class T2, std::size_t RB, class F>
TYPESHARD_NOINLINE std::vector<buffer<R>> broadcast_on(
    backend& b, std::span<const device_id> devices, const mesh_value& m,
    const spec_array<Rank>& rs, const spec_array<RA>& as, const shape<RA>& ae,
    const std::vector<buffer<T1>>& ablocks, const spec_array<RB>& bs, const shape<RB>& be,
    const std::vector<buffer<T2>>& bblocks, F f, const char* op, shape<Rank>& global) {
  global = broadcast_shape<Rank>(ae, as, be, bs, op);
  return broadcast_blocks_on<R, Rank>(b, devices, m, rs, global,
                                      padded_operand<Rank>(as, ae, ablocks),
                                      padded_operand<Rank>(bs, be, bblocks), f);
}

// Broadcasting (broadcast_on), the operands' layouts given as values.
template <class Result, class A, class B, class F>
Result broadcast_shards(const A& a, const B& b, F f, const char* op) {
  constexpr std::size_t Rank = Result::rank;
  const auto& m = a.device_mesh();
  shape<Rank> global{};
  std::vector<buffer<typename Result::value_type>> blocks =
      broadcast_on<typename Result::value_type, Rank>(
          m.get_backend(), std::span<const device_id>(m.devices()),
          mesh_value_of<typename A::mesh_type>(), Result::layout_type::entries,
          A::layout_type::entries, a.extents(), *a.shared_shards(), B::layout_type::entries,
          b.extents(), *b.shared_shards(), f, op, global);
  return Result(adopt_shards, m, global, std::move(blocks));
}

// f on the operands (checked: check_elementwise_operands), result element R, unreduced U.
template <class R, class U, class A, class B, class F>
auto zip_broadcast(const A& a, const B& b, F f, const char* op) {
  using bc = broadcast_of<A, B>;
  using Result = sharded_array<R, typename A::mesh_type, typename bc::spec_type,
                               typename bc::extents_type, U>;
  check_same_devices(a, b, op);
  if constexpr (bc::same_layout && A::extents_type::all_static &&
                std::is_same_v<typename A::extents_type, typename B::extents_type>) {
    return zip_shards<Result>(a, b, f);  // equal static shapes: no broadcasting possible
  } else {
    if constexpr (bc::same_layout)
      if (a.extents() == b.extents()) return zip_shards<Result>(a, b, f);
    return broadcast_shards<Result>(a, b, f, op);
  }
}

template <class A, class B>
constexpr bool check_elementwise_operands() {
  using a = std::remove_cvref_t<A>;
  using b = std::remove_cvref_t<B>;
  if constexpr (!std::is_same_v<typename a::mesh_type, typename b::mesh_type>) {
    return require<false, diagnostic::elementwise_meshes_differ<typename a::mesh_type,
                                                                typename b::mesh_type>>::value &&
           false;
  } else {
    return check_broadcast<a, b>();
  }
}

// The device meshes must be the same devices, in the same order (seed 002's "incompatible
// devices" error, at run time because device lists are run-time values).
template <class A, class B>
void check_same_devices(const A& a, const B& b, const char* op) {
  check_same_device_mesh(a.device_mesh(), b.device_mesh(), op, move_to_other_devices_fix);
}

}  // namespace typeshard::detail
