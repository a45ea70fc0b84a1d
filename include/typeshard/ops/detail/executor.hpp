// typeshard/ops/detail/executor.hpp: the one executor of plans. Internal: do not rely on
// anything in detail/.
//
// A plan is a list of ts::step values (plan/step.hpp); every operation runs its plan here,
// the very values its plan type lists (ts::reshard runs reshard_plan's steps, ts::einsum and
// ts::matmul the steps of detail::einsum_steps_of, which is what their plans' steps hold). Each
// device walks the steps on its own blocks: a collective writes a new block straight from
// the previous one (the collective is the only copy); a local slice is pending until
// something needs the block (consecutive slices are one copy of the kept part), and the
// GEMM reads a slice along its contracting dimension in place. The caller supplies what a
// `local_gemm` step computes. Not a template of the plan (its steps arrive as values) nor of
// the mesh (a value, core/detail/mesh_value.hpp), so a program with many plans and meshes
// instantiates it once per element type and rank.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "../../array/detail/copy_box.hpp"
#include "../../array/device_mesh.hpp"
#include "../../array/host_tensor.hpp"
#include "../../array/sharded_array.hpp"
#include "../../backend/backend.hpp"
#include "../../core/detail/mesh_group.hpp"
#include "../../core/detail/mesh_value.hpp"
#include "../../core/errors.hpp"
#include "../../core/layout.hpp"
#include "../../detail/buffer.hpp"
#include "../../plan/reshard_plan.hpp"
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

// The functions below take the mesh as a value (core/detail/mesh_value.hpp), so they are
// templates of the element type and rank only: one instantiation serves every mesh of a
// program, and typeshard::runtime compiles the common ones once (extern template below).

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

// Runs one collective or slice step on block x at position p.
template <class T, std::size_t Rank>
void run_step(backend& b, const mesh_value& m, std::size_t p, const step<Rank>& s,
              operand_block<T, Rank>& x) {
  if (s.kind == step_kind::slice) {
    x.spec = s.spec_after;  // taken when the block is next needed
    return;
  }
  take_slices<T, Rank>(m, p, x);
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
    case step_kind::psum_scatter: {
      const auto extents = member_extents(m, g, s.spec_after, x.global, s.dim);
      scatter_along(b, backend_group(g), reduce_op::sum, x.data, cur_shape, s.dim,
                    std::span<const std::size_t>(extents), next.data());
      break;
    }
    case step_kind::all_gather: {
      const auto extents = member_extents(m, g, x.held, x.global, s.dim);
      gather_along(b, backend_group(g), x.data, cur_shape, s.dim,
                   std::span<const std::size_t>(extents), next.data());
      break;
    }
    case step_kind::all_to_all:
      // Even shards only (plans use all_to_all only then): split along the dimension the
      // axis joins, concatenate along the one it leaves.
      all_to_all_along(b, backend_group(g), x.data, cur_shape, s.to_dim, s.dim, next.data());
      break;
    case step_kind::slice:
    case step_kind::local_gemm:
    case step_kind::local_reduce:
    case step_kind::local_elementwise:
      break;  // not a step on one operand (the operation runs its local kernels itself)
  }
  x.adopt(std::move(next), s.spec_after);
}

// Runs `steps` at position p on the operands (indexed by step_operand); a local_gemm step
// calls gemm(operands), which holds one of the backend's kernel slots (backend.hpp) around
// its product: only it knows the product's size, which the slot is taken with.
template <class T, std::size_t Rank, class Gemm>
void run_steps(backend& b, const mesh_value& m, std::size_t p, std::span<const step<Rank>> steps,
               std::span<operand_block<T, Rank>> operands, Gemm&& gemm) {
  for (const step<Rank>& s : steps) {
    if (s.kind == step_kind::local_gemm) {
      gemm(operands);
    } else {
      run_step<T, Rank>(b, m, p, s, operands[static_cast<std::size_t>(s.operand)]);
    }
  }
}

// A contraction's steps split at its local product: the operands' steps before it, the
// result's after it (the planners put only steps on the result after the product).
template <std::size_t Rank>
struct product_steps {
  std::span<const step<Rank>> before, after;
};
template <std::size_t Rank>
product_steps<Rank> split_at_product(std::span<const step<Rank>> steps) {
  std::size_t at = 0;
  while (at < steps.size() && steps[at].kind != step_kind::local_gemm) ++at;
  for (std::size_t i = at + 1; i < steps.size(); ++i)
    if (steps[i].operand != step_operand::out)
      throw usage_error("typeshard: internal: a contraction plan's step after its product is "
                        "not on the result");
  return {steps.first(at), at < steps.size() ? steps.subspan(at + 1) : steps.last(0)};
}

// Runs the result's steps (`after` a product) on position p's product block c0, laid out by
// `local`; returns p's block of the result.
template <class C, std::size_t Rank>
buffer<C> run_result_steps(backend& b, const mesh_value& m, std::size_t p,
                           std::span<const step<Rank>> after, buffer<C> c0,
                           const spec_array<Rank>& local, const shape<Rank>& global) {
  operand_block<C, Rank> y(nullptr, local, global);
  y.adopt(std::move(c0), local);
  for (const step<Rank>& s : after) run_step<C, Rank>(b, m, p, s, y);
  take_slices<C, Rank>(m, p, y);
  return std::move(y.owned);
}

// Runs the steps of one array (a reshard) on the block of mesh position p (shape from
// `from`), returning p's new block.
template <class T, std::size_t Rank>
buffer<T> run_steps_on(backend& b, const mesh_value& m, std::size_t p, const T* in,
                       const shape<Rank>& global, const spec_array<Rank>& from,
                       std::span<const step<Rank>> steps) {
  operand_block<T, Rank> x(in, from, global);
  run_steps<T, Rank>(b, m, p, steps, std::span<operand_block<T, Rank>>(&x, 1), [](auto) {});
  take_slices<T, Rank>(m, p, x);
  return std::move(x.owned);
}

// The same on mesh type Mesh.
template <class T, class Mesh, std::size_t Rank>
buffer<T> run_steps_on(backend& b, std::size_t p, const T* in, const shape<Rank>& global,
                       const spec_array<Rank>& from, std::span<const step<Rank>> steps) {
  return run_steps_on<T, Rank>(b, mesh_value_of<Mesh>(), p, in, global, from, steps);
}

#if defined(TYPESHARD_SEPARATE_COMPILATION)
// With the separately compiled runtime (core/config.hpp), compiled once in typeshard::runtime.
#define TYPESHARD_EXECUTOR_INSTANCE(prefix, T, R)                                              \
  prefix void take_slices<T, R>(const mesh_value&, std::size_t, operand_block<T, R>&);        \
  prefix void run_step<T, R>(backend&, const mesh_value&, std::size_t, const step<R>&,         \
                             operand_block<T, R>&);                                            \
  prefix buffer<T> run_steps_on<T, R>(backend&, const mesh_value&, std::size_t, const T*,     \
                                      const shape<R>&, const spec_array<R>&,                   \
                                      std::span<const step<R>>);
TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(TYPESHARD_EXECUTOR_INSTANCE, extern template)
#endif

template <std::size_t Rank, std::size_t Capacity>
std::span<const step<Rank>> steps_span(const step_array<Rank, Capacity>& l) {
  return {l.steps.data(), l.count};
}

// The steps that run for these extents: the even ones when both shardings divide them
// evenly, else the uneven ones (with static extents the plan already chose; this agrees).
template <class Mesh, std::size_t Rank>
std::span<const step<Rank>> steps_for_extents(const shape<Rank>& global,
                                              const spec_array<Rank>& from,
                                              const spec_array<Rank>& to,
                                              std::span<const step<Rank>> even_steps,
                                              std::span<const step<Rank>> uneven_steps) {
  return is_even<Mesh>(from, global) && is_even<Mesh>(to, global) ? even_steps : uneven_steps;
}

// The same for reshard plan Plan.
template <class Plan, class Mesh, std::size_t Rank>
std::span<const step<Rank>> reshard_steps_for(const shape<Rank>& global) {
  return steps_for_extents<Mesh, Rank>(global, spec_array_of<typename Plan::from_spec, Rank>(),
                                       spec_array_of<typename Plan::to_spec, Rank>(),
                                       std::span<const step<Rank>>(Plan::even_steps),
                                       std::span<const step<Rank>>(Plan::uneven_steps));
}

// Runs `steps` on the devices of a mesh (`devices`, by mesh position, on backend `b`);
// returns the new blocks, by position. Not a template of the plan nor of the mesh, so it is
// instantiated once per element type and rank (and compiled once in typeshard::runtime for
// the common ones).
template <class T, std::size_t Rank>
std::vector<buffer<T>> run_plan_on(backend& b, std::span<const device_id> devices,
                                   const mesh_value& mv, const shape<Rank>& global,
                                   const std::vector<std::span<const T>>& blocks,
                                   const spec_array<Rank>& from,
                                   std::span<const step<Rank>> steps) {
  std::vector<buffer<T>> out(mv.size);
  b.run(devices, [&](std::size_t p) {
    out[p] = run_steps_on<T, Rank>(b, mv, p, blocks[p].data(), global, from, steps);
  });
  return out;
}

// The same on an array's blocks (reshard): one instantiation per element type and rank.
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE std::vector<buffer<T>> run_plan_on_blocks(
    backend& b, std::span<const device_id> devices, const mesh_value& mv,
    const shape<Rank>& global, const std::vector<buffer<T>>& in, const spec_array<Rank>& from,
    std::span<const step<Rank>> steps) {
  std::vector<std::span<const T>> blocks(in.size());
  for (std::size_t p = 0; p < in.size(); ++p) blocks[p] = in[p].span();
  return run_plan_on<T, Rank>(b, devices, mv, global, blocks, from, steps);
}

#if defined(TYPESHARD_SEPARATE_COMPILATION)
#define TYPESHARD_RUN_PLAN_INSTANCE(prefix, T, R)                                              \
  prefix std::vector<buffer<T>> run_plan_on<T, R>(                                             \
      backend&, std::span<const device_id>, const mesh_value&, const shape<R>&,                \
      const std::vector<std::span<const T>>&, const spec_array<R>&, std::span<const step<R>>); \
  prefix std::vector<buffer<T>> run_plan_on_blocks<T, R>(                                      \
      backend&, std::span<const device_id>, const mesh_value&, const shape<R>&,                \
      const std::vector<buffer<T>>&, const spec_array<R>&, std::span<const step<R>>);
TYPESHARD_FOR_RUNTIME_TYPES_AND_RANKS(TYPESHARD_RUN_PLAN_INSTANCE, extern template)
#endif

// The same on device mesh m.
template <class T, class Mesh, std::size_t Rank>
std::vector<buffer<T>> run_plan(const device_mesh<Mesh>& m, const shape<Rank>& global,
                                const std::vector<std::span<const T>>& blocks,
                                const spec_array<Rank>& from,
                                std::span<const step<Rank>> steps) {
  return run_plan_on<T, Rank>(m.get_backend(), std::span<const device_id>(m.devices()),
                              mesh_value_of<Mesh>(), global, blocks, from, steps);
}

// Runs reshard plan Plan on the array's blocks.
template <class Plan, class T, class Mesh, class Spec, class Extents, class U>
std::vector<buffer<T>> run_plan(const sharded_array<T, Mesh, Spec, Extents, U>& a) {
  constexpr std::size_t Rank = Extents::rank;
  const device_mesh<Mesh>& m = a.device_mesh();
  return run_plan_on_blocks<T, Rank>(m.get_backend(), std::span<const device_id>(m.devices()),
                                     mesh_value_of<Mesh>(), a.extents(), *a.shared_shards(),
                                     spec_array_of<typename Plan::from_spec, Rank>(),
                                     reshard_steps_for<Plan, Mesh, Rank>(a.extents()));
}

}  // namespace typeshard::detail
