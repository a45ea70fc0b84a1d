// typeshard/ops/detail/jit_outputs.hpp: ts::jit's arguments and results across the devices of
// an SPMD program: which backend the arguments live on, and one global result assembled
// from the devices' results (each holding its own device's blocks, as on an MPI rank).
// Internal: do not rely on anything in detail/ (the public face is ops/jit.hpp).
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../array/sharded_array.hpp"
#include "../../backend/backend.hpp"
#include "../../core/spec.hpp"
#include "../../array/detail/buffer.hpp"
#include "../tree.hpp"

namespace typeshard {

template <class Param, spec_like ShardSpec>
struct zero_adam_state;  // ops/optim.hpp

namespace detail {

template <class T>
inline constexpr bool is_pair_v = false;
template <class A, class B>
inline constexpr bool is_pair_v<std::pair<A, B>> = true;

template <class T>
inline constexpr bool is_zero_adam_state_v = false;
template <class P, class S>
inline constexpr bool is_zero_adam_state_v<zero_adam_state<P, S>> = true;

// Whether T is a well-formed parameter tree (ops/tree.hpp), whose leaves jit visits.
template <class T>
constexpr bool jit_tree() {
  if constexpr (tree_traits_of<T>::is_tree)
    return tree_traits_of<T>::well_formed;
  else
    return false;
}

// The backend of the first array among the values (nested trees, pairs and optimizer states
// searched in order), or nullptr.
template <class T>
backend* jit_backend_of(const T& v) {
  using TT = tree_traits_of<T>;
  if constexpr (sharded_array_like<T>) {
    return &v.device_mesh().get_backend();
  } else if constexpr (is_pair_v<T>) {
    backend* b = jit_backend_of(v.first);
    return b != nullptr ? b : jit_backend_of(v.second);
  } else if constexpr (is_zero_adam_state_v<T>) {
    return jit_backend_of(v.m);
  } else if constexpr (jit_tree<T>()) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      backend* b = nullptr;
      ((b = b != nullptr ? b : jit_backend_of(TT::template leaf<I>(v))), ...);
      return b;
    }(std::make_index_sequence<TT::size>{});
  } else {
    return nullptr;
  }
}

// Block p of a device's result into `out`: moved when that result alone holds its blocks
// (the vector is never const: detail::share_blocks), else copied (an argument returned as
// it is, two results sharing blocks). On values: one instantiation per element type.
template <class T>
TYPESHARD_NOINLINE void jit_take_block(const std::shared_ptr<const std::vector<buffer<T>>>& from,
                                       std::size_t p, buffer<T>& out) {
  const buffer<T>& b = (*from)[p];
  if (from.use_count() == 1) {
    out = std::move(const_cast<buffer<T>&>(b));
    return;
  }
  buffer<T> copy(b.size());
  if (b.size() != 0) std::memcpy(copy.data(), b.data(), b.size() * sizeof(T));
  out = std::move(copy);
}

template <class T>
void jit_merge(T& into, std::span<T* const> each);

// The pointers to member I (by `get`) of every device's value.
template <class M, class T, class Get>
void jit_merge_member(T& into, std::span<T* const> each, Get get) {
  std::vector<M*> members(each.size());
  for (std::size_t d = 0; d < each.size(); ++d) members[d] = &get(*each[d]);
  jit_merge<M>(get(into), std::span<M* const>(members));
}

// `into` (one of each[...]) becomes the global result: every array in it takes block p from
// the result of the device at mesh position p; other values (counts, flags) stay as `into`
// has them (every device computes the same).
template <class T>
void jit_merge(T& into, std::span<T* const> each) {
  using TT = tree_traits_of<T>;
  if constexpr (sharded_array_like<T>) {
    using E = typename T::value_type;
    const auto& shards = into.shared_shards();
    bool same = true;
    for (T* a : each) same = same && a->shared_shards() == shards;
    if (same) return;  // every device returned the same blocks (an argument, say)
    const auto& m = into.device_mesh();
    std::vector<buffer<E>> blocks(T::mesh_type::size);
    for (std::size_t p = 0; p < blocks.size(); ++p)
      jit_take_block<E>(each[m.device_at(p)]->shared_shards(), p, blocks[p]);
    into = T(adopt_shards, m, into.extents(), std::move(blocks));
  } else if constexpr (is_pair_v<T>) {
    jit_merge_member<typename T::first_type>(into, each, [](T& v) -> auto& { return v.first; });
    jit_merge_member<typename T::second_type>(into, each,
                                              [](T& v) -> auto& { return v.second; });
  } else if constexpr (is_zero_adam_state_v<T>) {
    using S = typename T::shard_type;
    jit_merge_member<S>(into, each, [](T& v) -> auto& { return v.m; });
    jit_merge_member<S>(into, each, [](T& v) -> auto& { return v.v; });
  } else if constexpr (jit_tree<T>()) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (jit_merge_member<member_t<T, I>>(
           into, each, [](T& v) -> auto& { return TT::template leaf<I>(v); }),
       ...);
    }(std::make_index_sequence<TT::size>{});
  }
}

}  // namespace detail

}  // namespace typeshard
