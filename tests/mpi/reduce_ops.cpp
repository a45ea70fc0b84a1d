// Reductions, softmax and broadcasting on the MPI backend: one program gives the same
// numbers on MPI ranks as on the thread pool (whose own correctness the unit tests check
// against serial references), uneven shards included. The collectives these plans add (pmax,
// pmin, and the psum of a sum resharded or of softmax's row sums) run through MPI_Allreduce.
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
  std::uniform_int_distribution<int> d(-9, 9);  // small integers: sums are exact in any order
  for (double& v : t.values()) v = d(rng);
  return t;
}

template <class Mesh>
std::vector<std::vector<double>> program(ts::backend& b, const ts::host_tensor<double, 2>& a,
                                         const ts::host_tensor<double, 1>& bias) {
  ts::device_mesh<Mesh> m{b};
  std::vector<std::vector<double>> r;
  auto keep = [&r](const auto& host) { r.emplace_back(host.values().begin(), host.values().end()); };
  const auto A = ts::device_put<ts::spec<"x", "y">>(m, a);
  keep(ts::to_host(ts::reshard<ts::spec<"x">>(ts::sum<1>(A))));    // unreduced, then psum
  keep(ts::to_host(ts::sum<ts::spec<ts::none>, 0>(A)));             // named spec: the plan's psum
  keep(ts::to_host(ts::reshard<ts::spec<>>(ts::mean(A))));          // every dimension
  keep(ts::to_host(ts::max<1>(A)));                                 // pmax over y
  keep(ts::to_host(ts::min<0>(A, ts::keep_dims)));                  // pmin over x
  keep(ts::to_host(ts::softmax<1>(A)));                             // pmax and psum over y
  keep(ts::to_host(ts::log_softmax<0>(A)));                         // over x
  const auto B = ts::device_put<ts::spec<ts::none>>(m, bias);
  keep(ts::to_host(1 - (A + B) / 2));                               // broadcast, scalars
  return r;
}

template <class Mesh>
struct same_numbers {
  static void run(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (const ts::shape<2> e : {ts::shape<2>{8, 12}, ts::shape<2>{5, 3}, ts::shape<2>{1, 7}}) {
      INFO(Mesh::to_string() << " extents " << ts::to_string(e));
      const auto a = random_tensor(e, rng);
      ts::host_tensor<double, 1> bias({e[1]});
      for (std::size_t j = 0; j < e[1]; ++j) bias(j) = double(j);
      const auto on_mpi = program<Mesh>(mpi_test::devices(), a, bias);
      ts::cpu_devices threads{Mesh::size};
      const auto on_threads = program<Mesh>(threads, a, bias);
      REQUIRE(on_mpi.size() == on_threads.size());
      for (std::size_t i = 0; i < on_mpi.size(); ++i) {
        INFO("result " << i);
        REQUIRE(on_mpi[i].size() == on_threads[i].size());
        for (std::size_t k = 0; k < on_mpi[i].size(); ++k)
          REQUIRE(std::abs(on_mpi[i][k] - on_threads[i][k]) <= 1e-12 * (1 + std::abs(on_threads[i][k])));
      }
    }
  }
};

}  // namespace

TEST_CASE("reductions, softmax and broadcasting give the same numbers on MPI and threads",
          "[mpi][reduce]") {
  if (mpi_test::size() == 4)
    same_numbers<mesh_2x2>::run(mpi_test::shared_seed());
  else if (mpi_test::size() == 2)
    same_numbers<mesh_2x1>::run(mpi_test::shared_seed());
  else
    WARN("run with 2 or 4 ranks; nothing checked with " << mpi_test::size());
}
