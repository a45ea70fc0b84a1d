// Rank-0 arrays on MPI ranks (issue 35 item 5): a reduction over every dimension of a sharded
// array, of a shard_map block and of a traced loss gives a rank-0 array whose value (item(),
// to_host) every rank reads, equal to the thread pool's and to a serial loop's, as does an
// einsum with an empty output; the gradient of a rank-0 loss (a mean, or a dot product) equals
// the thread pool's too (whose own correctness tests/unit/rank0_arrays.cpp and einsum_rank0.cpp
// check against finite differences).
#include "support.hpp"

#include <cmath>
#include <random>
#include <tuple>
#include <type_traits>
#include <vector>

namespace {

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x1 = ts::mesh<ts::axis("x", 2), ts::axis("y", 1)>;

template <class Mesh>
std::vector<double> program(ts::backend& b, const ts::host_tensor<double, 2>& a) {
  ts::device_mesh<Mesh> m{b};
  std::vector<double> r;
  const auto A = ts::device_put<ts::spec<"x", "y">>(m, a);
  const auto total = ts::sum<>(A);  // rank 0, unreduced over x and y
  static_assert(decltype(total)::rank == 0);
  const auto replicated = ts::reshard<ts::spec<>>(total);  // the psum
  r.push_back(replicated.item());
  const ts::host_tensor<double, 0> h = ts::to_host(ts::reshard<ts::spec<>>(ts::mean<>(A)));
  r.push_back(h());
  r.push_back(ts::max<>(A).item());  // pmax: replicated
  r.push_back(ts::min<ts::spec<>>(A).item());
  r.push_back((ts::max<>(A) - replicated * 0.5).item());  // rank-0 arithmetic
  r.push_back(ts::to_host(A - ts::max<>(A)).data()[0]);   // rank 0 broadcast against rank 2

  // A shard_map block reduced over every dimension, psum'd: out spec P().
  const auto f = ts::shard_map<Mesh, ts::spec<"x", "y">, ts::spec<>>(
      [](const auto& blk) { return ts::psum<"x", "y">(ts::sum<>(blk)); });
  r.push_back(f(A).item());

  // An einsum with an empty output (a dot product): rank 0, unreduced over x until resharded;
  // and the gradient of a loss written as one.
  ts::host_tensor<double, 1> flat({a.size()});
  for (std::size_t i = 0; i < a.size(); ++i) flat.data()[i] = a.data()[i];
  const auto V = ts::device_put<ts::spec<"x">>(m, flat);
  const auto dot = ts::einsum<"i,i->">(V, V);
  static_assert(decltype(dot)::rank == 0);
  r.push_back(ts::reshard<ts::spec<>>(dot).item());  // result 7: the sum of squares
  const auto dot_loss = [](auto u, auto v) { return ts::einsum<"i,i->">(ts::sin(u), v); };
  const auto [dl, dg] = ts::value_and_grad(dot_loss)(V, V);
  r.push_back(ts::reshard<ts::spec<>>(dl).item());
  const auto dgh = ts::to_host(ts::reshard<ts::spec<>>(dg));
  r.insert(r.end(), dgh.values().begin(), dgh.values().end());

  // A rank-0 loss under value_and_grad; its gradient, all-reduced.
  const auto loss = [](auto w, auto x) {
    const auto e = ts::matmul(x, w) - 1.0;
    return ts::reshard<ts::spec<>>(ts::mean<>(e * e));
  };
  ts::host_tensor<double, 2> wh({a.extent(1), 3});
  for (std::size_t i = 0; i < wh.size(); ++i) wh.data()[i] = 0.125 * double(i % 7) - 0.25;
  const auto W = ts::device_put<ts::spec<>>(m, wh);
  const auto X = ts::device_put<ts::spec<"x", ts::none>>(m, a);
  const auto [l, g] = ts::value_and_grad(loss)(W, X);
  static_assert(std::remove_cvref_t<decltype(l)>::rank == 0);
  r.push_back(l.item());
  const auto gh = ts::to_host(ts::reshard<ts::spec<>>(g));
  r.insert(r.end(), gh.values().begin(), gh.values().end());
  return r;
}

template <class Mesh>
void same_numbers(unsigned seed) {
  std::mt19937_64 rng(seed);
  for (const ts::shape<2> e : {ts::shape<2>{8, 12}, ts::shape<2>{4, 6}}) {
    INFO(Mesh::to_string() << " extents " << ts::to_string(e));
    ts::host_tensor<double, 2> a(e);
    std::uniform_int_distribution<int> d(-9, 9);  // small integers: exact sums in any order
    for (double& v : a.values()) v = d(rng);
    double sum = 0, mx = -INFINITY, squares = 0;
    for (double v : a.values()) sum += v, mx = std::max(mx, v), squares += v * v;
    const auto on_mpi = program<Mesh>(mpi_test::devices(), a);
    ts::cpu_devices threads{Mesh::size};
    const auto on_threads = program<Mesh>(threads, a);
    REQUIRE(on_mpi.size() == on_threads.size());
    CHECK(on_mpi[0] == sum);
    CHECK(on_mpi[2] == mx);
    CHECK(on_mpi[6] == sum);
    CHECK(on_mpi[7] == squares);
    for (std::size_t i = 0; i < on_mpi.size(); ++i) {
      INFO("result " << i);
      REQUIRE(std::abs(on_mpi[i] - on_threads[i]) <= 1e-12 * (1 + std::abs(on_threads[i])));
    }
  }
}

}  // namespace

TEST_CASE("rank-0 arrays give the same numbers on MPI ranks as on threads", "[mpi][rank0]") {
  if (mpi_test::size() == 4)
    same_numbers<mesh_2x2>(mpi_test::shared_seed());
  else if (mpi_test::size() == 2)
    same_numbers<mesh_2x1>(mpi_test::shared_seed());
  else
    WARN("run with 2 or 4 ranks; nothing checked with " << mpi_test::size());
}
