// reshard between every pair of specs, ranks 1 to 3, on MPI: a (2,2) mesh under 4 ranks, a
// (2,1) mesh under 2. The checks are the unit tests' (tests/unit/reshard_pairs_common.hpp):
// to_host (gathered on every rank) equals the host data, and this rank's shard holds its
// slices, on random even and uneven (including empty-shard) extents. Integer data, so the
// reductions of unreduced values are not involved and everything is exact.
#include "support.hpp"

#include "../unit/reshard_pairs_common.hpp"

namespace {
namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_1d = ts::mesh<ts::axis("x", 2)>;

template <class Mesh>
void all_pairs(unsigned seed) {
  ts::device_mesh<Mesh> m{mpi_test::devices()};
  reshard_test::check_all_pairs<Mesh, 1>(m, seed);
  reshard_test::check_all_pairs<Mesh, 2>(m, seed + 1);
  reshard_test::check_all_pairs<Mesh, 3>(m, seed + 2);
}
}  // namespace

TEST_CASE("reshard on MPI: every spec pair keeps the values", "[mpi][reshard]") {
  const unsigned seed = mpi_test::shared_seed();
  INFO("seed " << seed);
  static_assert(reshard_test::specs_of<mesh_2x2, 3>.count == 19);
  if (mpi_test::size() == 4)
    all_pairs<mesh_2x2>(seed);
  else if (mpi_test::size() == 2)
    all_pairs<mesh_1d>(seed);
  else
    WARN("run with 2 or 4 ranks; nothing checked with " << mpi_test::size());
}
