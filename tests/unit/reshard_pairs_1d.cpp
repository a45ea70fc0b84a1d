// reshard between every pair of specs on a 1-D mesh of 4, ranks 1 to 3, checked by to_host
// equality and per-shard contents on random even and uneven extents.
#include "reshard_pairs_common.hpp"

namespace ts = typeshard;
using mesh_4 = ts::mesh<ts::axis("i", 4)>;

TEST_CASE("reshard: every spec pair on a 1-D mesh of 4 keeps the values", "[reshard]") {
  const unsigned seed = reshard_test::test_seed();
  INFO("seed " << seed);
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_4> m{devices};
  static_assert(reshard_test::specs_of<mesh_4, 1>.count == 2);
  static_assert(reshard_test::specs_of<mesh_4, 3>.count == 4);
  SECTION("rank 1") { reshard_test::check_all_pairs<mesh_4, 1>(m, seed); }
  SECTION("rank 2") { reshard_test::check_all_pairs<mesh_4, 2>(m, seed + 1); }
  SECTION("rank 3") { reshard_test::check_all_pairs<mesh_4, 3>(m, seed + 2); }
}

TEST_CASE("reshard: a device mesh of 4 on 8 devices, in a custom order", "[reshard]") {
  const unsigned seed = reshard_test::test_seed();
  INFO("seed " << seed);
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_4> m{devices, {6, 1, 7, 2}};
  reshard_test::check_all_pairs<mesh_4, 2>(m, seed);
}
