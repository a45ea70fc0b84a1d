// typeshard/ops/detail/operand_steps.hpp: a collective or a local slice on one operand's block
// of one device, the executor's (ops/detail/executor.hpp) steps that move data. Internal: do
// not rely on anything in detail/.
//
// A collective writes a new block straight from the previous one (the collective is the only
// copy), an all-reduce of a block the step owns writes back into it; a local slice is pending until something needs the block (consecutive slices are one
// copy of the kept part, and the GEMM reads a pending slice in place). Templates of the
// element type and rank only: the mesh is a value (core/detail/mesh_value.hpp).
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "../../array/detail/copy_box.hpp"
#include "../../array/host_tensor.hpp"
#include "../../backend/backend.hpp"
#include "../../core/detail/mesh_group.hpp"
#include "../../core/detail/mesh_value.hpp"
#include "../../core/errors.hpp"
#include "../../core/layout.hpp"
#include "../../array/detail/buffer.hpp"
#include "../../plan/step.hpp"
#include "collective_calls.hpp"

namespace typeshard::detail {

// One operand's block on one device while a plan runs.
template <class T, std::size_t Rank>
struct operand_block {
  const T* data = nullptr;  // the elements, laid out by `held` (the input's, or `owned`)
  buffer<T> owned;
  spec_array<Rank> held{};  // the sharding `data` is laid out by
  spec_array<Rank> spec{};  // the sharding after the steps so far: held, or a slice of it
  shape<Rank> global{};

  operand_block() = default;
  operand_block(const T* in, const spec_array<Rank>& s, const shape<Rank>& g)
      : data(in), held(s), spec(s), global(g) {}
  void adopt(buffer<T> b, const spec_array<Rank>& s) {
    owned = std::move(b);
    data = owned.data();
    held = spec = s;
  }
};

// The extents along d of the blocks of the group's members.
template <std::size_t Rank>
std::vector<std::size_t> member_extents(const mesh_value& m, const group_members& g,
                                        const spec_array<Rank>& s, const shape<Rank>& global,
                                        std::size_t d) {
  std::vector<std::size_t> out(g.members.size());
  for (std::size_t r = 0; r < g.members.size(); ++r)
    out[r] = local_shape_of(m, s, global, g.members[r])[d];
  return out;
}

// Takes the pending slices of block x at position p: one copy of the part kept.
template <class T, std::size_t Rank>
void take_slices(const mesh_value& m, std::size_t p, operand_block<T, Rank>& x) {
  if (x.held == x.spec) return;
  const shape<Rank> have_shape = local_shape_of(m, x.held, x.global, p);
  const shape<Rank> want_shape = local_shape_of(m, x.spec, x.global, p);
  const index_slices<Rank> have = index_of(m, x.held, x.global, p);
  const index_slices<Rank> want = index_of(m, x.spec, x.global, p);
  shape<Rank> origin{};
  for (std::size_t d = 0; d < Rank; ++d) origin[d] = want[d].start - have[d].start;
  buffer<T> next(host_tensor<T, Rank>::element_count(want_shape));
  copy_box(x.data, have_shape, origin, next.data(), want_shape, shape<Rank>{}, want_shape);
  x.adopt(std::move(next), x.spec);
}

// A psum, pmax or pmin step on a block x owns (made by an earlier step, or taken from an
// array that no one else holds): reduced in place, its own buffer the collective's receiving
// block (each member sums its 1/n slice of every member's block and writes it back into
// every block: the backend reads and writes each slice by one member only, so a block may be
// both a send and a receive buffer). True if it ran; a block x does not own is left alone.
template <class T, std::size_t Rank>
bool all_reduce_in_place(backend& b, const mesh_value& m, std::size_t p, const step<Rank>& s,
                         operand_block<T, Rank>& x) {
  if (s.kind != step_kind::psum && s.kind != step_kind::pmax && s.kind != step_kind::pmin)
    return false;
  if (x.owned.size() == 0 || x.owned.data() != x.data ||
      host_tensor<T, Rank>::element_count(local_shape_of(m, s.spec_after, x.global, p)) !=
          x.owned.size())
    return false;
  const reduce_op op = s.kind == step_kind::psum   ? reduce_op::sum
                       : s.kind == step_kind::pmax ? reduce_op::max
                                                   : reduce_op::min;
  b.all_reduce(backend_group(group_of(m, s.axes, p)), element_type_of<T>, op, x.owned.data(),
               x.owned.data(), x.owned.size());
  x.held = x.spec = s.spec_after;
  return true;
}

// Runs one collective or slice step on block x at position p (a local kernel step is the
// executor's: nothing here).
template <class T, std::size_t Rank>
void run_step(backend& b, const mesh_value& m, std::size_t p, const step<Rank>& s,
              operand_block<T, Rank>& x) {
  if (s.kind == step_kind::slice) {
    x.spec = s.spec_after;  // taken when the block is next needed
    return;
  }
  if (!s.communicates()) return;
  take_slices<T, Rank>(m, p, x);
  if (all_reduce_in_place<T, Rank>(b, m, p, s, x)) return;
  const shape<Rank> cur_shape = local_shape_of(m, x.held, x.global, p);
  buffer<T> next(host_tensor<T, Rank>::element_count(local_shape_of(m, s.spec_after, x.global, p)));
  const group_members g = group_of(m, s.axes, p);
  switch (s.kind) {
    case step_kind::psum:
      b.all_reduce(backend_group(g), element_type_of<T>, reduce_op::sum, x.data, next.data(),
                   next.size());
      break;
    case step_kind::pmax:
    case step_kind::pmin:
      b.all_reduce(backend_group(g), element_type_of<T>,
                   s.kind == step_kind::pmax ? reduce_op::max : reduce_op::min, x.data,
                   next.data(), next.size());
      break;
    case step_kind::psum_scatter:
    case step_kind::all_gather:
    case step_kind::all_to_all:
      // Collectives along a dimension: none in a rank-0 plan (a rank-0 array has no dimension
      // to shard), so a rank-0 run compiles none of them.
      if constexpr (Rank == 0)
        throw_internal("typeshard: internal: a collective along a dimension of a rank-0 "
                          "block");
      else if (s.kind == step_kind::psum_scatter) {
        const auto extents = member_extents(m, g, s.spec_after, x.global, s.dim);
        scatter_along(b, backend_group(g), reduce_op::sum, x.data, cur_shape, s.dim,
                      std::span<const std::size_t>(extents), next.data());
      } else if (s.kind == step_kind::all_gather) {
        const auto extents = member_extents(m, g, x.held, x.global, s.dim);
        gather_along(b, backend_group(g), x.data, cur_shape, s.dim,
                     std::span<const std::size_t>(extents), next.data());
      } else {
        // Even shards only (plans use all_to_all only then): split along the dimension the
        // axis joins, concatenate along the one it leaves.
        all_to_all_along(b, backend_group(g), x.data, cur_shape, s.to_dim, s.dim, next.data());
      }
      break;
    case step_kind::slice:
    case step_kind::local_gemm:
    case step_kind::local_reduce:
    case step_kind::local_elementwise:
      break;  // not a collective (returned above)
  }
  x.adopt(std::move(next), s.spec_after);
}

#if defined(TYPESHARD_SEPARATE_COMPILATION)
// With the separately compiled runtime (core/config.hpp), compiled once in typeshard::runtime.
#define TYPESHARD_OPERAND_STEPS_INSTANCE(prefix, T, R)                                         \
  prefix void take_slices<T, R>(const mesh_value&, std::size_t, operand_block<T, R>&);        \
  prefix void run_step<T, R>(backend&, const mesh_value&, std::size_t, const step<R>&,         \
                             operand_block<T, R>&);
TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(TYPESHARD_OPERAND_STEPS_INSTANCE, extern template)
#endif

}  // namespace typeshard::detail
