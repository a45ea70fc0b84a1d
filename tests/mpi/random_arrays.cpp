// ts::random under MPI: each rank draws only its own shards, and the array (gathered with
// to_host) equals, element for element, the one the thread backend draws on one device and on
// 2x4 with another spec, for each distribution, even and uneven extents, ranks 1 to 3.
#include "support.hpp"

#include <cstddef>
#include <vector>

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
