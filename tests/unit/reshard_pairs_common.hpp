// Shared by tests/unit/reshard_pairs_*.cpp and tests/mpi/reshard_pairs.cpp: every valid
// spec of a rank on a mesh, and a check that reshard between every two of them keeps the
// values on random data, for even and uneven (including empty-shard) extents: every pair at
// value level (planner and executor), a sample of pairs through the typed API (issue 13:
// the typed API per pair cost 35 s of compile time per mesh and only repeated that path).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace reshard_test {

namespace ts = typeshard;

inline constexpr std::size_t max_specs = 64;

template <std::size_t Rank>
struct spec_set {
  std::array<ts::detail::spec_array<Rank>, max_specs> specs{};
  std::size_t count = 0;
};

// Every spec of rank Rank on Mesh: each axis unused or placed in some dimension, in any
// order within it.
template <class Mesh, std::size_t Rank>
constexpr spec_set<Rank> all_specs() {
  spec_set<Rank> set;
  set.count = 1;  // the fully replicated spec
  for (std::size_t a = 0; a < Mesh::rank; ++a) {
    spec_set<Rank> next;
    for (std::size_t s = 0; s < set.count; ++s) {
      next.specs[next.count++] = set.specs[s];  // axis a unused
      for (std::size_t d = 0; d < Rank; ++d)
        for (std::size_t pos = 0; pos <= set.specs[s][d].count; ++pos) {
          ts::detail::spec_array<Rank> sp = set.specs[s];
          ts::dim_spec& ds = sp[d];
          for (std::size_t i = ds.count; i > pos; --i) ds.axes[i] = ds.axes[i - 1];
          ds.axes[pos] = Mesh::axes[a].name;
          ++ds.count;
          next.specs[next.count++] = sp;
        }
    }
    set = next;
  }
  return set;
}

// (dim_at recomputes the table: g++ 12 crashes on, or rejects, a subscript of a static
// constexpr table as a template argument.)
template <class Mesh, std::size_t Rank>
struct spec_table {
  static constexpr spec_set<Rank> value = all_specs<Mesh, Rank>();
};
template <class Mesh, std::size_t Rank>
inline constexpr spec_set<Rank> specs_of = spec_table<Mesh, Rank>::value;

template <class Mesh, std::size_t Rank>
constexpr ts::dim_spec dim_at(std::size_t i, std::size_t d) {
  return all_specs<Mesh, Rank>().specs[i][d];
}

template <class Mesh, std::size_t Rank, std::size_t I, class = std::make_index_sequence<Rank>>
struct spec_at_impl;
template <class Mesh, std::size_t Rank, std::size_t I, std::size_t... D>
struct spec_at_impl<Mesh, Rank, I, std::index_sequence<D...>> {
  using type = ts::spec<dim_at<Mesh, Rank>(I, D)...>;
};
template <class Mesh, std::size_t Rank, std::size_t I>
using spec_at = typename spec_at_impl<Mesh, Rank, I>::type;

template <std::size_t Rank>
ts::host_tensor<int, Rank> random_tensor(const ts::shape<Rank>& extents, std::mt19937& rng) {
  ts::host_tensor<int, Rank> t(extents);
  std::uniform_int_distribution<int> value(-1000, 1000);
  for (int& v : t.values()) v = value(rng);
  return t;
}

// Random extents: multiples of the mesh size (even for every spec), or 1..7 (mostly
// uneven, sometimes with empty shards).
template <class Mesh, std::size_t Rank>
ts::shape<Rank> random_extents(std::mt19937& rng, bool even) {
  ts::shape<Rank> s{};
  std::uniform_int_distribution<std::size_t> k(1, 2), e(1, 7);
  for (auto& x : s) x = even ? Mesh::size * k(rng) : e(rng);
  return s;
}

// p's block of `host` under spec s: the slices layout gives position p, copied out.
template <class Mesh, std::size_t Rank>
std::vector<int> block_of(const ts::host_tensor<int, Rank>& host,
                          const ts::detail::spec_array<Rank>& s, std::size_t p) {
  const ts::index_slices<Rank> ix = ts::detail::index_of<Mesh>(s, host.extents(), p);
  ts::shape<Rank> origin{}, local{};
  for (std::size_t d = 0; d < Rank; ++d) {
    origin[d] = ix[d].start;
    local[d] = ix[d].size();
  }
  std::vector<int> out(ts::host_tensor<int, Rank>::element_count(local));
  ts::detail::copy_box(host.data(), host.extents(), origin, out.data(), local, ts::shape<Rank>{},
                       local);
  return out;
}

template <std::size_t Rank>
std::string spec_string(const ts::detail::spec_array<Rank>& s) {
  std::string out = "P(";
  for (std::size_t d = 0; d < Rank; ++d) {
    if (d) out += ", ";
    if (s[d].count == 0) out += "None";
    for (std::size_t a = 0; a < s[d].count; ++a) {
      if (a) out += "+";
      out += std::string(s[d].axes[a].view());
    }
  }
  return out + ")";
}

// Every pair, at value level: the planner (detail::plan_reshard, the function every
// reshard_plan's steps come from) and the executor (detail::run_plan, what ts::reshard runs)
// are called with the specs as values, so one instantiation per mesh and rank covers every
// pair. The typed path on top of them (spec types, padded specs, the plan type, device_put
// and to_host) is checked by check_typed_sample below.
template <class Mesh, std::size_t Rank>
void check_all_pairs_values(const ts::device_mesh<Mesh>& m, std::mt19937& rng) {
  constexpr spec_set<Rank> set = specs_of<Mesh, Rank>;
  for (std::size_t f = 0; f < set.count; ++f)
    for (std::size_t t = 0; t < set.count; ++t) {
      const ts::detail::spec_array<Rank>& from = set.specs[f];
      const ts::detail::spec_array<Rank>& to = set.specs[t];
      const auto even_steps = ts::detail::plan_reshard(from, ts::dim_spec{}, to, ts::dim_spec{}, true);
      const auto uneven_steps =
          ts::detail::plan_reshard(from, ts::dim_spec{}, to, ts::dim_spec{}, false);
      for (bool even : {true, false}) {
        const auto extents = random_extents<Mesh, Rank>(rng, even);
        const auto host = random_tensor(extents, rng);
        std::vector<std::vector<int>> in(Mesh::size);
        std::vector<std::span<const int>> blocks(Mesh::size);
        for (std::size_t p = 0; p < Mesh::size; ++p) {
          in[p] = block_of<Mesh>(host, from, p);
          blocks[p] = in[p];
        }
        // No step (from == to): ts::reshard shares the input's blocks, as here.
        std::vector<ts::detail::buffer<int>> ran;
        if (even_steps.count + uneven_steps.count != 0)
          ran = ts::detail::run_plan<int, Mesh, Rank>(
              m, extents, blocks, from,
              ts::detail::steps_for_extents<Mesh, Rank>(extents, from, to,
                                                        ts::detail::steps_span(even_steps),
                                                        ts::detail::steps_span(uneven_steps)));
        const auto out_block = [&](std::size_t p) {
          return ran.empty() ? blocks[p] : std::span<const int>(ran[p].data(), ran[p].size());
        };
        // Each device compares its own new block (on MPI, the positions this rank holds).
        std::vector<char> wrong(Mesh::size, 0);
        ts::detail::for_each_position(m, [&](std::size_t p) {
          const std::vector<int> want = block_of<Mesh>(host, to, p);
          const std::span<const int> got = out_block(p);
          wrong[p] = got.size() != want.size() || !std::equal(want.begin(), want.end(), got.begin());
        });
        for (std::size_t p = 0; p < Mesh::size; ++p) {
          INFO("reshard " << spec_string(from) << " -> " << spec_string(to) << ", extents "
                          << ts::to_string(extents) << ", position " << p);
          REQUIRE(!wrong[p]);
        }
      }
    }
}

// The checks of the typed path, instantiated once per rank rather than once per pair.
template <std::size_t Rank>
void verify(const ts::host_tensor<int, Rank>& host, const ts::host_tensor<int, Rank>& back,
            const std::vector<ts::shard<int, Rank>>& shards, const std::string& plan) {
  INFO(plan << "extents " << ts::to_string(host.extents()));
  REQUIRE(back == host);
  // Every shard holds exactly its slices of the host data.
  for (const auto& s : shards) {
    ts::shape<Rank> origin{};
    for (std::size_t d = 0; d < Rank; ++d) origin[d] = s.index[d].start;
    ts::host_tensor<int, Rank> expect(s.shape);
    ts::detail::copy_box(host.data(), host.extents(), origin, expect.data(), s.shape,
                         ts::shape<Rank>{}, s.shape);
    REQUIRE(s.to_host() == expect);
  }
}

// Out of line, so that each pair's function stays small (compile time).
template <class From, class Mesh, std::size_t Rank>
[[gnu::noinline]] auto put(const ts::device_mesh<Mesh>& m, const ts::host_tensor<int, Rank>& host) {
  return ts::device_put<From>(m, host);
}
template <class B, std::size_t Rank>
[[gnu::noinline]] void verify_array(const ts::host_tensor<int, Rank>& host, const B& b,
                                    std::string (*describe)()) {
  verify<Rank>(host, ts::to_host(b), b.addressable_shards(), describe());
}

template <class Mesh, std::size_t Rank, std::size_t From, std::size_t To>
void check_pair(const ts::device_mesh<Mesh>& m, std::mt19937& rng) {
  using from = spec_at<Mesh, Rank, From>;
  using to = spec_at<Mesh, Rank, To>;
  for (bool even : {true, false}) {
    const auto extents = random_extents<Mesh, Rank>(rng, even);
    const auto host = random_tensor(extents, rng);
    const auto a = put<from>(m, host);
    const auto b = ts::reshard<to>(a);
    static_assert(std::is_same_v<typename decltype(b)::spec,
                                 typename ts::detail::padded_spec<to, Rank>::type>);
    using plan = ts::reshard_plan_for<std::remove_cvref_t<decltype(a)>, to>;
    verify_array(host, b, &plan::describe);
  }
}

// The typed path (ts::reshard<Spec> on arrays from ts::device_put, read back by to_host and
// per shard) on a sample of n pairs: spec i to spec n-1-i, so every spec is once a source
// and once a target, the replicated one paired with the most sharded.
template <class Mesh, std::size_t Rank, std::size_t... I>
void check_typed_sample(const ts::device_mesh<Mesh>& m, std::mt19937& rng,
                        std::index_sequence<I...>) {
  constexpr std::size_t n = sizeof...(I);
  (check_pair<Mesh, Rank, I, n - 1 - I>(m, rng), ...);
}

// Checks reshard between every pair of specs of rank Rank on Mesh.
template <class Mesh, std::size_t Rank>
void check_all_pairs(const ts::device_mesh<Mesh>& m, unsigned seed) {
  std::mt19937 rng(seed);
  check_all_pairs_values<Mesh, Rank>(m, rng);
  check_typed_sample<Mesh, Rank>(m, rng, std::make_index_sequence<specs_of<Mesh, Rank>.count>{});
}

inline unsigned test_seed() {
  static const unsigned seed = std::random_device{}();
  return seed;
}

}  // namespace reshard_test
