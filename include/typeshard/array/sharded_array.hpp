// typeshard/array/sharded_array.hpp: the global-view sharded array, and moving data to and from it.
//
//   // jax.device_put(x, NamedSharding(m, P('x', None))):
//   auto A = ts::device_put<ts::spec<"x", ts::none>>(m, host);
//   for (const auto& s : A.addressable_shards()) ...              // device, index, shape, data
//   ts::host_tensor<float, 2> back = ts::to_host(A);
//   // jax.make_array_from_callback:
//   auto B = ts::device_put<ts::spec<"x">>(m, ts::shape<1>{n}, make_block);
//   float loss = ts::sum<>(A).item();   // rank 0 (spec<>, extents<>): JAX's float(x) / x.item()
//
// The type carries the element, the mesh, the spec (padded with ts::none to the rank),
// the extents (static or dynamic per dimension) and the unreduced axes. Shards are
// immutable once made and shared between copies, as jax.Array's are; every operation
// returns a new array. Rank 0 (ts::spec<>, ts::extents<>: what a reduction over every
// dimension gives, as in JAX) holds one element on every device, replicated (or, while
// unreduced over some axes, a partial value on each); to_host gives a host_tensor<T, 0>.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backend/backend.hpp"
#include "../core/config.hpp"
#include "detail/buffer.hpp"
#include "detail/copy_box.hpp"
#include "detail/transfer.hpp"
#include "device_mesh.hpp"
#include "../core/errors.hpp"
#include "../core/extents.hpp"
#include "host_tensor.hpp"
#include "../core/detail/spec_layout.hpp"
#include "../core/layout.hpp"
#include "../core/mesh.hpp"
#include "../core/spec.hpp"
#include "../core/unreduced.hpp"
#include "../core/rules/rule3_unreduced.hpp"
#include "../core/rules/rule6_extents.hpp"

namespace typeshard {

namespace detail {

// check_static_extents's failure, out of line: a function of values, one copy per TU.
[[noreturn]] TYPESHARD_COLD inline void throw_static_extent_mismatch(std::size_t d,
                                                                  std::size_t got,
                                                                  std::size_t fixed) {
  throw shape_error(message({"typeshard: dimension ", d, " has extent ", got,
                             " but the array type fixes it to ", fixed,
                             "; pass data of that extent or make the extent ts::dyn"}));
}

template <class Extents>
constexpr bool any_static_extent() {
  for (std::size_t d = 0; d < Extents::rank; ++d)
    if (Extents::is_static(d)) return true;
  return false;
}

// check_static_extents on values: one copy per TU.
TYPESHARD_NOINLINE inline void check_fixed_extents(std::span<const std::size_t> fixed,
                                                   std::span<const std::size_t> got) {
  for (std::size_t d = 0; d < fixed.size(); ++d)
    if (fixed[d] != dyn && fixed[d] != got[d])
      throw_static_extent_mismatch(d, got[d], fixed[d]);
}

// The blocks of a new array, shared by its copies: one copy per element type, not per array
// type (and compiled once in typeshard::runtime for float and double).
template <class T>
TYPESHARD_NOINLINE std::shared_ptr<const std::vector<buffer<T>>> share_blocks(
    std::vector<buffer<T>>&& blocks, std::size_t positions) {
  if (blocks.size() != positions)
    throw usage_error("typeshard: internal: expected one buffer per mesh position");
  // A vector made non-const (shared as const), so that ts::jit may move the blocks out of
  // an array it owns alone (ops/detail/jit_outputs.hpp).
  return std::make_shared<std::vector<buffer<T>>>(std::move(blocks));
}

#if defined(TYPESHARD_SEPARATE_COMPILATION)
extern template std::shared_ptr<const std::vector<buffer<float>>> share_blocks<float>(
    std::vector<buffer<float>>&&, std::size_t);
extern template std::shared_ptr<const std::vector<buffer<double>>> share_blocks<double>(
    std::vector<buffer<double>>&&, std::size_t);
#endif

}  // namespace detail

// shard: one addressable shard, JAX's Shard (device, index, data).
template <class T, std::size_t Rank>
struct shard {
  typeshard::device device;
  std::size_t mesh_position = 0;      // the device's row-major place in the mesh
  index_slices<Rank> index{};         // the global slices it holds
  typeshard::shape<Rank> shape{};     // its local extents
  std::span<const T> data;            // its elements, row-major over `shape`
  std::size_t replica_id = 0;         // 0 for the primary copy of these slices

  // A copy of the data as a host tensor.
  host_tensor<T, Rank> to_host() const {
    return host_tensor<T, Rank>(shape, std::vector<T>(data.begin(), data.end()));
  }
};

// Tag for the low-level constructor that adopts per-device buffers (for typeshard's own
// operations and for backends; user code makes arrays with device_put).
struct adopt_shards_t {
  explicit adopt_shards_t() = default;
};
inline constexpr adopt_shards_t adopt_shards{};

namespace detail {

// Where an array of spec Spec and rank Rank on device mesh m puts its blocks, as values.
template <class Mesh, class Spec, std::size_t Rank>
placement<Rank> placement_of(const device_mesh<Mesh>& m) {
  return {m.get_backend(), std::span<const device_id>(m.devices()), mesh_value_of<Mesh>(),
          layout<Mesh, Spec, Rank>::entries};
}

// addressable_shards on values: one instantiation per element type and rank.
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE std::vector<shard<T, Rank>> addressable_shards_of(
    const placement<Rank>& at, const shape<Rank>& global, const std::vector<buffer<T>>& blocks) {
  std::vector<shard<T, Rank>> out;
  for (std::size_t p = 0; p < at.mesh.size; ++p) {
    const device_id d = at.devices[p];
    if (!at.b.is_addressable(d)) continue;
    out.push_back({at.b.describe(d), p, index_of(at.mesh, at.spec, global, p),
                   local_shape_of(at.mesh, at.spec, global, p), blocks[p].span(),
                   replica_index_of(at.mesh, at.spec, p)});
  }
  return out;
}

#if defined(TYPESHARD_SEPARATE_COMPILATION)
#define TYPESHARD_ADDRESSABLE_SHARDS_INSTANCE(prefix, T, R)                                    \
  prefix std::vector<shard<T, R>> addressable_shards_of<T, R>(                                 \
      const placement<R>&, const shape<R>&, const std::vector<buffer<T>>&);
TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(TYPESHARD_ADDRESSABLE_SHARDS_INSTANCE, extern template)
#endif

// What an array holds: its device mesh, extents and shared blocks. A type of the element type,
// mesh and rank only, so that every array type of those (every spec, static extents and
// unreduced axes) shares one destructor (two shared_ptr releases, ~0.3 KB of code) instead
// of compiling its own.
template <class T, class Mesh, std::size_t Rank>
struct array_state {
  typeshard::device_mesh<Mesh> mesh;
  shape<Rank> extents;
  std::shared_ptr<const std::vector<buffer<T>>> shards;
};

}  // namespace detail

template <class T, mesh_like Mesh, spec_like Spec, extents_like Extents,
          unreduced_like Unreduced = unreduced<>>
class sharded_array {
 public:
  using value_type = T;
  using mesh_type = Mesh;
  using spec = typename detail::padded_spec<Spec, Extents::rank>::type;
  using extents_type = Extents;
  using unreduced_type = Unreduced;
  static constexpr std::size_t rank = Extents::rank;
  using layout_type = layout<Mesh, spec, rank>;
  using shape_type = typeshard::shape<rank>;

  // Rule 1: check_spec fires the rule's own diagnostic when the spec is invalid. The
  // `|| true` keeps this assertion from adding a second error: the class stays usable, so
  // the code around it compiles on and the user sees one message.
  static_assert(detail::check_spec<Mesh, Spec, rank>() || true);

  // Adopts one buffer per mesh position (empty for positions this process does not
  // address), each holding that position's block in row-major order.
  sharded_array(adopt_shards_t, const typeshard::device_mesh<Mesh>& m, const shape_type& extents,
                std::vector<detail::buffer<T>> buffers)
      : s_{m, extents, nullptr} {
    check_static_extents(extents);
    s_.shards = detail::share_blocks<T>(std::move(buffers), Mesh::size);
  }

  // Shares the shards of another array with the same layout on the same device mesh (for
  // operations that change only the type, such as a reshard that moves nothing).
  sharded_array(adopt_shards_t, const typeshard::device_mesh<Mesh>& m, const shape_type& extents,
                std::shared_ptr<const std::vector<detail::buffer<T>>> shards)
      : s_{m, extents, std::move(shards)} {
    check_static_extents(extents);
  }
  const std::shared_ptr<const std::vector<detail::buffer<T>>>& shared_shards() const {
    return s_.shards;
  }

  const typeshard::device_mesh<Mesh>& device_mesh() const { return s_.mesh; }
  const shape_type& extents() const { return s_.extents; }
  std::size_t extent(std::size_t d) const { return s_.extents[d]; }
  std::size_t size() const { return host_tensor<T, rank>::element_count(s_.extents); }

  // The one element of a one-element array (every rank-0 array), JAX's x.item(): to_host's
  // rules apply (every process calls it under MPI; an unreduced value does not compile).
  T item() const { return to_host(*this).item(); }

  // The slices and local extents held at a mesh position.
  index_slices<rank> index(std::size_t position) const {
    return layout_type::index(s_.extents, position);
  }
  shape_type local_shape(std::size_t position) const {
    return layout_type::local_shape(s_.extents, position);
  }

  // The block at a mesh position (empty if this process does not address it).
  std::span<const T> local_data(std::size_t position) const {
    return (*s_.shards)[position].span();
  }

  // The shards this process holds, in mesh order.
  std::vector<shard<T, rank>> addressable_shards() const {
    return detail::addressable_shards_of<T, rank>(placement(), s_.extents, *s_.shards);
  }

  // Where the blocks are, as values (for the run-time code of array/detail/transfer.hpp).
  detail::placement<rank> placement() const {
    return detail::placement_of<Mesh, spec, rank>(s_.mesh);
  }

  // "NamedSharding(mesh=Mesh('x': 2, 'y': 2), spec=PartitionSpec('x', 'y'))".
  TYPESHARD_COLD static std::string sharding_string() {
    // The spec printed from its value (one spec_string per rank, not a to_string per spec).
    return "NamedSharding(mesh=" + Mesh::to_string() + ", spec=" +
           detail::spec_string(layout_type::entries) + ")";
  }

  // Throws shape_error if a static extent disagrees with `extents`.
  static void check_static_extents(const shape_type& extents) {
    if constexpr (detail::any_static_extent<Extents>())
      detail::check_fixed_extents(Extents::static_extents, extents);
  }

 private:
  detail::array_state<T, Mesh, rank> s_;
};

template <class T>
inline constexpr bool is_sharded_array_v = false;
template <class T, class M, class S, class E, class U>
inline constexpr bool is_sharded_array_v<sharded_array<T, M, S, E, U>> = true;

template <class T>
concept sharded_array_like = is_sharded_array_v<std::remove_cvref_t<T>>;

namespace detail {

// Runs body(position) on the device of every addressable mesh position, concurrently.
template <mesh_like Mesh, class Body>
void for_each_position(const device_mesh<Mesh>& m, Body&& body) {
  m.get_backend().run(std::span<const device_id>(m.devices()), body);
}

}  // namespace detail

namespace detail {

template <class B, std::size_t Rank>
inline constexpr bool is_host_tensor_of_rank = false;
template <class T, std::size_t Rank>
inline constexpr bool is_host_tensor_of_rank<host_tensor<T, Rank>, Rank> = true;

// What device_put returns after its diagnostic fired: an array of the data's rank, so the
// code using it compiles on and the diagnostic stays the only error. Never run.
template <class T, class Mesh, class Spec, std::size_t Rank>
sharded_array<T, Mesh, Spec, dextents<Rank>> after_diagnostic(const device_mesh<Mesh>& m) {
  return {adopt_shards, m, shape<Rank>{}, std::vector<buffer<T>>(Mesh::size)};
}

}  // namespace detail

// device_put<Spec>(mesh, host): shards host data over the mesh (each device copies its
// slices in parallel). With Extents, dimensions given statically must match the data.
template <spec_like Spec, class Extents = void, mesh_like Mesh, class T,
          std::size_t Rank>
[[nodiscard]] auto device_put(const device_mesh<Mesh>& m, const host_tensor<T, Rank>& host) {
  using E = std::conditional_t<std::is_void_v<Extents>, dextents<Rank>, Extents>;
  if constexpr (E::rank != Rank) {
    static_assert(detail::require<
                  false, diagnostic::extents_rank_differs_from_data<E::rank, Rank>>::value);
    return detail::after_diagnostic<T, Mesh, Spec, Rank>(m);  // one error only
  } else {
    using array_type = sharded_array<T, Mesh, Spec, E>;
    array_type::check_static_extents(host.extents());

    std::vector<detail::buffer<T>> buffers =
        detail::blocks_from_host<T, Rank>(detail::placement_of<Mesh, Spec, Rank>(m), host);
    return array_type(adopt_shards, m, host.extents(), std::move(buffers));
  }
}

// device_put<Spec>(mesh, global_shape, make_block): each device's block comes from
// make_block(index), which returns a host_tensor<T, Rank> holding exactly the global slices
// `index` (the device's shard): no process ever needs the whole array (SPMD on MPI, JAX's
// make_array_from_callback). It is called on each device, concurrently on the thread pool,
// so it must be safe to call from several threads.
template <spec_like Spec, class Extents = void, mesh_like Mesh, std::size_t Rank, class F>
  requires std::invocable<F&, const index_slices<Rank>&>
[[nodiscard]]
auto device_put(const device_mesh<Mesh>& m, const shape<Rank>& global, F&& make_block) {
  using block_type = std::remove_cvref_t<std::invoke_result_t<F&, const index_slices<Rank>&>>;
  using E = std::conditional_t<std::is_void_v<Extents>, dextents<Rank>, Extents>;
  if constexpr (!detail::is_host_tensor_of_rank<block_type, Rank>) {
    static_assert(detail::require<false, diagnostic::make_block_result_not_a_shard<block_type,
                                                                                   Rank>>::value);
    return detail::after_diagnostic<float, Mesh, Spec, Rank>(m);  // one error only
  } else if constexpr (E::rank != Rank) {
    static_assert(detail::require<false, diagnostic::extents_rank_differs_from_shape<E::rank,
                                                                                     Rank>>::value);
    return detail::after_diagnostic<typename block_type::value_type, Mesh, Spec, Rank>(m);
  } else {
    using T = typename block_type::value_type;
    using array_type = sharded_array<T, Mesh, Spec, E>;
    array_type::check_static_extents(global);

    std::vector<detail::buffer<T>> buffers = detail::blocks_from_callback<T, Rank>(
        detail::placement_of<Mesh, Spec, Rank>(m), global,
        detail::function_ref<host_tensor<T, Rank>(const index_slices<Rank>&)>(make_block));
    return array_type(adopt_shards, m, global, std::move(buffers));
  }
}

// to_host(array): the whole array in host memory (each primary shard copies its block in parallel).
// Where a process holds only some shards (MPI), every process of the program must call it, and each
// gets the whole array (JAX's process_allgather), also a process that holds none of the array's
// devices (it receives a broadcast). A value still unreduced over some axis must be reduced first
// (rule 3).
template <class T, class Mesh, class Spec, class Extents, class Unreduced>
[[nodiscard]]
host_tensor<T, Extents::rank> to_host(const sharded_array<T, Mesh, Spec, Extents, Unreduced>& a) {
  static_assert(detail::require<Unreduced::empty, diagnostic::to_host_unreduced<Unreduced>>::value);
  return detail::host_from_blocks<T, Extents::rank>(a.placement(), a.extents(),
                                                    *a.shared_shards());
}

}  // namespace typeshard
