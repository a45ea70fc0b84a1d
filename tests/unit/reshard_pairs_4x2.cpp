// reshard between every pair of specs on the 4x2 mesh, ranks 1 to 3, checked by to_host
// equality and per-shard contents on random even and uneven extents.
#include "reshard_pairs_common.hpp"

namespace ts = typeshard;
using mesh_4x2 = ts::mesh<ts::axis("x", 4), ts::axis("y", 2)>;

TEST_CASE("reshard: every spec pair on a 4x2 mesh keeps the values", "[reshard]") {
  const unsigned seed = reshard_test::test_seed();
  INFO("seed " << seed);
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_4x2> m{devices};
  static_assert(reshard_test::specs_of<mesh_4x2, 1>.count == 5);
  static_assert(reshard_test::specs_of<mesh_4x2, 2>.count == 11);
  static_assert(reshard_test::specs_of<mesh_4x2, 3>.count == 19);
  SECTION("rank 1") { reshard_test::check_all_pairs<mesh_4x2, 1>(m, seed); }
  SECTION("rank 2") { reshard_test::check_all_pairs<mesh_4x2, 2>(m, seed + 1); }
  SECTION("rank 3") { reshard_test::check_all_pairs<mesh_4x2, 3>(m, seed + 2); }
}
