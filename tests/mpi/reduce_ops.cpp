// Reductions, softmax and broadcasting on the MPI backend: one program gives the same
// numbers on MPI ranks as on the thread pool (whose own correctness the unit tests check
// against serial references), uneven shards included. The collectives these plans add (pmax,
// pmin, and the psum of a sum resharded or of softmax's row sums) run through MPI_Allreduce.
// bfloat16 (no MPI datatype: 2 bytes, reduced by typeshard's own MPI ops) gives the thread
// pool's numbers too: psum, pmax, pmin, psum_scatter, all_gather, and a matmul's psum.
#include "support.hpp"

#include <cmath>
#include <cstdint>
#include <random>
#include <tuple>
#include <type_traits>
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

// bfloat16 collectives in shard_map and a matmul's psum, as float values (small integers:
// exact in any order).
template <class Mesh>
std::vector<std::vector<float>> bf16_program(ts::backend& b, const ts::host_tensor<double, 2>& a) {
  using bf16 = ts::bfloat16;
  ts::device_mesh<Mesh> m{b};
  ts::host_tensor<bf16, 2> h({a.extent(0), a.extent(1)});
  for (std::size_t i = 0; i < a.size(); ++i) h.data()[i] = bf16(a.data()[i]);
  std::vector<std::vector<float>> r;
  auto keep = [&r](const auto& host) { r.emplace_back(host.values().begin(), host.values().end()); };
  using spec = ts::spec<"x", "y">;
  const auto A = ts::device_put<spec>(m, h);
  const auto f = ts::shard_map<Mesh, spec, ts::specs<spec, spec, spec, spec, spec>>(
      [](const auto& x) {
        return std::tuple(ts::psum<"x", "y">(x), ts::pmax<"x">(x), ts::pmin<"y">(x),
                          ts::all_gather<"x">(x, 0), ts::psum_scatter<"x">(x, 1));
      });
  const auto [s, mx, mn, g, sc] = f(A);
  for (const auto& part : {ts::to_host(s), ts::to_host(mx), ts::to_host(mn)}) keep(part);
  keep(ts::to_host(g));
  keep(ts::to_host(sc));
  keep(ts::to_host(ts::matmul<ts::spec<ts::none, ts::none>>(
      A, ts::device_put<ts::spec<"y", ts::none>>(m, ts::host_tensor<bf16, 2>({a.extent(1), 3},
                                                                             bf16(1.0f))))));
  return r;
}

}  // namespace

TEST_CASE("bfloat16 collectives and a matmul's psum give the same numbers on MPI and threads",
          "[mpi][bf16]") {
  const auto run = [](auto mesh_tag) {
    using Mesh = typename decltype(mesh_tag)::type;
    std::mt19937_64 rng(mpi_test::shared_seed());
    const auto a = random_tensor(ts::shape<2>{8, 12}, rng);
    const auto on_mpi = bf16_program<Mesh>(mpi_test::devices(), a);
    ts::cpu_devices threads{Mesh::size};
    const auto on_threads = bf16_program<Mesh>(threads, a);
    REQUIRE(on_mpi == on_threads);
  };
  if (mpi_test::size() == 4)
    run(std::type_identity<mesh_2x2>{});
  else if (mpi_test::size() == 2)
    run(std::type_identity<mesh_2x1>{});
  else
    WARN("run with 2 or 4 ranks; nothing checked with " << mpi_test::size());
}

TEST_CASE("reductions, softmax and broadcasting give the same numbers on MPI and threads",
          "[mpi][reduce]") {
  if (mpi_test::size() == 4)
    same_numbers<mesh_2x2>::run(mpi_test::shared_seed());
  else if (mpi_test::size() == 2)
    same_numbers<mesh_2x1>::run(mpi_test::shared_seed());
  else
    WARN("run with 2 or 4 ranks; nothing checked with " << mpi_test::size());
}
