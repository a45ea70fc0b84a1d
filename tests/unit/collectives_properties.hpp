// Shared by tests/unit/collectives_properties*.cpp: every collective on local blocks,
// against a serial reference on the same data, for one ordered group of mesh axes: random
// block shapes of ranks 1 to 3, every dimension (and every split/concat pair), even
// extents and, for psum_scatter, uneven ones. The varying set of every result is checked
// at compile time. All collectives of a group and rank run in one shard_map (run_all).
#pragma once

#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <typeshard/typeshard.hpp>

#include "collectives_reference.hpp"

namespace collectives_test {

using mesh_a = ts::mesh<ts::axis("a", 4)>;
using mesh_ab = ts::mesh<ts::axis("a", 2), ts::axis("b", 3)>;
using mesh_abc = ts::mesh<ts::axis("a", 2), ts::axis("b", 2), ts::axis("c", 2)>;

// Every device's block: the whole mesh shards dimension 0, so each block varies over all.
template <class Mesh>
struct all_axes;
template <>
struct all_axes<mesh_a> {
  using spec = ts::spec<"a">;
};
template <>
struct all_axes<mesh_ab> {
  using spec = ts::spec<ts::axes("a", "b")>;
};
template <>
struct all_axes<mesh_abc> {
  using spec = ts::spec<ts::axes("a", "b", "c")>;
};

inline unsigned seed() {
  static const unsigned s = std::random_device{}();
  return s;
}

// The blocks the devices hold: dimension 0 cut into Mesh::size equal parts.
template <class Mesh, class T, std::size_t Rank>
std::vector<ts::host_tensor<T, Rank>> blocks_of(const ts::host_tensor<T, Rank>& global) {
  std::vector<ts::host_tensor<T, Rank>> out;
  const std::size_t e = global.extent(0) / Mesh::size;
  for (std::size_t p = 0; p < Mesh::size; ++p) out.push_back(slice_along(global, 0, p * e, (p + 1) * e));
  return out;
}

template <class T, std::size_t Rank>
std::vector<ts::host_tensor<T, Rank>> members(const std::vector<ts::host_tensor<T, Rank>>& blocks,
                                              const std::vector<std::size_t>& group) {
  std::vector<ts::host_tensor<T, Rank>> out;
  for (std::size_t q : group) out.push_back(blocks[q]);
  return out;
}

// What every collective gave one device, by name ("psum", "all_gather 1", ...).
template <class T, std::size_t Rank>
using results_by_name = std::map<std::string, ts::host_tensor<T, Rank>>;

// Runs every collective over the group A... on every device's block, in ONE shard_map (one
// instantiation of its machinery per group and rank: compile time, issue 13), and returns
// each device's results. The varying set of every result is checked at compile time.
template <class Mesh, std::size_t Rank, ts::axis_name... A, class T>
std::vector<results_by_name<T, Rank>> run_all(
    const ts::device_mesh<Mesh>& m, const ts::host_tensor<T, Rank>& global, bool even,
    const std::vector<std::pair<std::size_t, std::size_t>>& perm, int offset) {
  using spec = typename all_axes<Mesh>::spec;
  constexpr std::uint64_t all = ts::vary_of_spec<Mesh, spec>;
  constexpr std::uint64_t named = ts::vary<Mesh, A...>;
  const auto x = ts::device_put<spec>(m, global);
  std::vector<results_by_name<T, Rank>> out(Mesh::size);
  const auto f = ts::shard_map<Mesh, spec, spec>(
      [&](const ts::shard_context<Mesh>& c, const auto& b) {
        results_by_name<T, Rank>& mine = out[c.position()];
        auto keep = [&](const std::string& name, const auto& r) { mine[name] = r.to_host(); };
        auto reduced = [&](const std::string& name, const auto& r) {
          static_assert(std::remove_cvref_t<decltype(r)>::varying == (all & ~named));
          keep(name, r);
        };
        reduced("psum", ts::psum<A...>(b));
        reduced("pmax", ts::pmax<A...>(b));
        reduced("pmin", ts::pmin<A...>(b));
        reduced("pmean", ts::pmean<A...>(b));
        for (std::size_t dim = 0; dim < Rank; ++dim) {
          const std::string d = std::to_string(dim);
          reduced("all_gather " + d, ts::all_gather<A...>(b, dim));
          auto scattered = ts::psum_scatter<A...>(b, dim);
          static_assert(decltype(scattered)::varying == all);
          keep("psum_scatter " + d, scattered);
          if (!even) continue;  // all_to_all needs extents the group divides
          for (std::size_t concat = 0; concat < Rank; ++concat) {
            auto exchanged = ts::all_to_all<A...>(b, dim, concat);
            static_assert(decltype(exchanged)::varying == all);
            keep("all_to_all " + d + " " + std::to_string(concat), exchanged);
          }
        }
        auto permuted =
            ts::ppermute<A...>(b, std::span<const std::pair<std::size_t, std::size_t>>(perm));
        static_assert(decltype(permuted)::varying == all);
        keep("ppermute", permuted);
        keep("shift", ts::shift<A...>(b, offset));
        auto r = b;
        for (T& v : r.values()) v = static_cast<T>(ts::axis_index<A...>(b));
        if (ts::axis_size<A...>(b) != (std::size_t{1} * ... * Mesh::size_of(A))) r = -r - 1;
        keep("axis_index", r);
        return b;
      });
  (void)f(x);
  return out;
}

template <class Mesh, std::size_t Rank, ts::axis_name... A>
void check_group(const ts::device_mesh<Mesh>& m, std::mt19937& rng) {
  using T = int;
  const std::vector<std::size_t> axes{Mesh::index_of(A)...};
  const std::size_t n = (std::size_t{1} * ... * Mesh::size_of(A));
  std::vector<std::vector<std::size_t>> groups(Mesh::size);
  for (std::size_t p = 0; p < Mesh::size; ++p) groups[p] = brute_group<Mesh>(p, axes);
  INFO("group of " << n << " over " << sizeof...(A) << " axes, rank " << Rank);

  for (bool even : {true, false}) {
    // Block extents: multiples of the group size when even (all_to_all needs that).
    ts::shape<Rank> block{};
    std::uniform_int_distribution<std::size_t> k(1, 2), e(1, 5);
    for (auto& x : block) x = even ? n * k(rng) : e(rng);
    ts::shape<Rank> global_shape = block;
    global_shape[0] *= Mesh::size;
    const auto global = random_tensor<T>(global_shape, rng);
    const auto blocks = blocks_of<Mesh>(global);
    INFO("block " << ts::to_string(block) << (even ? " (even)" : " (uneven)"));

    // ppermute with a random partial permutation: receivers get their source's block,
    // the others zeros; shift is the ring permutation.
    std::vector<std::size_t> dest(n);
    for (std::size_t r = 0; r < n; ++r) dest[r] = r;
    std::shuffle(dest.begin(), dest.end(), rng);
    std::vector<std::pair<std::size_t, std::size_t>> perm;
    std::bernoulli_distribution keep(0.7);
    for (std::size_t r = 0; r < n; ++r)
      if (keep(rng)) perm.emplace_back(r, dest[r]);
    std::uniform_int_distribution<int> offsets(-3, 3);
    const int offset = offsets(rng);

    const auto got = run_all<Mesh, Rank, A...>(m, global, even, perm, offset);
    const auto result = [&](std::size_t p, const std::string& name) {
      INFO("collective " << name << " at position " << p);
      const auto it = got[p].find(name);
      REQUIRE(it != got[p].end());
      return it->second;
    };
    const auto sum_of = [](T x, T y) { return x + y; };

    for (std::size_t p = 0; p < Mesh::size; ++p) {
      INFO("position " << p);
      const auto group_blocks = members(blocks, groups[p]);
      std::size_t rank = 0;
      while (groups[p][rank] != p) ++rank;

      // psum, pmax, pmin, pmean: every member gets the reduction of the group.
      const auto sum = combine(group_blocks, sum_of);
      REQUIRE(result(p, "psum") == sum);
      REQUIRE(result(p, "pmax") == combine(group_blocks, [](T x, T y) { return x < y ? y : x; }));
      REQUIRE(result(p, "pmin") == combine(group_blocks, [](T x, T y) { return y < x ? y : x; }));
      auto mean = sum;
      for (T& v : mean.values()) v /= static_cast<T>(n);
      REQUIRE(result(p, "pmean") == mean);

      for (std::size_t dim = 0; dim < Rank; ++dim) {
        INFO("dimension " << dim);
        const std::string d = std::to_string(dim);
        // all_gather: the members' blocks concatenated along dim, in rank order.
        REQUIRE(result(p, "all_gather " + d) == concat_along(group_blocks, dim));
        // psum_scatter: the sum, of which member r keeps block r of dim (ceil-sized blocks).
        const std::size_t b = (block[dim] + n - 1) / n;
        const std::size_t start = std::min(block[dim], rank * b);
        REQUIRE(result(p, "psum_scatter " + d) ==
                slice_along(sum, dim, start, std::min(block[dim], start + b)));
        // all_to_all: chunk r of every member along split, concatenated along concat.
        if (!even) continue;
        for (std::size_t concat = 0; concat < Rank; ++concat) {
          const std::size_t c = block[dim] / n;
          std::vector<ts::host_tensor<T, Rank>> chunks;
          for (std::size_t q : groups[p])
            chunks.push_back(slice_along(blocks[q], dim, rank * c, (rank + 1) * c));
          REQUIRE(result(p, "all_to_all " + d + " " + std::to_string(concat)) ==
                  concat_along(chunks, concat));
        }
      }

      ts::host_tensor<T, Rank> expect(block);
      for (const auto& [s, dst] : perm)
        if (dst == rank) expect = blocks[groups[p][s]];
      REQUIRE(result(p, "ppermute") == expect);
      const std::size_t source =
          static_cast<std::size_t>(((static_cast<int>(rank) - offset) % static_cast<int>(n) +
                                    static_cast<int>(n)) % static_cast<int>(n));
      REQUIRE(result(p, "shift") == blocks[groups[p][source]]);
      REQUIRE(result(p, "axis_index") == ts::host_tensor<T, Rank>(block, static_cast<T>(rank)));
    }
  }
}

template <class Mesh, ts::axis_name... A>
void check_group_all_ranks(const ts::device_mesh<Mesh>& m, std::mt19937& rng) {
  check_group<Mesh, 1, A...>(m, rng);
  check_group<Mesh, 2, A...>(m, rng);
  check_group<Mesh, 3, A...>(m, rng);
}

}  // namespace collectives_test
