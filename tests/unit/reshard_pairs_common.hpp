// Shared by tests/unit/reshard_pairs_*.cpp: every valid spec of a rank on a mesh, and a
// check that reshard between two of them keeps the values (to_host equality) on random
// data, for even and uneven (including empty-shard) extents.
#pragma once

#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <random>
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

// The checks, instantiated once per rank rather than once per pair.
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

template <class Mesh, std::size_t Rank, std::size_t... P>
void check_all_pairs(const ts::device_mesh<Mesh>& m, std::mt19937& rng, std::index_sequence<P...>) {
  constexpr std::size_t n = specs_of<Mesh, Rank>.count;
  // A table, not a fold expression: clang limits folds to 256 operands.
  using check = void (*)(const ts::device_mesh<Mesh>&, std::mt19937&);
  static constexpr check checks[] = {&check_pair<Mesh, Rank, P / n, P % n>...};
  for (check c : checks) c(m, rng);
}

// Checks reshard between every pair of specs of rank Rank on Mesh.
template <class Mesh, std::size_t Rank>
void check_all_pairs(const ts::device_mesh<Mesh>& m, unsigned seed) {
  std::mt19937 rng(seed);
  constexpr std::size_t n = specs_of<Mesh, Rank>.count;
  check_all_pairs<Mesh, Rank>(m, rng, std::make_index_sequence<n * n>{});
}

inline unsigned test_seed() {
  static const unsigned seed = std::random_device{}();
  return seed;
}

}  // namespace reshard_test
