// typeshard/viz/visualize.hpp: the box drawing of jax.debug.visualize_array_sharding.
//
//   ts::visualize(C);                                  // to std::cout, coloured on a terminal
//   ts::visualize(std::cout, C, {.use_color = false}); // boxes, as JAX's use_color=False
//   ts::visualize_sharding<ts::spec<"x", "y">>(os, m, ts::shape<2>{16, 16});  // no data needed
//
// For a 1-D or 2-D array: one box per distinct shard, placed where the shard sits in the
// array and sized in proportion to its extents, labelled with the devices that hold it
// ("CPU 0,1": a replica group, ids sorted). The output is byte for byte what JAX prints for
// the same shape, mesh, spec and device order (JAX draws with `rich`; detail/rich_table.hpp
// re-implements the part of rich involved): uncoloured, SQUARE box lines; coloured, no lines
// but ANSI background colours from matplotlib's "tab20b", in JAX's order.
//
// Where JAX stops, typeshard goes on: uneven shards are drawn in proportion (JAX's
// visualize asserts even shards), zero extents draw every shard at its share of the box,
// and a column too narrow for its label keeps its box without the label (rich raises).
// A value unreduced over some axis draws where its partial sums live.
#pragma once

#include <cstddef>
#include <iostream>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../backend/backend.hpp"
#include "../core/config.hpp"
#include "../core/detail/diagnose.hpp"
#include "../array/device_mesh.hpp"
#include "../core/errors.hpp"
#include "../core/layout.hpp"
#include "../array/sharded_array.hpp"
#include "../core/rules/visualize.hpp"

namespace typeshard {

// Which ANSI colours a coloured picture uses; automatic asks the environment as rich does
// (COLORTERM=truecolor or 24bit: 24-bit colours; otherwise the 256-colour palette).
enum class color_system { automatic, truecolor, eight_bit };

// The options of jax.debug.visualize_array_sharding / visualize_sharding.
struct visualize_options {
  // JAX's use_color. Unset: colours only when the stream is std::cout / std::cerr and that
  // is a terminal (and NO_COLOR is unset, TERM is not "dumb"), as rich decides.
  std::optional<bool> use_color;
  color_system colors = color_system::automatic;
  double scale = 1.0;           // JAX's scale: the picture is 10 * scale lines tall
  std::size_t min_width = 9;    // narrowest box, in characters
  std::size_t max_width = 80;   // widest box, and the width of the console JAX draws on
};

namespace detail {

// One distinct shard: where it sits in the grid of boxes, its share of each dimension, and
// the devices that hold it.
struct box_of_devices {
  double height = -1;  // fraction of the rows; negative for a 1-D array (one line)
  double width = 0;    // fraction of the columns
  std::vector<device_id> devices;
};

// Every box of a picture, row-major, with what the drawing needs of the array's shape.
struct box_grid {
  std::size_t rows = 1, cols = 1;
  std::size_t first_extent = 0, last_extent = 0;  // global extents of dimensions 0 and rank-1
  bool two_dimensional = false;
  std::vector<box_of_devices> boxes;
};

// Draws the grid as JAX does (viz/impl/visualize.ipp).
TYPESHARD_DEFERRED
void draw_boxes(std::ostream& os, box_grid g, std::string_view platform,
                const visualize_options& o);

// The picture of an array of spec `spec` over `global` on the mesh `m`, whose mesh
// positions run on `devices` of `platform`: jax.debug.visualize_sharding, step for step. Only
// the boxes (which shard sits where, its share of each dimension, its devices) depend on the
// layout; the drawing is draw_boxes, compiled once (in typeshard::runtime with separate
// compilation). The mesh and spec are values, so a program drawing many layouts compiles this
// once per rank (and not at all with the runtime).
template <std::size_t Rank>
TYPESHARD_COLD TYPESHARD_NOINLINE void draw_sharding(std::ostream& os, const mesh_value& m,
                                                     const spec_array<Rank>& spec,
                                                     const shape<Rank>& global,
                                                     std::span<const device_id> devices,
                                                     std::string_view platform,
                                                     const visualize_options& o) {
  static_assert(Rank == 1 || Rank == 2);
  // Share of dimension d held by a slice: its extent over the global extent (an empty
  // dimension, which JAX divides by, gives every shard an equal share instead).
  auto share = [&](std::size_t d, const slice& s) {
    return global[d] != 0 ? static_cast<double>(s.size()) / static_cast<double>(global[d])
                          : 1.0 / static_cast<double>(shards_of(m, spec[d]));
  };
  box_grid g;
  g.rows = Rank == 2 ? shards_of(m, spec[0]) : 1;
  g.cols = shards_of(m, spec[Rank - 1]);
  g.first_extent = global[0];
  g.last_extent = global[Rank - 1];
  g.two_dimensional = Rank == 2;
  g.boxes.resize(g.rows * g.cols);
  for (std::size_t p = 0; p < devices.size(); ++p) {
    const index_slices<Rank> ix = index_of(m, spec, global, p);
    const std::size_t r = Rank == 2 ? shard_of(m, spec[0], p) : 0;
    const std::size_t c = shard_of(m, spec[Rank - 1], p);
    box_of_devices& b = g.boxes[r * g.cols + c];
    if constexpr (Rank == 2) b.height = share(0, ix[0]);
    b.width = share(Rank - 1, ix[Rank - 1]);
    b.devices.push_back(devices[p]);
  }
  draw_boxes(os, std::move(g), platform, o);
}

#if defined(TYPESHARD_SEPARATE_COMPILATION)
#define TYPESHARD_DRAW_SHARDING_INSTANCE(prefix, R)                                            \
  prefix void draw_sharding<R>(std::ostream&, const mesh_value&, const spec_array<R>&,         \
                               const shape<R>&, std::span<const device_id>, std::string_view, \
                               const visualize_options&);
TYPESHARD_DRAW_SHARDING_INSTANCE(extern template, 1)
TYPESHARD_DRAW_SHARDING_INSTANCE(extern template, 2)
#endif

}  // namespace detail

// visualize_sharding<Spec>(os, mesh, shape): the picture of an array of that shape sharded
// by Spec over the device mesh, without the array (jax.debug.visualize_sharding).
template <spec_like Spec, mesh_like Mesh, std::size_t Rank>
void visualize_sharding(std::ostream& os, const device_mesh<Mesh>& m, const shape<Rank>& global,
                        const visualize_options& options = {}) {
  static_assert(detail::require<(Rank <= 2), diagnostic::visualize_needs_rank_1_or_2<Rank>>::value);
  if constexpr (Rank <= 2) {
    static_assert(detail::check_spec<Mesh, Spec, Rank>() || true);  // rule 1, one error
    if (m.get_backend().process_index() != 0) return;  // SPMD (MPI): drawn once, by process 0
    if constexpr (valid_spec<Mesh, Spec, Rank>)
      detail::draw_sharding<Rank>(os, detail::mesh_value_of<Mesh>(),
                                  layout<Mesh, Spec, Rank>::entries, global, m.devices(),
                                  m.get_backend().platform(), options);
  }
}

// visualize(os, array): jax.debug.visualize_array_sharding(array) written to `os`.
template <sharded_array_like Array>
void visualize(std::ostream& os, const Array& a, const visualize_options& options = {}) {
  using A = std::remove_cvref_t<Array>;
  static_assert(
      detail::require<(A::rank <= 2), diagnostic::visualize_needs_rank_1_or_2<A::rank>>::value);
  // SPMD (MPI): every process runs this line; the picture is drawn once, by process 0.
  if (a.device_mesh().get_backend().process_index() != 0) return;
  if constexpr (A::rank <= 2)
    detail::draw_sharding<A::rank>(os, detail::mesh_value_of<typename A::mesh_type>(),
                                   A::layout_type::entries, a.extents(),
                                   a.device_mesh().devices(),
                                   a.device_mesh().get_backend().platform(), options);
}

// visualize(array): the same, to std::cout.
template <sharded_array_like Array>
void visualize(const Array& a, const visualize_options& options = {}) {
  visualize(std::cout, a, options);
}

}  // namespace typeshard

#if !defined(TYPESHARD_SEPARATE_COMPILATION)
#include "impl/visualize.ipp"
#endif
