// ts::checkpoint under MPI: a checkpoint saved by 2 or 4 ranks (each writing its own shards)
// restores on 1 device and on 2x4 devices of the thread backend, and one saved by 8 threads
// restores on the ranks, every element equal (the arrays come from ts::random, which draws the
// same values on either backend).
#include "support.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include <typeshard/ops/checkpoint.hpp>

namespace {

namespace ts = typeshard;
namespace tc = typeshard::checkpoint;
namespace tr = typeshard::random;
namespace fs = std::filesystem;

using mesh_1 = ts::mesh<ts::axis("x", 1)>;
using mesh_2 = ts::mesh<ts::axis("x", 2)>;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;

template <class A, class B>
void require_same(const A& a, const B& b) {
  const auto x = ts::to_host(a);
  const auto y = ts::to_host(b);
  REQUIRE(x.extents() == y.extents());
  for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(x.values()[i] == y.values()[i]);
}

template <class Mesh, class SpecA, class SpecB>
void round_trip(const ts::device_mesh<Mesh>& ranks, const fs::path& root, unsigned seed) {
  ts::cpu_devices threads{8};
  const ts::device_mesh<mesh_1> one{threads, {4}};
  const ts::device_mesh<mesh_2x4> eight{threads};
  const auto [ka, kb] = tr::split(tr::key(seed));
  const ts::shape<2> ea{11, 7};   // uneven
  const ts::shape<3> eb{3, 5, 6};

  // Saved by the ranks, each writing its own file; read by threads on every rank.
  const auto a = tr::normal<SpecA>(ka, ranks, ea);
  const auto b = tr::uniform<SpecB, double>(kb, ranks, eb);
  tc::save(root, 5, {{"a", a}, {"b", b}});
  const fs::path dir = tc::step_path(root, 5);
  REQUIRE(tc::latest_step(root) == 5u);
  require_same(tc::load<ts::spec<>, float, 2>(dir, "a", one), tr::normal<ts::spec<>>(ka, one, ea));
  require_same(tc::load<ts::spec<"y", "x">, float, 2>(dir, "a", eight), a);
  require_same(tc::load<ts::spec<"x", "y">, double, 3>(dir, "b", eight),
               tr::uniform<ts::spec<>, double>(kb, one, eb));
  tc::verify(dir);

  // Saved by 8 threads (on rank 0 only), read by the ranks.
  if (mpi_test::rank() == 0) {
    tc::save(root, 6, {{"a", tr::normal<ts::spec<"x", "y">>(ka, eight, ea)},
                       {"b", tr::uniform<ts::spec<"y">, double>(kb, eight, eb)}});
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const fs::path dir6 = tc::step_path(root, 6);
  require_same(tc::load<SpecA, float, 2>(dir6, "a", ranks), a);
  require_same(tc::load<SpecB, double, 3>(dir6, "b", ranks), b);
  require_same(tc::load<ts::spec<>, double, 3>(dir6, "b", ranks), b);
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace

TEST_CASE("checkpoints move between MPI ranks and threads", "[mpi][checkpoint]") {
  const std::size_t n = mpi_test::devices().process_count();
  REQUIRE(n >= 2);
  const unsigned seed = mpi_test::shared_seed();
  INFO("seed " << seed);
  const fs::path root =
      fs::temp_directory_path() / ("typeshard-mpi-checkpoint-" + std::to_string(seed));
  if (mpi_test::rank() == 0) fs::remove_all(root);
  MPI_Barrier(MPI_COMM_WORLD);
  if (n >= 4) {
    const ts::device_mesh<mesh_2x2> ranks{mpi_test::devices(), {2, 0, 3, 1}};
    round_trip<mesh_2x2, ts::spec<"x", "y">, ts::spec<ts::none, ts::axes("y", "x")>>(ranks, root,
                                                                                     seed);
  } else {
    const ts::device_mesh<mesh_2> ranks{mpi_test::devices(), {1, 0}};
    round_trip<mesh_2, ts::spec<ts::none, "x">, ts::spec<"x">>(ranks, root, seed);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (mpi_test::rank() == 0) fs::remove_all(root);
}
