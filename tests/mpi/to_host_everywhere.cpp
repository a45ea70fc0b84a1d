// to_host on every rank of an SPMD program, also on ranks that hold none of the array's
// devices: those receive the array by a broadcast from the mesh's first device (so the
// examples run unchanged under mpiexec, each rank printing what the thread backend prints).
// Checked against the host data, for meshes on a subset of the ranks, even and uneven
// extents, sharded and replicated specs; and a shard_map's results, whose extents the ranks
// outside its mesh learn from the mesh's first device.
#include "support.hpp"

#include <cstddef>
#include <tuple>
#include <vector>

namespace {

namespace ts = typeshard;

template <class T, std::size_t Rank>
ts::host_tensor<T, Rank> numbered(const ts::shape<Rank>& s) {
  ts::host_tensor<T, Rank> t(s);
  T v = 1;
  for (T& x : t.values()) x = v++;
  return t;
}

template <class Mesh, class Spec, std::size_t Rank>
void check_everywhere(std::vector<ts::device_id> devices, const ts::shape<Rank>& extents) {
  ts::device_mesh<Mesh> m{mpi_test::devices(), devices};
  const auto host = numbered<float>(extents);
  const auto a = ts::device_put<Spec>(m, host);
  const auto back = ts::to_host(a);  // every rank calls it, inside the mesh or not
  REQUIRE(back.extents() == host.extents());
  for (std::size_t i = 0; i < host.size(); ++i) REQUIRE(back.values()[i] == host.values()[i]);
}

}  // namespace

TEST_CASE("to_host works on every rank, also outside the array's mesh", "[mpi][api]") {
  const std::size_t n = mpi_test::devices().process_count();
  REQUIRE(n >= 2);
  using mesh_1 = ts::mesh<ts::axis("x", 1)>;
  using mesh_2 = ts::mesh<ts::axis("x", 2)>;
  // One device, the last rank: every other rank is outside.
  check_everywhere<mesh_1, ts::spec<"x">>({n - 1}, ts::shape<1>{5});
  // Two devices in reverse order (the broadcast's source is position 0, rank 1).
  check_everywhere<mesh_2, ts::spec<"x", ts::none>>({1, 0}, ts::shape<2>{7, 3});  // uneven
  check_everywhere<mesh_2, ts::spec<ts::none, "x">>({0, 1}, ts::shape<2>{4, 6});
  check_everywhere<mesh_2, ts::spec<>>({1, 0}, ts::shape<3>{2, 3, 2});  // replicated
  check_everywhere<mesh_2, ts::spec<"x">>({0, 1}, ts::shape<1>{0});     // empty
}

TEST_CASE("device_put moves an array to another set of ranks", "[mpi][api]") {
  const std::size_t n = mpi_test::devices().process_count();
  using mesh_1 = ts::mesh<ts::axis("x", 1)>;
  using mesh_2 = ts::mesh<ts::axis("x", 2)>;
  const auto host = numbered<float>(ts::shape<2>{5, 3});  // uneven over 2
  {
    const ts::device_mesh<mesh_1> from{mpi_test::devices(), {0}}, to{mpi_test::devices(), {n - 1}};
    const auto moved = ts::device_put(ts::device_put<ts::spec<"x">>(from, host), to);
    const auto back = ts::to_host(moved);
    for (std::size_t i = 0; i < host.size(); ++i) REQUIRE(back.values()[i] == host.values()[i]);
  }
  if (n >= 4) {
    const ts::device_mesh<mesh_2> from{mpi_test::devices(), {0, 1}}, to{mpi_test::devices(), {3, 2}};
    const auto a = ts::device_put<ts::spec<"x", ts::none>>(from, host);
    const auto moved = ts::reshard<ts::spec<ts::none, "x">>(a, to);
    const auto back = ts::to_host(moved);
    for (std::size_t i = 0; i < host.size(); ++i) REQUIRE(back.values()[i] == host.values()[i]);
  }
}

TEST_CASE("a shard_map result has its extents on every rank, also outside its mesh", "[mpi][api]") {
  const std::size_t n = mpi_test::devices().process_count();
  using mesh_2 = ts::mesh<ts::axis("x", 2)>;
  // The mesh's ranks in reverse order (the extents come from position 0, rank 1); with 2
  // ranks nobody is outside, with 4 ranks 2 and 3 are.
  const ts::device_mesh<mesh_2> m{mpi_test::devices(), {1, 0}};
  const auto host = numbered<float>(ts::shape<2>{6, 3});
  const auto a = ts::device_put<ts::spec<"x", ts::none>>(m, host);
  // Two outputs: the gathered rows (replicated) and each block doubled (sharded).
  const auto f = ts::shard_map<mesh_2, ts::spec<"x", ts::none>,
                               ts::specs<ts::spec<ts::none, ts::none>, ts::spec<"x", ts::none>>>(
      [](const auto& b) { return std::tuple{ts::all_gather<"x">(b, 0), b * 2.0f}; });
  const auto [gathered, doubled] = f(a);
  REQUIRE(gathered.extents() == host.extents());
  REQUIRE(doubled.extents() == host.extents());
  const auto g = ts::to_host(gathered), d = ts::to_host(doubled);  // every rank calls them
  for (std::size_t i = 0; i < host.size(); ++i) {
    REQUIRE(g.values()[i] == host.values()[i]);
    REQUIRE(d.values()[i] == 2 * host.values()[i]);
  }
  REQUIRE(n >= 2);
}
