// typeshard/ops/take.hpp: ts::take, the embedding lookup (jnp.take(table, ids, axis=0)), with
// its sharding rules, as Megatron's vocab-parallel embedding.
//
//   // table: [V, D], ids: [B, S] of integers
//   auto e = ts::take(table, ids);   // [B, S, D]
//   // table spec<none, "model">, ids spec<"data">: e spec<"data", none, "model">, no collective
//   // table spec<"model", none>: each device looks up the rows it holds (others give zeros):
//   //   e is unreduced over "model" (rule 3), reduced when you say: ts::reshard<Spec>(e)
//
// The result's spec is the ids' spec, then the table's spec of its second dimension: each
// device looks its own ids up in its own block of the table, with no communication. A
// vocabulary sharded over some axes leaves the result unreduced over them (a device adds
// the rows it holds, zeros for the others: the psum that follows is Megatron's). The ids'
// axes and the table's must be apart (else a device would need rows or ids another holds: a
// compile error naming the reshard). An id outside [0, V) is a ts::shape_error naming it.
// On blocks inside ts::shard_map: the block's own rows, zeros for ids outside them (local).
// Gradient (on a table traced by ts::value_and_grad): the cotangent's rows added into the
// rows of the ids (a scatter-add), each device into its block of the table; unreduced over
// the ids' axes (each device adds the rows of its own ids: rule 9's data-parallel gradient).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../array/block.hpp"
#include "../array/device_mesh.hpp"
#include "../array/sharded_array.hpp"
#include "../backend/backend.hpp"
#include "../core/config.hpp"
#include "../core/detail/diagnose.hpp"
#include "../core/rules/indexing.hpp"
#include "../core/detail/unreduced_from.hpp"
#include "../core/errors.hpp"
#include "../core/layout.hpp"
#include "../core/rules/rule3_unreduced.hpp"
#include "../core/spec.hpp"
#include "../array/detail/buffer.hpp"

namespace typeshard {

namespace detail {

[[noreturn]] TYPESHARD_COLD inline void throw_take_id_out_of_range(long long id,
                                                                  std::size_t vocab) {
  throw shape_error(message({"typeshard: ts::take: id ", id, " is outside the table's ", vocab,
                             " rows; fix: ids from 0 to rows - 1"}));
}

// The axes (mesh order) a spec uses, as a dim_spec (an unreduced list).
template <class Mesh, class Spec>
constexpr dim_spec axes_of_spec() {
  dim_spec out;
  for (std::size_t i = 0; i < Mesh::rank; ++i)
    if (Spec::uses(Mesh::axes[i].name) && out.count < dim_spec::max_axes)
      out.axes[out.count++] = Mesh::axes[i].name;
  return out;
}

template <class Mesh, class A, class B>
constexpr bool specs_share_an_axis() {
  for (std::size_t i = 0; i < Mesh::rank; ++i)
    if (A::uses(Mesh::axes[i].name) && B::uses(Mesh::axes[i].name)) return true;
  return false;
}

// The ids' spec (Rank entries), then D: take's result spec.
template <class S, dim_spec D, std::size_t... I>
spec<S::dim(I)..., D> spec_ids_then(std::index_sequence<I...>);

// A device's block of the table: rows [v0, v1) of the vocabulary, dl columns.
struct table_rows {
  std::size_t v0, v1, dl;
};
inline table_rows table_rows_of(const mesh_value& mv, const spec_array<2>& table_spec,
                                const shape<2>& table_global, std::size_t p) {
  const index_slices<2> tix = index_of(mv, table_spec, table_global, p);
  return {tix[0].start, tix[0].stop, tix[1].size()};
}

// Each device's block of take: its ids looked up in its block of the table (rows v0..v1 of
// the vocabulary, dl columns), zeros for ids outside its rows.
template <class T, class L>
TYPESHARD_NOINLINE std::vector<buffer<T>> take_blocks_on(
    backend& b, std::span<const device_id> devices, const mesh_value& mv,
    const spec_array<2>& table_spec, const shape<2>& table_global,
    const std::vector<buffer<T>>& table, const std::vector<buffer<L>>& ids) {
  std::vector<buffer<T>> out(mv.size);
  b.run(devices, [&](std::size_t p) {
    const auto [v0, v1, dl] = table_rows_of(mv, table_spec, table_global, p);
    const std::span<const L> id = ids[p].span();
    buffer<T> r(id.size() * dl);
    std::fill_n(r.data(), r.size(), T{});
    const T* t = table[p].data();
    for (std::size_t i = 0; i < id.size(); ++i) {
      if (id[i] < L{} || static_cast<std::size_t>(id[i]) >= table_global[0])
        throw_take_id_out_of_range(static_cast<long long>(id[i]), table_global[0]);
      const auto v = static_cast<std::size_t>(id[i]);
      if (v >= v0 && v < v1) std::copy_n(t + (v - v0) * dl, dl, r.data() + i * dl);
    }
    out[p] = std::move(r);
  });
  return out;
}

// take's transpose: each device adds the rows of its cotangent block g into the rows of its
// ids that its table block holds (a table-shaped block per device).
template <class T, class L>
TYPESHARD_NOINLINE std::vector<buffer<T>> take_scatter_on(
    backend& b, std::span<const device_id> devices, const mesh_value& mv,
    const spec_array<2>& table_spec, const shape<2>& table_global,
    const std::vector<buffer<T>>& g, const std::vector<buffer<L>>& ids) {
  std::vector<buffer<T>> out(mv.size);
  b.run(devices, [&](std::size_t p) {
    const auto [v0, v1, dl] = table_rows_of(mv, table_spec, table_global, p);
    const std::span<const L> id = ids[p].span();
    buffer<T> r((v1 - v0) * dl);
    std::fill_n(r.data(), r.size(), T{});
    const T* gp = g[p].data();
    for (std::size_t i = 0; i < id.size(); ++i) {
      const auto v = static_cast<std::size_t>(id[i]);
      if (v >= v0 && v < v1) {
        T* row = r.data() + (v - v0) * dl;
        for (std::size_t k = 0; k < dl; ++k) row[k] += gp[i * dl + k];
      }
    }
    out[p] = std::move(r);
  });
  return out;
}

// The types of take(table, ids).
template <class Table, class Ids>
struct take_types {
  using mesh_type = typename Table::mesh_type;
  using table_spec = typename Table::spec;
  static constexpr bool valid = Table::rank == 2 &&
                                !specs_share_an_axis<mesh_type, table_spec, typename Ids::spec>();
  static constexpr dim_spec vocab_axes = [] {
    dim_spec out;
    const dim_spec v = table_spec::dim(0);
    for (std::size_t i = 0; i < mesh_type::rank; ++i)
      if (v.uses(mesh_type::axes[i].name)) out.axes[out.count++] = mesh_type::axes[i].name;
    return out;
  }();
  static constexpr dim_spec ids_axes = axes_of_spec<mesh_type, typename Ids::spec>();
  using spec = decltype(spec_ids_then<typename Ids::spec, table_spec::dim(1)>(
      std::make_index_sequence<Ids::rank>{}));
  using result = sharded_array<typename Table::value_type, mesh_type, spec,
                               dextents<Ids::rank + 1>,
                               decltype(unreduced_from<vocab_axes>(
                                   std::make_index_sequence<vocab_axes.count>{}))>;
  // The table's gradient contribution: the table's layout, unreduced over the ids' axes.
  using scatter = sharded_array<typename Table::value_type, mesh_type, table_spec,
                                typename Table::extents_type,
                                decltype(unreduced_from<ids_axes>(
                                    std::make_index_sequence<ids_axes.count>{}))>;
};

// take's transpose: the cotangent g (take's result layout, reduced) scattered into the table.
template <class Table, class G, class Ids>
auto take_scatter(const G& g, const Ids& ids, const shape<2>& table_extents) {
  using types = take_types<Table, Ids>;
  using R = typename types::scatter;
  const auto& m = g.device_mesh();
  return R(adopt_shards, m, table_extents,
           take_scatter_on<typename Table::value_type, typename Ids::value_type>(
               m.get_backend(), std::span<const device_id>(m.devices()),
               mesh_value_of<typename Table::mesh_type>(), Table::layout_type::entries,
               table_extents, *g.shared_shards(), *ids.shared_shards()));
}

}  // namespace detail

namespace detail {
// take on blocks: rows of the table block at the ids block, zeros outside [0, rows).
template <class Table, class Ids>
auto take_block(const Table& table, const Ids& ids) {
  using T = typename Table::value_type;
  constexpr std::size_t Rank = Ids::rank;
  const std::size_t rows = table.extent(0), dl = table.extent(1);
  shape<Rank + 1> e{};
  for (std::size_t d = 0; d < Rank; ++d) e[d] = ids.extent(d);
  e[Rank] = dl;
  buffer<T> out(ids.size() * dl);
  std::fill_n(out.data(), out.size(), T{});
  const auto* id = ids.data();
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (id[i] >= 0 && static_cast<std::size_t>(id[i]) < rows)
      std::copy_n(table.data() + static_cast<std::size_t>(id[i]) * dl, dl, out.data() + i * dl);
  return block<T, Rank + 1, typename Table::mesh_type, (Table::varying | Ids::varying)>(
      table.context(), e, std::move(out));
}

template <class Table, class Ids>
auto take_arrays(const Table& table, const Ids& ids) {
  using types = take_types<Table, Ids>;
  using result = typename types::result;
  using Mesh = typename Table::mesh_type;
  if constexpr (Table::rank != 2) {
    static_assert(require<false, diagnostic::take_table_not_rank_2<Table::rank>>::value);
    return table;
  } else if constexpr (!types::valid) {
    static_assert(require<false, diagnostic::take_axes_shared<typename Table::spec,
                                                               typename Ids::spec>>::value);
    // A replicated array of the result's rank (its spec would be invalid): one error only.
    return after_diagnostic<typename Table::value_type, Mesh, spec<>, Ids::rank + 1>(
        table.device_mesh());
  } else if constexpr (!Table::unreduced_type::empty || !Ids::unreduced_type::empty) {
    static_assert(require<false, diagnostic::nonlinear_op_on_unreduced<
                                     typename Table::unreduced_type>>::value);
    return result(adopt_shards, table.device_mesh(), shape<Ids::rank + 1>{},
                  std::shared_ptr<const std::vector<buffer<typename Table::value_type>>>{});
  } else {
    check_same_device_mesh(table.device_mesh(), ids.device_mesh(), "take",
                           move_to_other_devices_fix);
    shape<Ids::rank + 1> global{};
    for (std::size_t d = 0; d < Ids::rank; ++d) global[d] = ids.extent(d);
    global[Ids::rank] = table.extent(1);
    const device_mesh<Mesh>& m = table.device_mesh();
    return result(adopt_shards, m, global,
                  take_blocks_on<typename Table::value_type, typename Ids::value_type>(
                      m.get_backend(), std::span<const device_id>(m.devices()),
                      mesh_value_of<Mesh>(), Table::layout_type::entries, table.extents(),
                      *table.shared_shards(), *ids.shared_shards()));
  }
}

}  // namespace detail

// take(table, ids): rows of `table` ([V, D]) at the integer `ids` ([B...]): [B..., D]. A
// function object, as ts::transpose is (argument-dependent lookup never finds it: a
// program's own take(...) helper keeps being called); its form on a traced table
// (ops/detail/traced_functions.hpp) is found through the traced_take hook.
struct take_t {
  template <sharded_array_like Table, sharded_array_like Ids>
    requires std::is_integral_v<typename Ids::value_type>
  [[nodiscard]] auto operator()(const Table& table, const Ids& ids) const {
    return detail::take_arrays(table, ids);
  }
  // On blocks inside ts::shard_map: the block's own rows at the block's ids, a row of zeros
  // for an id outside them (Megatron's masked lookup: subtract the block's first vocabulary
  // row from the ids, look up, then ts::psum over the vocabulary's axes). Local.
  template <block_like Table, block_like Ids>
    requires(std::is_integral_v<typename Ids::value_type> && Table::rank == 2)
  [[nodiscard]] auto operator()(const Table& table, const Ids& ids) const {
    return detail::take_block(table, ids);
  }
  template <class Table, class Ids>
    requires requires(const Table& t, const Ids& i) { traced_take(t, i); }
  [[nodiscard]] auto operator()(const Table& table, const Ids& ids) const {
    return traced_take(table, ids);
  }
};
inline constexpr take_t take{};

}  // namespace typeshard
