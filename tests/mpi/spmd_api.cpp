// The user-facing API on the MPI backend, SPMD: every rank runs the same program.
// - device_put from the host data every rank has, and from a function that makes only the
//   blocks this rank holds; to_host gathers the whole array on every rank;
//   addressable_shards lists this rank's shard only;
// - a device mesh must span every rank when taken implicitly; an explicit subset works, and
//   ranks outside it take no part;
// - visualize draws on rank 0 only, the same picture as on the thread pool;
// - one program (shard_map with collectives, reshard, elementwise ops, matmul, a reshard
//   onto reordered devices) gives the same numbers on MPI as on the thread pool, whose own
//   correctness the unit tests check against serial references.
#include "support.hpp"

#include <atomic>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x1 = ts::mesh<ts::axis("x", 2), ts::axis("y", 1)>;

template <class T, std::size_t Rank>
ts::host_tensor<T, Rank> random_tensor(const ts::shape<Rank>& s, std::mt19937_64& rng) {
  ts::host_tensor<T, Rank> t(s);
  std::uniform_int_distribution<int> d(-9, 9);  // small integers: float sums are exact
  for (T& v : t.values()) v = static_cast<T>(d(rng));
  return t;
}

// The block of `host` at `index`.
template <class T, std::size_t Rank>
ts::host_tensor<T, Rank> slice_of(const ts::host_tensor<T, Rank>& host,
                                  const ts::index_slices<Rank>& index) {
  ts::shape<Rank> origin{}, local{};
  for (std::size_t d = 0; d < Rank; ++d) {
    origin[d] = index[d].start;
    local[d] = index[d].size();
  }
  ts::host_tensor<T, Rank> out(local);
  ts::detail::copy_box(host.data(), host.extents(), origin, out.data(), local, ts::shape<Rank>{},
                       local);
  return out;
}

// This rank's shard must be the only one listed, and hold its slices of `host`.
template <class Array, class T, std::size_t Rank>
void check_shards(const Array& a, const ts::host_tensor<T, Rank>& host) {
  const auto shards = a.addressable_shards();
  REQUIRE(shards.size() == 1);
  const auto& s = shards[0];
  REQUIRE(s.device.id == static_cast<ts::device_id>(mpi_test::rank()));
  REQUIRE(a.device_mesh().device_at(s.mesh_position) == s.device.id);
  REQUIRE(s.index == a.index(s.mesh_position));
  REQUIRE(s.to_host() == slice_of(host, s.index));
}

template <class Mesh, class Spec>
void put_and_gather(std::mt19937_64& rng, const ts::shape<2>& extents) {
  INFO(Mesh::to_string() << " spec " << Spec::to_string() << " extents "
                         << ts::to_string(extents));
  const auto host = random_tensor<int>(extents, rng);
  ts::device_mesh<Mesh> m{mpi_test::devices()};

  const auto a = ts::device_put<Spec>(m, host);
  check_shards(a, host);
  REQUIRE(ts::to_host(a) == host);

  // From a function: asked once, for this rank's slices only.
  std::atomic<int> calls{0};
  const auto b = ts::device_put<Spec>(m, extents, [&](const ts::index_slices<2>& ix) {
    ++calls;
    return slice_of(host, ix);
  });
  REQUIRE(calls == 1);
  check_shards(b, host);
  REQUIRE(ts::to_host(b) == host);
}

template <class Mesh>
void put_and_gather_all(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (const ts::shape<2> e : {ts::shape<2>{8, 12}, ts::shape<2>{5, 3}, ts::shape<2>{1, 7}}) {
    put_and_gather<Mesh, ts::spec<"x", "y">>(rng, e);
    put_and_gather<Mesh, ts::spec<"y", "x">>(rng, e);
    put_and_gather<Mesh, ts::spec<ts::axes("x", "y"), ts::none>>(rng, e);
    put_and_gather<Mesh, ts::spec<ts::none, "x">>(rng, e);  // replicated over y
    put_and_gather<Mesh, ts::spec<>>(rng, e);               // fully replicated
  }
}

// ---- one program, two backends ----------------------------------------------------------

template <class Mesh>
struct results {
  std::vector<ts::host_tensor<int, 2>> ints;
  std::vector<ts::host_tensor<float, 2>> floats;
};

template <class Mesh>
results<Mesh> program(ts::backend& b, const ts::host_tensor<int, 2>& a,
                      const ts::host_tensor<float, 2>& p, const ts::host_tensor<float, 2>& q) {
  ts::device_mesh<Mesh> m{b};
  results<Mesh> r;
  const auto A = ts::device_put<ts::spec<"x", "y">>(m, a);

  // shard_map with each collective.
  const auto summed = ts::shard_map<Mesh, ts::spec<"x", "y">, ts::spec<ts::none, "y">>(
      [](const auto& x) { return ts::psum<"x">(x); })(A);
  const auto gathered = ts::shard_map<Mesh, ts::spec<"x", "y">, ts::spec<"x", ts::none>>(
      [](const auto& x) { return ts::all_gather<"y">(x, 1); })(A);
  const auto scattered = ts::shard_map<Mesh, ts::spec<"x", ts::none>, ts::spec<"x", "y">>(
      [](const auto& x) { return ts::psum_scatter<"y">(x, 1); })(
      ts::reshard<ts::spec<"x", ts::none>>(A));
  const auto exchanged = ts::shard_map<Mesh, ts::spec<"x", ts::none>, ts::spec<ts::none, "x">>(
      [](const auto& x) { return ts::all_to_all<"x">(x, 1, 0); })(
      ts::reshard<ts::spec<"x", ts::none>>(A));
  const auto shifted = ts::shard_map<Mesh, ts::spec<"x", "y">, ts::spec<"x", "y">>(
      [](const auto& x) { return ts::shift<"x">(x, 1); })(A);
  const auto largest = ts::shard_map<Mesh, ts::spec<"x", "y">, ts::spec<ts::none, ts::none>>(
      [](const auto& x) { return ts::pmax<"x", "y">(x); })(A);
  for (const auto& x : {ts::to_host(summed), ts::to_host(gathered), ts::to_host(scattered),
                        ts::to_host(exchanged), ts::to_host(shifted), ts::to_host(largest)})
    r.ints.push_back(x);

  // reshard, elementwise, and a reshard onto the devices in reverse order (a permute).
  r.ints.push_back(ts::to_host(ts::reshard<ts::spec<ts::none, "x">>(A)));
  r.ints.push_back(ts::to_host(A + A * 3));
  std::vector<ts::device_id> reversed(m.devices().rbegin(), m.devices().rend());
  const ts::device_mesh<Mesh> back{b, reversed};
  const auto R = ts::reshard<ts::spec<"y", "x">>(A, back);
  r.ints.push_back(ts::to_host(R));

  // matmul: no collective; an all-gather; an all-reduce; a reduce-scatter.
  const auto P_rows = ts::device_put<ts::spec<"x", ts::none>>(m, p);
  const auto P_cols = ts::device_put<ts::spec<ts::none, "x">>(m, p);
  const auto Q_cols = ts::device_put<ts::spec<ts::none, "y">>(m, q);
  const auto Q_rows = ts::device_put<ts::spec<"x", ts::none>>(m, q);
  r.floats.push_back(ts::to_host(ts::matmul(P_rows, Q_cols)));
  r.floats.push_back(ts::to_host(ts::matmul(P_rows, Q_rows)));
  r.floats.push_back(ts::to_host(ts::matmul<ts::spec<ts::none, ts::none>>(P_cols, Q_rows)));
  r.floats.push_back(ts::to_host(ts::matmul<ts::spec<"x", ts::none>>(P_cols, Q_rows)));
  const auto pmean = ts::shard_map<Mesh, ts::spec<"x", ts::none>, ts::spec<ts::none, ts::none>>(
      [](const auto& x) { return ts::pmean<"x">(x); })(P_rows);
  r.floats.push_back(ts::to_host(pmean));
  return r;
}

template <class Mesh>
void same_numbers(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto a = random_tensor<int>(ts::shape<2>{8, 12}, rng);
  const auto p = random_tensor<float>(ts::shape<2>{8, 12}, rng);
  const auto q = random_tensor<float>(ts::shape<2>{12, 4}, rng);
  const results<Mesh> on_mpi = program<Mesh>(mpi_test::devices(), a, p, q);
  ts::cpu_devices threads{Mesh::size};
  const results<Mesh> on_threads = program<Mesh>(threads, a, p, q);
  REQUIRE(on_mpi.ints.size() == on_threads.ints.size());
  for (std::size_t i = 0; i < on_mpi.ints.size(); ++i) {
    INFO("integer result " << i);
    REQUIRE(on_mpi.ints[i] == on_threads.ints[i]);
  }
  // Small integers in float: every sum is exact whatever MPI's order, so these are equal.
  for (std::size_t i = 0; i < on_mpi.floats.size(); ++i) {
    INFO("float result " << i);
    REQUIRE(on_mpi.floats[i] == on_threads.floats[i]);
  }
  // Spot checks against serial arithmetic, so a bug both backends shared would show.
  REQUIRE(on_mpi.ints[6] == a);  // reshard keeps the values
  REQUIRE(on_mpi.ints[8] == a);  // so does a move onto reordered devices
  for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(on_mpi.ints[7].values()[i] == 4 * a.values()[i]);
  for (std::size_t i = 0; i < 8; ++i)
    for (std::size_t k = 0; k < 4; ++k) {
      float s = 0;
      for (std::size_t j = 0; j < 12; ++j) s += p(i, j) * q(j, k);
      for (std::size_t v = 0; v < 4; ++v) REQUIRE(on_mpi.floats[v](i, k) == s);
    }
}

template <template <class> class Test>
void for_this_job(std::uint64_t seed) {
  if (mpi_test::size() == 4)
    Test<mesh_2x2>::run(seed);
  else if (mpi_test::size() == 2)
    Test<mesh_2x1>::run(seed);
  else
    WARN("run with 2 or 4 ranks; nothing checked with " << mpi_test::size());
}

template <class Mesh>
struct put_test {
  static void run(std::uint64_t seed) { put_and_gather_all<Mesh>(seed); }
};
template <class Mesh>
struct program_test {
  static void run(std::uint64_t seed) { same_numbers<Mesh>(seed); }
};
template <class Mesh>
struct visualize_test {
  static void run(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    const auto host = random_tensor<int>(ts::shape<2>{8, 8}, rng);
    ts::device_mesh<Mesh> on_mpi{mpi_test::devices()};
    std::ostringstream drawn;
    ts::visualize(drawn, ts::device_put<ts::spec<"x", "y">>(on_mpi, host), {.use_color = false});
    if (mpi_test::rank() != 0) {
      REQUIRE(drawn.str().empty());
      return;
    }
    ts::cpu_devices threads{Mesh::size};
    ts::device_mesh<Mesh> on_threads{threads};
    std::ostringstream expected;
    ts::visualize(expected, ts::device_put<ts::spec<"x", "y">>(on_threads, host),
                  {.use_color = false});
    REQUIRE(!expected.str().empty());
    REQUIRE(drawn.str() == expected.str());
  }
};

}  // namespace

TEST_CASE("device_put and to_host, SPMD: every rank gets the whole array back", "[mpi][api]") {
  for_this_job<put_test>(mpi_test::shared_seed());
}

TEST_CASE("one program gives the same numbers on MPI and on the thread pool", "[mpi][api]") {
  for_this_job<program_test>(mpi_test::shared_seed());
}

TEST_CASE("visualize draws once, on rank 0", "[mpi][api]") {
  for_this_job<visualize_test>(mpi_test::shared_seed());
}

TEST_CASE("an implicit device mesh must span every rank", "[mpi][api]") {
  const int n = mpi_test::size();
  using too_big = ts::mesh<ts::axis("x", 8)>;
  try {
    ts::device_mesh<too_big> m{mpi_test::devices()};
    FAIL("a mesh of 8 devices was accepted on " << n << " ranks");
  } catch (const ts::device_mesh_error& e) {
    const std::string what = e.what();
    INFO(what);
    REQUIRE(what.rfind("typeshard: ", 0) == 0);
    REQUIRE(what.find("has 8 devices") != std::string::npos);
    REQUIRE(what.find("has " + std::to_string(n) + " ranks") != std::string::npos);
    REQUIRE(what.find("mpirun -np 8") != std::string::npos);
  }
  using too_small = ts::mesh<ts::axis("x", 1)>;
  REQUIRE_THROWS_AS(ts::device_mesh<too_small>{mpi_test::devices()}, ts::device_mesh_error);
  // An explicit list may name a subset, but only ranks that exist.
  REQUIRE_NOTHROW(ts::device_mesh<too_small>{mpi_test::devices(), {1}});
  REQUIRE_THROWS_AS((ts::device_mesh<too_small>{mpi_test::devices(), {static_cast<ts::device_id>(n)}}),
                    ts::device_mesh_error);
}

TEST_CASE("a device mesh over some of the ranks", "[mpi][api]") {
  // The odd ranks, in reverse order: the even ranks take no part.
  const int n = mpi_test::size();
  std::vector<ts::device_id> odd;
  for (int r = n - 1; r >= 0; --r)
    if (r % 2 == 1) odd.push_back(static_cast<ts::device_id>(r));
  REQUIRE(odd.size() == static_cast<std::size_t>(n / 2));
  std::mt19937_64 rng(mpi_test::shared_seed());
  const auto host = random_tensor<int>(ts::shape<2>{6, 5}, rng);
  auto check = [&](auto mesh_tag) {
    using Mesh = decltype(mesh_tag);
    ts::device_mesh<Mesh> m{mpi_test::devices(), odd};
    const auto a = ts::device_put<ts::spec<"x", ts::none>>(m, host);
    const auto b = ts::reshard<ts::spec<ts::none, "x">>(a);  // collectives among members only
    if (mpi_test::rank() % 2 == 1) {
      check_shards(b, host);
      REQUIRE(ts::to_host(b) == host);
    } else {
      REQUIRE(b.addressable_shards().empty());
      REQUIRE(ts::to_host(b) == host);  // sent by the mesh's first process to every rank
    }
  };
  if (n == 4) check(ts::mesh<ts::axis("x", 2)>{});
  if (n == 2) check(ts::mesh<ts::axis("x", 1)>{});
}

TEST_CASE("a communication report lists this rank's device's collectives", "[mpi][api]") {
  // The same program as on the thread pool, seen from each rank: its device's position, the
  // plan's collectives, and to_host's gather (the thread pool copies in place instead).
  const std::size_t n = static_cast<std::size_t>(mpi_test::size());
  std::mt19937_64 rng(mpi_test::shared_seed());
  const auto host = random_tensor<int>(ts::shape<2>{8, 4}, rng);
  auto check = [&](auto mesh_tag) {
    using Mesh = decltype(mesh_tag);
    ts::device_mesh<Mesh> m{mpi_test::devices()};
    const auto a = ts::device_put<ts::spec<"x", ts::none>>(m, host);
    ts::communication_recorder rec;
    const auto b = ts::reshard<ts::spec<ts::none, ts::none>>(a);  // all_gather over x
    const auto h = ts::to_host(a);                               // all_gather "to_host"
    const ts::communication_report r = rec.report();
    INFO(r);
    REQUIRE(r.position() == static_cast<std::size_t>(mpi_test::rank()));
    REQUIRE(r.devices_observed() == 1);
    REQUIRE(r.size() == 2);
    REQUIRE(r.count(ts::step_kind::all_gather, "x") == 1);
    REQUIRE(r.collectives()[0].block_bytes == 8 * 4 * sizeof(int));
    REQUIRE(r.collectives()[1].axes == "to_host");
    REQUIRE(h == host);
    check_shards(b, host);
  };
  if (n == 4) check(ts::mesh<ts::axis("x", 4)>{});
  if (n == 2) check(ts::mesh<ts::axis("x", 2)>{});
}
