// The ops models use on the MPI backend: ts::take (vocabulary-parallel: the psum of the
// partial lookups; its scatter-add gradient), argmax / argmin over a sharded dimension (pmax
// then pmin), one_hot, iota, where and the model functions: one program gives the same
// numbers on MPI ranks as on the thread pool (whose own correctness the unit tests check
// against serial references), uneven shards included.
#include "support.hpp"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace {

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x1 = ts::mesh<ts::axis("x", 2), ts::axis("y", 1)>;

ts::host_tensor<double, 2> random_tensor(const ts::shape<2>& s, std::mt19937_64& rng) {
  ts::host_tensor<double, 2> t(s);
  std::uniform_int_distribution<int> d(-9, 9);  // small integers: ties, exact sums
  for (double& v : t.values()) v = d(rng) / 4.0;
  return t;
}

template <class Mesh>
std::vector<std::vector<double>> program(ts::backend& b, const ts::host_tensor<double, 2>& a,
                                         const ts::host_tensor<int, 1>& ids) {
  ts::device_mesh<Mesh> m{b};
  std::vector<std::vector<double>> r;
  auto keep = [&r](const auto& host) {
    r.emplace_back(host.values().begin(), host.values().end());
  };
  const auto A = ts::device_put<ts::spec<"x", "y">>(m, a);
  const auto I = ts::device_put<ts::spec<"y">>(m, ids);
  keep(ts::to_host(ts::argmax<1>(A)));                                    // pmax, pmin over y
  keep(ts::to_host(ts::argmin<0>(A, ts::keep_dims)));                     // over x
  keep(ts::to_host(ts::one_hot(ts::argmax<1>(A), a.extents()[1])));
  keep(ts::to_host(ts::iota<int, ts::spec<"x", "y">, 1>(m, a.extents())));
  keep(ts::to_host(ts::where(A > 0.0, ts::gelu(A), ts::sigmoid(A) + ts::clip(A, -1.0, 1.0))));
  const auto table = ts::device_put<ts::spec<"x", ts::none>>(m, a);      // rows over x
  keep(ts::to_host(ts::reshard<ts::spec<"y", ts::none>>(ts::take(table, I))));  // psum over x
  const auto loss = [&I](auto t) {  // the lookup reduced (psum over x) before the sine
    return ts::sum(ts::sin(ts::reshard<ts::spec<"y", ts::none>>(ts::take(t, I))));
  };
  const auto [l, g] = ts::value_and_grad<0>(loss)(table);
  keep(ts::to_host(ts::reshard<ts::spec<>>(l)));
  keep(ts::to_host(ts::reshard<ts::spec<"x", ts::none>>(g)));           // the all-reduce over y
  return r;
}

template <class Mesh>
struct same_numbers {
  static void run(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (const ts::shape<2> e : {ts::shape<2>{8, 6}, ts::shape<2>{5, 3}, ts::shape<2>{3, 7}}) {
      INFO(Mesh::to_string() << " extents " << ts::to_string(e));
      const auto a = random_tensor(e, rng);
      ts::host_tensor<int, 1> ids({5});
      for (std::size_t i = 0; i < 5; ++i) ids(i) = static_cast<int>((i * 7 + seed) % e[0]);
      const auto on_mpi = program<Mesh>(mpi_test::devices(), a, ids);
      ts::cpu_devices threads{Mesh::size};
      const auto on_threads = program<Mesh>(threads, a, ids);
      REQUIRE(on_mpi.size() == on_threads.size());
      for (std::size_t i = 0; i < on_mpi.size(); ++i) {
        INFO("result " << i);
        REQUIRE(on_mpi[i].size() == on_threads[i].size());
        for (std::size_t k = 0; k < on_mpi[i].size(); ++k)
          REQUIRE(std::abs(on_mpi[i][k] - on_threads[i][k]) <=
                  1e-12 * (1 + std::abs(on_threads[i][k])));
      }
    }
  }
};

}  // namespace

TEST_CASE("take, argmax, one_hot, iota, where and the model functions: the same numbers on MPI "
          "and threads",
          "[mpi][ops]") {
  if (mpi_test::size() == 4)
    same_numbers<mesh_2x2>::run(mpi_test::shared_seed());
  else if (mpi_test::size() == 2)
    same_numbers<mesh_2x1>::run(mpi_test::shared_seed());
  else
    WARN("run with 2 or 4 ranks; nothing checked with " << mpi_test::size());
}
