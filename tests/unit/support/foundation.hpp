// tests/unit/support/foundation.hpp: shared helpers of the foundation's tests (mesh, spec,
// layout, device_put): the meshes the property tests run on, every valid spec of a mesh and
// rank enumerated at compile time, random extents, and the run's random seed.
//
// Not a test itself (CMake globs tests/unit/*.cpp only).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <typeshard/core/layout.hpp>
#include <typeshard/core/mesh.hpp>
#include <typeshard/core/spec.hpp>

namespace ts_test {

namespace ts = typeshard;

// ---- the random seed ---------------------------------------------------------------------
// seed(): TYPESHARD_TEST_SEED from the environment if set, else a fresh random one. Every
// property test INFOs it, so a failure prints the value that reproduces it.
inline std::uint64_t seed() {
  static const std::uint64_t value = []() -> std::uint64_t {
    if (const char* env = std::getenv("TYPESHARD_TEST_SEED")) return std::stoull(env);
    std::random_device rd;
    return (std::uint64_t{rd()} << 32) ^ rd();
  }();
  return value;
}

inline std::string seed_message() {
  return "seed " + std::to_string(seed()) + " (rerun with TYPESHARD_TEST_SEED=" +
         std::to_string(seed()) + ")";
}

// ---- meshes ------------------------------------------------------------------------------
template <class... Meshes>
struct mesh_list {};

// The property tests' meshes: 1 to 3 axes, 1 to 8 devices (so they fit cpu_devices{8}),
// odd sizes and size-1 axes included. Split in three lists because every valid spec of
// every rank is instantiated per mesh, and the 3-axis meshes have 171 each: one list per
// translation unit keeps each compile short.
using meshes_1d = mesh_list<                //
    ts::mesh<ts::axis("x", 4)>,                //
    ts::mesh<ts::axis("x", 8)>,                //
    ts::mesh<ts::axis("x", 3)>>;
using meshes_2d = mesh_list<                               //
    ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>,          //
    ts::mesh<ts::axis("data", 4), ts::axis("model", 2)>,   //
    ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>,          //
    ts::mesh<ts::axis("x", 3), ts::axis("y", 2)>,          //
    ts::mesh<ts::axis("x", 1), ts::axis("y", 4)>>;
template <class A, class B>
struct concat;
template <class... A, class... B>
struct concat<mesh_list<A...>, mesh_list<B...>> {
  using type = mesh_list<A..., B...>;
};
using meshes_1d_2d = concat<meshes_1d, meshes_2d>::type;
using mesh_2x2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2), ts::axis("z", 2)>;
using mesh_2x1x3 = ts::mesh<ts::axis("a", 2), ts::axis("b", 1), ts::axis("c", 3)>;

// Number of valid specs of ranks 1, 2 and 3 together: 9 for one axis, 35 for two, 171 for
// three (see all_specs below).
inline constexpr std::size_t specs_1d_2d = 3 * 9 + 5 * 35;
inline constexpr std::size_t specs_3d = 171;

template <class... Meshes, class F>
void for_each_mesh(mesh_list<Meshes...>, F&& f) {
  (f.template operator()<Meshes>(), ...);
}

// ---- every valid spec of a mesh and rank, at compile time --------------------------------
//
// A valid spec (rule 1) gives each mesh axis at most one place: unused, or some position in
// the ordered axis list of one dimension. all_specs generates each exactly once: the axes are
// placed one after another, each either left unused or inserted into one of the slots of the
// dimensions built so far (before, between or after the axes already there); a final order
// of the axes within a dimension arises from exactly one insertion sequence. The number of
// specs is sum over j of C(k, j) * j! * C(j + Rank - 1, Rank - 1) for k mesh axes (106 for
// 3 axes and rank 3); tests/static/spec_enumeration.cpp checks the counts, validity and
// distinctness.
template <class Mesh, std::size_t Rank>
struct all_specs {
  static constexpr std::size_t k = Mesh::rank;

  struct raw {
    std::array<std::size_t, Rank> len{};
    std::array<std::array<std::size_t, k>, Rank> ax{};
  };

  template <class Visit>
  static constexpr void place(const raw& r, std::size_t i, Visit& visit) {
    if (i == k) {
      visit(r);
      return;
    }
    place(r, i + 1, visit);  // axis i unused
    for (std::size_t d = 0; d < Rank; ++d) {
      for (std::size_t pos = 0; pos <= r.len[d]; ++pos) {
        raw s = r;
        for (std::size_t j = s.len[d]; j > pos; --j) s.ax[d][j] = s.ax[d][j - 1];
        s.ax[d][pos] = i;
        ++s.len[d];
        place(s, i + 1, visit);
      }
    }
  }

  static constexpr std::size_t compute_count() {
    std::size_t n = 0;
    auto visit = [&n](const raw&) { ++n; };
    place(raw{}, 0, visit);
    return n;
  }

  static constexpr std::size_t count = compute_count();

  static constexpr std::array<std::array<ts::dim_spec, Rank>, count> compute_list() {
    std::array<std::array<ts::dim_spec, Rank>, count> out{};
    std::size_t n = 0;
    auto visit = [&](const raw& r) {
      for (std::size_t d = 0; d < Rank; ++d) {
        ts::dim_spec ds{};
        for (std::size_t j = 0; j < r.len[d]; ++j) ds.axes[ds.count++] = Mesh::axes[r.ax[d][j]].name;
        out[n][d] = ds;
      }
      ++n;
    };
    place(raw{}, 0, visit);
    return out;
  }

  static constexpr auto list = compute_list();

  template <std::size_t I, class Seq = std::make_index_sequence<Rank>>
  struct at_impl;
  template <std::size_t I, std::size_t... D>
  struct at_impl<I, std::index_sequence<D...>> {
    using type = ts::spec<list[I][D]...>;
  };
  // The I-th spec, as a type.
  template <std::size_t I>
  using at = typename at_impl<I>::type;
};

// for_each_spec<Mesh, Rank>(f): f.template operator()<Spec, I>() for every valid spec of a
// rank-Rank array on Mesh (I is its number, for rotating choices such as element types).
template <class Mesh, std::size_t Rank, class F>
void for_each_spec(F&& f) {
  using all = all_specs<Mesh, Rank>;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f.template operator()<typename all::template at<I>, I>(), ...);
  }(std::make_index_sequence<all::count>{});
}

// for_each_spec_sampled<Mesh, Rank, Stride>(f): every Stride-th valid spec, starting at
// number Rank % Stride (so the ranks sample different phases of the enumeration order), for
// tests whose per-spec code is too heavy to compile for all of them. f gets <Spec, J>, J
// counting the sampled specs 0, 1, 2, ...
template <std::size_t Count, std::size_t Stride, std::size_t Offset>
inline constexpr std::size_t sampled_count = Offset < Count ? (Count - Offset + Stride - 1) / Stride : 0;

template <class Mesh, std::size_t Rank, std::size_t Stride, class F>
void for_each_spec_sampled(F&& f) {
  using all = all_specs<Mesh, Rank>;
  constexpr std::size_t offset = Rank % Stride;
  [&]<std::size_t... J>(std::index_sequence<J...>) {
    (f.template operator()<typename all::template at<offset + J * Stride>, J>(), ...);
  }(std::make_index_sequence<sampled_count<all::count, Stride, offset>>{});
}

// ---- random extents ----------------------------------------------------------------------

// A random extent for a dimension split into `shards`: 0, fewer than the shard count, an
// exact multiple, or uneven (not a multiple), each often enough.
inline std::size_t random_extent(std::mt19937_64& rng, std::size_t shards, std::size_t max_multiple = 3) {
  switch (std::uniform_int_distribution<int>(0, 7)(rng)) {
    case 0:
      return 0;
    case 1:
      return shards > 1 ? std::uniform_int_distribution<std::size_t>(1, shards - 1)(rng) : 1;
    case 2:
    case 3:
      return shards * std::uniform_int_distribution<std::size_t>(1, max_multiple)(rng);
    default:
      return std::uniform_int_distribution<std::size_t>(1, shards * max_multiple + 2)(rng);
  }
}

// Random global extents for a layout with the given shards per dimension, with at most
// max_elements elements (the largest dimension is halved until it fits, so long thin shapes
// still occur). Not a template of the layout, so it costs nothing per spec.
inline std::vector<std::size_t> random_extents(std::mt19937_64& rng,
                                               const std::vector<std::size_t>& shards,
                                               std::size_t max_elements,
                                               std::size_t max_multiple = 3) {
  std::vector<std::size_t> s;
  for (std::size_t n : shards) s.push_back(random_extent(rng, n, max_multiple));
  for (;;) {
    std::size_t n = 1;
    for (std::size_t e : s) n *= e;
    if (n <= max_elements) return s;
    std::size_t big = 0;
    for (std::size_t d = 1; d < s.size(); ++d)
      if (s[d] > s[big]) big = d;
    s[big] /= 2;
  }
}

template <class Layout>
ts::shape<Layout::rank> random_shape(std::mt19937_64& rng, std::size_t max_elements,
                                     std::size_t max_multiple = 3) {
  std::vector<std::size_t> shards;
  for (std::size_t d = 0; d < Layout::rank; ++d) shards.push_back(Layout::shards_along(d));
  const std::vector<std::size_t> e = random_extents(rng, shards, max_elements, max_multiple);
  ts::shape<Layout::rank> out{};
  for (std::size_t d = 0; d < Layout::rank; ++d) out[d] = e[d];
  return out;
}

}  // namespace ts_test
