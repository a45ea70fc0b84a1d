// typeshard/ops/dims.hpp: dimension moves on sharded arrays, without communication (rule 8).
//
//   auto t = ts::transpose(a);                 // [I_x, J] -> [J, I_x]   (a.T)
//   auto p = ts::permute<0, 2, 1>(x);          // [B, S, D_model] -> [B, D_model, S]
//   auto h = ts::split_dim<2, 8>(x);           // [B, S, D_model] -> [B, S, 8_model, D / 8]
//   auto m = ts::merge_dims<2>(h);             // and back: [B, S, D_model]
//
// NumPy's names: permute<Perm...> is x.transpose(Perm) (output dimension i is input
// dimension Perm[i]); split_dim<Dim, Parts> is a reshape of dimension Dim of extent n into
// (Parts, n / Parts), and merge_dims<Dim> the reshape of dimensions Dim and Dim + 1 into
// one. Spec entries move with their dimensions: a split's major part keeps the dimension's
// axes (heads sharded over "model"), and a merge takes the major dimension's.
//
// Nothing moves between devices: a permute permutes each device's block in place of a
// copy; a split or a merge copies nothing (the row-major block is the same bytes) and
// returns an array sharing the input's shards. Where that is impossible (a split whose
// major part is not a multiple of the shards, a merge whose minor dimension is sharded or
// whose major dimension is uneven) the compile error names the fix (a reshard first); with
// dynamic extents, the same check throws shape_error. Unreduced values stay unreduced (the
// moves are linear). The plans (plan/dims_plan.hpp) are inspectable: ts::permute_plan_for,
// ts::split_dim_plan_for, ts::merge_dims_plan_for, all ts::communication_free.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../array/block.hpp"
#include "../array/sharded_array.hpp"
#include "../core/errors.hpp"
#include "../core/layout.hpp"
#include "../core/rules/rule8_dimension_moves.hpp"
#include "../array/detail/buffer.hpp"
#include "../kernels/detail/permute_copy.hpp"
#include "../plan/dims_plan.hpp"

namespace typeshard {

// The plans of the operations below on an array type A.
template <class A, std::size_t... Perm>
using permute_plan_for = permute_plan<typename A::mesh_type, typename A::spec,
                                      typename A::extents_type, typename A::unreduced_type,
                                      Perm...>;
template <class A, std::size_t Dim, std::size_t Parts>
using split_dim_plan_for = split_dim_plan<typename A::mesh_type, typename A::spec,
                                          typename A::extents_type, typename A::unreduced_type,
                                          Dim, Parts>;
template <class A, std::size_t Dim>
using merge_dims_plan_for = merge_dims_plan<typename A::mesh_type, typename A::spec,
                                            typename A::extents_type, typename A::unreduced_type,
                                            Dim>;

namespace detail {

// The array type a dimension-move plan produces from an array of element T on Mesh.
template <class T, class Mesh, class Plan>
using moved_array = sharded_array<T, Mesh, typename Plan::out_spec, typename Plan::out_extents,
                                  typename Plan::out_unreduced>;

// The messages of a split or merge that dynamic extents do not allow (functions, not
// templates: one copy of the text however many array types are moved).
inline std::string split_dim_message(std::size_t dim, std::size_t parts, std::size_t n,
                                     std::size_t shards) {
  const std::string op = "typeshard: split_dim<" + std::to_string(dim) + ", " +
                         std::to_string(parts) + ">: dimension " + std::to_string(dim);
  if (parts == 0 || n % parts != 0)
    return op + " has extent " + std::to_string(n) + ", not a multiple of " +
           std::to_string(parts) + "; split it into a number of parts that divides its extent";
  return op + " (extent " + std::to_string(n) + ") is sharded into " + std::to_string(shards) +
         " blocks, and " + std::to_string(parts) +
         " parts are not a multiple of that, so the devices' blocks would change (data would "
         "move); split into a multiple of " + std::to_string(shards) +
         " parts, or reshard the dimension to ts::none first";
}

inline std::string merge_dims_message(std::size_t dim, std::size_t major, std::size_t shards) {
  return "typeshard: merge_dims<" + std::to_string(dim) + ">: dimension " + std::to_string(dim) +
         " has extent " + std::to_string(major) + ", not a multiple of its " +
         std::to_string(shards) +
         " shards, so the merged blocks would not be the devices' blocks (data would move); "
         "make its extent a multiple of " + std::to_string(shards) +
         ", or reshard it to ts::none first";
}

// Each device permutes its own block, on values: one instantiation per element type and
// rank, whatever the mesh, spec and permutation.
template <class T, std::size_t R>
TYPESHARD_NOINLINE std::vector<buffer<T>> permuted_blocks(const placement<R>& at,
                                                          const shape<R>& global,
                                                          const std::vector<buffer<T>>& in,
                                                          const std::array<std::size_t, R>& perm) {
  std::vector<buffer<T>> out(in.size());
  at.b.run(at.devices, [&](std::size_t p) {
    buffer<T> b(in[p].size());
    kernels::detail::permute_copy<T, R>(in[p].data(), local_shape_of(at.mesh, at.spec, global, p),
                                        perm, b.data());
    out[p] = std::move(b);
  });
  return out;
}

}  // namespace detail

// permute<Perm...>(x): x with its dimensions reordered, output dimension i being input
// dimension Perm[i] (NumPy's x.transpose(Perm)); each spec entry moves with its dimension.
// Each device permutes its own block: no communication.
template <std::size_t... Perm, sharded_array_like A>
[[nodiscard]] auto permute(const A& a) {
  using arr = std::remove_cvref_t<A>;
  using plan = permute_plan_for<arr, Perm...>;
  if constexpr (!detail::check_permute<plan>()) {
    return a;  // the diagnostic fired; stop here so nothing cascades
  } else {
    using T = typename arr::value_type;
    using M = typename arr::mesh_type;
    using result = detail::moved_array<T, M, plan>;
    constexpr std::size_t R = arr::rank;
    const shape<R> out_extents = plan::out_shape(a.extents());
    if constexpr (!plan::copies_data) {
      return result(adopt_shards, a.device_mesh(), out_extents, a.shared_shards());
    } else {
      return result(adopt_shards, a.device_mesh(), out_extents,
                    detail::permuted_blocks<T, R>(a.placement(), a.extents(),
                                                  *a.shared_shards(), plan::perm));
    }
  }
}

// transpose(x): a rank-2 array's transpose (x.T): ts::transpose of array/block.hpp (the
// function object that also makes a block's transposed view) calls permute<1, 0>.

// split_dim<Dim, Parts>(x): dimension Dim, of extent n, becomes two, (Parts, n / Parts),
// row-major (NumPy's reshape); Parts keeps Dim's spec entry, n / Parts is unsharded. No
// communication, no copy. Throws shape_error when a dynamic extent does not allow it.
template <std::size_t Dim, std::size_t Parts, sharded_array_like A>
[[nodiscard]] auto split_dim(const A& a) {
  using arr = std::remove_cvref_t<A>;
  using plan = split_dim_plan_for<arr, Dim, Parts>;
  if constexpr (!detail::check_reshape<plan>()) {
    return a;
  } else {
    using result = detail::moved_array<typename arr::value_type, typename arr::mesh_type, plan>;
    if (!plan::keeps_blocks(a.extents()))
      throw shape_error(detail::split_dim_message(Dim, Parts, a.extent(Dim), plan::shards));
    return result(adopt_shards, a.device_mesh(), plan::out_shape(a.extents()), a.shared_shards());
  }
}

// merge_dims<Dim>(x): dimensions Dim and Dim + 1, of extents (A, B), become one of extent
// A * B (NumPy's reshape); it keeps Dim's spec entry. Dim + 1 must be unsharded and Dim's
// shards even (unless B is 1). No communication, no copy. Throws shape_error when a dynamic
// extent does not allow it.
template <std::size_t Dim, sharded_array_like A>
[[nodiscard]] auto merge_dims(const A& a) {
  using arr = std::remove_cvref_t<A>;
  using plan = merge_dims_plan_for<arr, Dim>;
  if constexpr (!detail::check_reshape<plan>()) {
    return a;
  } else {
    using result = detail::moved_array<typename arr::value_type, typename arr::mesh_type, plan>;
    if (!plan::keeps_blocks(a.extents()))
      throw shape_error(detail::merge_dims_message(Dim, a.extent(Dim), plan::shards));
    return result(adopt_shards, a.device_mesh(), plan::out_shape(a.extents()), a.shared_shards());
  }
}

}  // namespace typeshard
