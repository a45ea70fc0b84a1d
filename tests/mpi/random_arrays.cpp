// ts::random under MPI: each rank draws only its own shards, and the array (gathered with
// to_host) equals, element for element, the one the thread backend draws on one device and on
// 2x4 with another spec, for each distribution, even and uneven extents, ranks 1 to 3.
// And ts::device_put<Spec>(a, target) between sets of ranks and mesh types (messages between
// the ranks, ops/move.hpp): the same values as drawn on the threads.
#include "support.hpp"

#include <cstddef>
#include <vector>

#include <typeshard/ops/move.hpp>
#include <typeshard/ops/random.hpp>

namespace {

namespace ts = typeshard;
namespace tr = typeshard::random;

using mesh_1 = ts::mesh<ts::axis("x", 1)>;
using mesh_2 = ts::mesh<ts::axis("x", 2)>;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;

// The four distributions of key k on device mesh m with spec S, as host arrays.
template <class S, class Mesh, std::size_t Rank>
std::vector<ts::host_tensor<float, Rank>> draws(tr::prng_key k, const ts::device_mesh<Mesh>& m,
                                                const ts::shape<Rank>& e) {
  const auto [k1, k2, k3, k4] = tr::split<4>(k);
  std::vector<ts::host_tensor<float, Rank>> out;
  out.push_back(ts::to_host(tr::uniform<S>(k1, m, e, -1.0f, 3.0f)));
  out.push_back(ts::to_host(tr::normal<S>(k2, m, e)));
  out.push_back(ts::to_host(tr::truncated_normal<S>(k3, -1.5, 2.0, m, e)));
  out.push_back(ts::to_host(tr::bernoulli<S>(k4, 0.25, m, e)));
  return out;
}

template <class Mesh, class S, class S8, std::size_t Rank>
void check(const std::vector<ts::device_id>& ranks, const ts::shape<Rank>& e, unsigned seed) {
  const ts::device_mesh<Mesh> on_ranks{mpi_test::devices(), ranks};
  ts::cpu_devices threads{8};
  const ts::device_mesh<mesh_1> one{threads, {3}};
  const ts::device_mesh<mesh_2x4> eight{threads};
  const tr::prng_key k = tr::key(seed);
  const auto mpi = draws<S>(k, on_ranks, e);  // every rank calls to_host
  const auto serial = draws<ts::spec<>>(k, one, e);
  const auto sharded = draws<S8>(k, eight, e);
  for (std::size_t i = 0; i < mpi.size(); ++i) {
    INFO("distribution " << i << " extents " << ts::to_string(e));
    REQUIRE(mpi[i] == serial[i]);
    REQUIRE(mpi[i] == sharded[i]);
  }
}

}  // namespace

TEST_CASE("random arrays drawn on MPI ranks equal the thread backend's", "[mpi][random]") {
  const std::size_t n = mpi_test::devices().process_count();
  REQUIRE(n >= 2);
  const unsigned seed = mpi_test::shared_seed();
  INFO("seed " << seed);
  check<mesh_2, ts::spec<"x">, ts::spec<"y">>({0, 1}, ts::shape<1>{37}, seed);
  check<mesh_2, ts::spec<ts::none, "x">, ts::spec<"y", "x">>({1, 0}, ts::shape<2>{9, 7}, seed);
  check<mesh_2, ts::spec<>, ts::spec<ts::axes("x", "y")>>({0, 1}, ts::shape<3>{3, 5, 4}, seed);
  check<mesh_1, ts::spec<"x">, ts::spec<"x", "y">>({n - 1}, ts::shape<2>{6, 5}, seed);
  if (n >= 4) {
    check<mesh_2x2, ts::spec<"x", "y">, ts::spec<"y", "x">>({0, 1, 2, 3}, ts::shape<2>{13, 10},
                                                            seed);
    check<mesh_2x2, ts::spec<ts::none, ts::axes("y", "x")>, ts::spec<ts::none, "x", "y">>(
        {3, 1, 2, 0}, ts::shape<3>{2, 11, 5}, seed);
  }
}

TEST_CASE("device_put moves arrays between sets of ranks and mesh types", "[mpi][move]") {
  const std::size_t n = mpi_test::devices().process_count();
  const unsigned seed = mpi_test::shared_seed();
  INFO("seed " << seed);
  ts::cpu_devices threads{8};
  const ts::device_mesh<mesh_1> one{threads, {2}};
  const ts::shape<2> e{13, 7};  // uneven
  const tr::prng_key k = tr::key(seed);
  const auto expected = ts::to_host(tr::normal<ts::spec<>>(k, one, e));
  const ts::device_mesh<mesh_2> pair{mpi_test::devices(), {0, n - 1}};
  const ts::device_mesh<mesh_1> last{mpi_test::devices(), {n - 1}};
  const auto a = tr::normal<ts::spec<"x", ts::none>>(k, pair, e);
  const auto on_last = ts::device_put<ts::spec<>>(a, last);  // 2 ranks -> 1
  REQUIRE(ts::to_host(on_last) == expected);
  const auto back = ts::device_put<ts::spec<ts::none, "x">>(on_last, pair);  // 1 -> 2, other spec
  REQUIRE(ts::to_host(back) == expected);
  if (n >= 4) {
    const ts::device_mesh<mesh_2x2> four{mpi_test::devices(), {3, 1, 0, 2}};
    const auto b = ts::device_put<ts::spec<"y", "x">>(a, four);  // 2 ranks -> 2x2
    REQUIRE(ts::to_host(b) == expected);
    const ts::device_mesh<mesh_2> other{mpi_test::devices(), {2, 1}};
    const auto c = ts::device_put<ts::spec<ts::none, "x">>(b, other);  // 2x2 -> 2 other ranks
    REQUIRE(ts::to_host(c) == expected);
    const auto r = ts::device_put<ts::spec<>>(c, four);  // replicated on 4 ranks
    REQUIRE(ts::to_host(r) == expected);
    const auto plan = ts::plan_device_put<ts::spec<ts::none, "x">>(b, other);
    REQUIRE(plan.bytes_moved() + plan.bytes_kept() == 13 * 7 * sizeof(float));
  }
}
