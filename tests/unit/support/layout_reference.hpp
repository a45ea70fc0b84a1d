// tests/unit/support/layout_reference.hpp: the layout property test's machinery, shared by
// the tests/unit/layout_properties_*.cpp files (split by mesh so that each compiles quickly).
//
// The reference does not use layout's arithmetic. It assigns devices to shards the way JAX
// builds a NamedSharding's device assignment: the array of mesh positions (mesh shape,
// row-major) is transposed so that the axes of dimension 0 come first (in spec order), then
// those of dimension 1, ..., then the unused axes, and reshaped to
// (shards_0, ..., shards_{R-1}, replicas). A device at [k_0, ..., k_{R-1}, r] holds block k_d
// of every dimension d and is replica r. Block membership is JAX's ceil division: element i
// of a dimension of extent n split into s shards belongs to block i / ceil(n / s).
//
// Checked, for every element of the global array: the mesh positions whose index() contains
// it are exactly the reference's holders, and they form exactly one replica group (so each
// element is held by one shard and by every member of that shard's group). Checked per
// layout: local_shape agrees with index, the slices of each dimension are contiguous
// ceil-division blocks in order (trailing blocks short or empty), replica_groups partition
// the positions and agree with same_shard, replica_index and is_primary.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <typeshard/core/layout.hpp>

#include "foundation.hpp"

namespace ts_test {


// ---- what layout answers, recorded without templates ------------------------------------
//
// observe_raw<Mesh, Spec, Rank>() is the only code instantiated per spec: it records every
// answer of layout<Mesh, Spec, Rank> for one global shape. The checks below are ordinary
// functions, so the hundreds of specs do not multiply Catch2's assertion code (which made
// this file take minutes to compile).
struct observation {
  std::string what;                                 // mesh, spec, shape, for messages
  std::vector<std::string> axis_names;              // the mesh
  std::vector<std::size_t> axis_sizes;
  std::vector<std::vector<std::string>> dim_axes;   // the padded spec: axis names per dim
  std::vector<std::size_t> global;

  std::vector<std::size_t> shards_along;            // [d]
  std::size_t distinct_shards = 0;
  std::size_t replication = 0;
  bool is_even = false;
  std::vector<std::size_t> block_shape;             // [d]
  std::vector<std::vector<ts::slice>> index;        // [p][d]
  std::vector<std::vector<std::size_t>> local_shape;  // [p][d]
  std::vector<std::vector<std::size_t>> shard_along;  // [p][d]
  std::vector<std::size_t> replica_index;           // [p]
  std::vector<bool> is_primary;                     // [p]
  std::vector<std::vector<bool>> same_shard;        // [p][q]
  std::vector<std::vector<std::size_t>> groups;     // replica_groups()
};

// The raw answers, in fixed arrays (at most 8 positions, rank 3): filling them is a few
// loops per spec; turning them into an observation is shared code.
inline constexpr std::size_t max_positions = 8;
inline constexpr std::size_t max_rank = 3;

struct raw_observation {
  const ts::axis* axes = nullptr;
  std::size_t mesh_rank = 0, mesh_size = 0, rank = 0;
  const ts::dim_spec* dims = nullptr;  // the padded spec
  std::size_t global[max_rank]{};
  std::size_t shards_along[max_rank]{};
  std::size_t distinct_shards = 0, replication = 0;
  bool is_even = false;
  std::size_t block_shape[max_rank]{};
  ts::slice index[max_positions][max_rank]{};
  std::size_t local_shape[max_positions][max_rank]{};
  std::size_t shard_along[max_positions][max_rank]{};
  std::size_t replica_index[max_positions]{};
  bool is_primary[max_positions]{};
  bool same_shard[max_positions][max_positions]{};
};

// The answers that do not depend on the extents, computed at compile time (constant data,
// no code per spec).
template <class Mesh, class Spec, std::size_t Rank>
constexpr raw_observation static_answers() {
  using L = ts::layout<Mesh, Spec, Rank>;
  raw_observation r;
  r.mesh_rank = Mesh::rank;
  r.mesh_size = Mesh::size;
  r.rank = Rank;
  for (std::size_t d = 0; d < Rank; ++d) r.shards_along[d] = L::shards_along(d);
  r.distinct_shards = L::distinct_shards();
  r.replication = L::replication();
  for (std::size_t p = 0; p < Mesh::size; ++p) {
    for (std::size_t d = 0; d < Rank; ++d) r.shard_along[p][d] = L::shard_along(d, p);
    r.replica_index[p] = L::replica_index(p);
    r.is_primary[p] = L::is_primary(p);
    for (std::size_t q = 0; q < Mesh::size; ++q) r.same_shard[p][q] = L::same_shard(p, q);
  }
  return r;
}

template <class Mesh, class Spec, std::size_t Rank>
raw_observation observe_raw(const std::size_t* extents, std::size_t positions,
                            std::vector<std::vector<std::size_t>>& groups) {
  static_assert(Mesh::size <= max_positions && Rank <= max_rank);
  using L = ts::layout<Mesh, Spec, Rank>;
  static constexpr raw_observation fixed = static_answers<Mesh, Spec, Rank>();
  raw_observation r = fixed;
  r.axes = Mesh::axes.data();
  r.dims = L::spec_type::dims.data();
  ts::shape<Rank> global{};
  for (std::size_t d = 0; d < Rank; ++d) global[d] = extents[d];
  const ts::shape<Rank> block = L::block_shape(global);
  for (std::size_t d = 0; d < Rank; ++d) {
    r.global[d] = global[d];
    r.block_shape[d] = block[d];
  }
  r.is_even = L::is_even(global);
  // `positions` is Mesh::size, passed at run time so that the optimiser does not unroll this
  // loop for every spec (which made the file slow to compile).
  for (std::size_t p = 0; p < positions && p < max_positions; ++p) {
    const ts::index_slices<Rank> ix = L::index(global, p);
    const ts::shape<Rank> local = L::local_shape(global, p);
    for (std::size_t d = 0; d < Rank; ++d) {
      r.index[p][d] = ix[d];
      r.local_shape[p][d] = local[d];
    }
  }
  groups = L::replica_groups();
  return r;
}

inline observation cook(const raw_observation& r, std::vector<std::vector<std::size_t>> groups) {
  observation o;
  for (std::size_t i = 0; i < r.mesh_rank; ++i) {
    o.axis_names.emplace_back(r.axes[i].name.view());
    o.axis_sizes.push_back(r.axes[i].size);
  }
  for (std::size_t d = 0; d < r.rank; ++d) {
    o.dim_axes.emplace_back();
    for (std::size_t a = 0; a < r.dims[d].count; ++a) o.dim_axes.back().emplace_back(r.dims[d].axes[a].view());
  }
  o.global.assign(r.global, r.global + r.rank);
  o.shards_along.assign(r.shards_along, r.shards_along + r.rank);
  o.distinct_shards = r.distinct_shards;
  o.replication = r.replication;
  o.is_even = r.is_even;
  o.block_shape.assign(r.block_shape, r.block_shape + r.rank);
  for (std::size_t p = 0; p < r.mesh_size; ++p) {
    o.index.emplace_back(r.index[p], r.index[p] + r.rank);
    o.local_shape.emplace_back(r.local_shape[p], r.local_shape[p] + r.rank);
    o.shard_along.emplace_back(r.shard_along[p], r.shard_along[p] + r.rank);
    o.replica_index.push_back(r.replica_index[p]);
    o.is_primary.push_back(r.is_primary[p]);
    o.same_shard.emplace_back(r.same_shard[p], r.same_shard[p] + r.mesh_size);
  }
  o.groups = std::move(groups);
  // "Mesh('x': 2) / dims [x][][] / shape (5, 0, 3)", for the failure message.
  o.what = "mesh (";
  for (std::size_t i = 0; i < r.mesh_rank; ++i)
    o.what += (i ? ", " : "") + o.axis_names[i] + ": " + std::to_string(o.axis_sizes[i]);
  o.what += "), spec (";
  for (std::size_t d = 0; d < r.rank; ++d) {
    o.what += d ? ", [" : "[";
    for (std::size_t a = 0; a < o.dim_axes[d].size(); ++a) o.what += (a ? " " : "") + o.dim_axes[d][a];
    o.what += "]";
  }
  o.what += "), shape (";
  for (std::size_t d = 0; d < r.rank; ++d) o.what += (d ? ", " : "") + std::to_string(o.global[d]);
  o.what += ")";
  return o;
}

// ---- the reference --------------------------------------------------------------------------

// Per position, the block along every dimension and the replica number, from JAX's
// transpose-and-reshape of the device array (see the top of the file).
struct reference_assignment {
  std::vector<std::size_t> shards;                 // [d]
  std::size_t replicas = 1;
  std::vector<std::vector<std::size_t>> block;     // [p][d]
  std::vector<std::size_t> replica;                // [p]
};

inline reference_assignment reference(const observation& o) {
  const std::size_t k = o.axis_names.size();
  const std::size_t rank = o.dim_axes.size();
  std::size_t mesh_size = 1;
  for (std::size_t s : o.axis_sizes) mesh_size *= s;

  // The permutation of mesh axes: dimension 0's axes, dimension 1's, ..., then the unused;
  // group_size: the reshaped extents, blocks per dimension then replicas.
  std::vector<std::size_t> perm, group_size;
  std::vector<bool> used(k, false);
  for (const auto& names : o.dim_axes) {
    std::size_t n = 1;
    for (const std::string& name : names) {
      const std::size_t i = static_cast<std::size_t>(
          std::find(o.axis_names.begin(), o.axis_names.end(), name) - o.axis_names.begin());
      REQUIRE(i < k);  // valid specs name mesh axes only
      REQUIRE_FALSE(used[i]);
      perm.push_back(i);
      used[i] = true;
      n *= o.axis_sizes[i];
    }
    group_size.push_back(n);
  }
  std::size_t replicas = 1;
  for (std::size_t i = 0; i < k; ++i)
    if (!used[i]) {
      perm.push_back(i);
      replicas *= o.axis_sizes[i];
    }
  group_size.push_back(replicas);

  // The explicit device array: dev[row-major flat index of mesh coordinates] = position.
  std::vector<std::size_t> dev(mesh_size);
  for (std::size_t p = 0; p < mesh_size; ++p) dev[p] = p;

  reference_assignment out;
  out.replicas = replicas;
  out.shards.assign(group_size.begin(), group_size.begin() + static_cast<std::ptrdiff_t>(rank));
  out.block.assign(mesh_size, std::vector<std::size_t>(rank));
  out.replica.assign(mesh_size, 0);

  // Walk the transposed array in row-major order (an odometer over the permuted axes); the
  // running flat index f, read in the reshaped extents, gives (k_0, ..., k_{R-1}, r).
  std::vector<std::size_t> tc(k, 0), c(k, 0);
  for (std::size_t f = 0; f < mesh_size; ++f) {
    for (std::size_t j = 0; j < k; ++j) c[perm[j]] = tc[j];
    std::size_t flat = 0;
    for (std::size_t i = 0; i < k; ++i) flat = flat * o.axis_sizes[i] + c[i];
    const std::size_t position = dev[flat];
    std::size_t rest = f;
    for (std::size_t g = group_size.size(); g-- > 0;) {
      const std::size_t v = rest % group_size[g];
      rest /= group_size[g];
      if (g == rank)
        out.replica[position] = v;
      else
        out.block[position][g] = v;
    }
    for (std::size_t j = k; j-- > 0;) {
      if (++tc[j] < o.axis_sizes[perm[j]]) break;
      tc[j] = 0;
    }
  }
  return out;
}

// ---- the checks ----------------------------------------------------------------------------

inline void check(const observation& o) {
  INFO(o.what);
  const reference_assignment ref = reference(o);
  const std::size_t rank = o.global.size();
  const std::size_t mesh_size = o.index.size();

  // ---- shard counts and replication ----
  std::size_t distinct = 1;
  bool even = true;
  for (std::size_t d = 0; d < rank; ++d) {
    distinct *= ref.shards[d];
    even = even && o.global[d] % ref.shards[d] == 0;
  }
  REQUIRE(o.shards_along == ref.shards);
  REQUIRE(o.distinct_shards == distinct);
  REQUIRE(o.replication == ref.replicas);
  REQUIRE(distinct * ref.replicas == mesh_size);
  REQUIRE(o.is_even == even);

  // ---- per position: shard numbers, index, local shape ----
  for (std::size_t p = 0; p < mesh_size; ++p) {
    CAPTURE(p);
    REQUIRE(o.shard_along[p] == ref.block[p]);
    for (std::size_t d = 0; d < rank; ++d) {
      CAPTURE(d);
      REQUIRE(o.index[p][d].start <= o.index[p][d].stop);
      REQUIRE(o.index[p][d].stop <= o.global[d]);
      REQUIRE(o.local_shape[p][d] == o.index[p][d].size());
    }
    REQUIRE(o.replica_index[p] == ref.replica[p]);
    REQUIRE(o.is_primary[p] == (ref.replica[p] == 0));
  }

  // ---- per dimension: contiguous ceil-division blocks, trailing ones short or empty ----
  for (std::size_t d = 0; d < rank; ++d) {
    CAPTURE(d);
    const std::size_t n = ref.shards[d];
    const std::size_t b = (o.global[d] + n - 1) / n;
    std::vector<ts::slice> blocks(n);
    std::vector<bool> seen(n, false);
    for (std::size_t p = 0; p < mesh_size; ++p) {
      const std::size_t kb = ref.block[p][d];
      if (seen[kb]) REQUIRE(blocks[kb] == o.index[p][d]);  // every holder of block kb agrees
      blocks[kb] = o.index[p][d];
      seen[kb] = true;
    }
    std::size_t expected_start = 0, max_size = 0;
    for (std::size_t kb = 0; kb < n; ++kb) {
      CAPTURE(kb);
      REQUIRE(seen[kb]);
      REQUIRE(blocks[kb].start == expected_start);  // contiguous, in block order
      REQUIRE(blocks[kb].size() <= b);
      if (kb > 0) REQUIRE(blocks[kb].size() <= blocks[kb - 1].size());  // short ones trail
      if (blocks[kb].size() != 0 && blocks[kb].size() != b) REQUIRE(blocks[kb].stop == o.global[d]);
      expected_start = blocks[kb].stop;
      max_size = std::max(max_size, blocks[kb].size());
    }
    REQUIRE(expected_start == o.global[d]);  // the blocks cover the dimension
    REQUIRE(o.block_shape[d] == b);
    REQUIRE(max_size == b);
  }

  // ---- replica groups ----
  REQUIRE(o.groups.size() == distinct);
  std::vector<std::size_t> group_of(mesh_size, o.groups.size());
  for (std::size_t g = 0; g < o.groups.size(); ++g) {
    CAPTURE(g, o.groups[g]);
    const std::vector<std::size_t>& group = o.groups[g];
    REQUIRE(group.size() == ref.replicas);
    REQUIRE(std::is_sorted(group.begin(), group.end()));
    REQUIRE(o.is_primary[group.front()]);
    if (g > 0) REQUIRE(o.groups[g - 1].front() < group.front());  // ordered by primary
    std::set<std::size_t> replica_numbers;
    for (std::size_t p : group) {
      REQUIRE(p < mesh_size);
      REQUIRE(group_of[p] == o.groups.size());  // no position in two groups
      group_of[p] = g;
      replica_numbers.insert(o.replica_index[p]);
      REQUIRE(o.index[p] == o.index[group.front()]);  // a group holds one shard
      REQUIRE(ref.block[p] == ref.block[group.front()]);
    }
    REQUIRE(replica_numbers.size() == ref.replicas);  // 0 .. replicas-1, each once
    REQUIRE(*replica_numbers.rbegin() == ref.replicas - 1);
  }
  for (std::size_t p = 0; p < mesh_size; ++p) REQUIRE(group_of[p] < o.groups.size());  // cover
  for (std::size_t p = 0; p < mesh_size; ++p)
    for (std::size_t q = 0; q < mesh_size; ++q)
      if (o.same_shard[p][q] != (group_of[p] == group_of[q])) {
        CAPTURE(p, q, o.same_shard[p][q]);
        FAIL("same_shard disagrees with replica_groups");
      }

  // ---- every element: its holders are the reference's, and exactly one replica group ----
  std::size_t elements = 1;
  for (std::size_t e : o.global) elements *= e;
  std::vector<std::size_t> i(rank, 0), holders, expected;
  for (std::size_t e = 0; e < elements; ++e) {
    holders.clear();
    expected.clear();
    for (std::size_t p = 0; p < mesh_size; ++p) {
      bool in = true, ref_in = true;
      for (std::size_t d = 0; d < rank; ++d) {
        in = in && o.index[p][d].start <= i[d] && i[d] < o.index[p][d].stop;
        const std::size_t b = (o.global[d] + ref.shards[d] - 1) / ref.shards[d];
        ref_in = ref_in && i[d] / b == ref.block[p][d];
      }
      if (in) holders.push_back(p);
      if (ref_in) expected.push_back(p);
    }
    if (holders != expected || holders.empty() || holders != o.groups[group_of[holders.front()]]) {
      CAPTURE(e, i, holders, expected);
      FAIL("the positions holding this element are not exactly the reference's replica group");
    }
    for (std::size_t d = rank; d-- > 0;) {
      if (++i[d] < o.global[d]) break;
      i[d] = 0;
    }
  }
}

// One layout to check: how to observe it, and its shards per dimension (for drawing extents).
struct layout_case {
  raw_observation (*observe)(const std::size_t* extents, std::size_t positions,
                             std::vector<std::vector<std::size_t>>& groups);
  std::size_t positions;
  std::vector<std::size_t> shards;
};

template <class Mesh, std::size_t Rank>
void collect_specs(std::vector<layout_case>& cases) {
  ts_test::for_each_spec<Mesh, Rank>([&]<class Spec, std::size_t>() {
    cases.push_back({&observe_raw<Mesh, Spec, Rank>, Mesh::size, {}});
    for (std::size_t d = 0; d < Rank; ++d)
      cases.back().shards.push_back(ts::layout<Mesh, Spec, Rank>::shards_along(d));
  });
}

inline void check_case(const layout_case& c, const std::vector<std::size_t>& extents) {
  std::vector<std::vector<std::size_t>> groups;
  const raw_observation raw = c.observe(extents.data(), c.positions, groups);
  check(cook(raw, std::move(groups)));
}

// check_meshes(Meshes{}): every valid spec of ranks 1 to 3 on each mesh, each with the
// corner-case extents (all 0, all 1, one element per shard) and 16 random ones. Returns the
// number of specs checked.
template <class... Meshes>
std::size_t check_meshes(mesh_list<Meshes...> meshes) {
  std::vector<layout_case> cases;
  for_each_mesh(meshes, [&]<class Mesh>() {
    collect_specs<Mesh, 1>(cases);
    collect_specs<Mesh, 2>(cases);
    collect_specs<Mesh, 3>(cases);
  });
  INFO(seed_message());
  std::mt19937_64 rng(seed());
  for (const layout_case& c : cases) {
    const std::size_t rank = c.shards.size();
    check_case(c, std::vector<std::size_t>(rank, 0));
    check_case(c, std::vector<std::size_t>(rank, 1));
    check_case(c, c.shards);
    for (int trial = 0; trial < 16; ++trial)
      check_case(c, random_extents(rng, c.shards, rank == 3 ? 400 : 2000));
  }
  return cases.size();
}

}  // namespace ts_test
