// Every collective on local blocks against a serial reference, on a 3-axis mesh with a
// custom device order: single axes, pairs in both orders, triples in two orders (see
// collectives_properties.hpp).
#include "collectives_properties.hpp"

namespace ts = typeshard;
using namespace collectives_test;

TEST_CASE("collectives on a 3-axis mesh match the serial reference", "[collectives]") {
  INFO("seed " << seed());
  std::mt19937 rng(seed() + 2);
  ts::cpu_devices devices{8};
  // A custom device order: the groups are mesh positions, whatever devices hold them.
  ts::device_mesh<mesh_abc> m{devices, {3, 0, 6, 1, 7, 2, 4, 5}};
  check_group_all_ranks<mesh_abc, "a">(m, rng);
  check_group_all_ranks<mesh_abc, "b">(m, rng);
  check_group_all_ranks<mesh_abc, "c">(m, rng);
  check_group_all_ranks<mesh_abc, "a", "b">(m, rng);
  check_group_all_ranks<mesh_abc, "c", "a">(m, rng);
  check_group_all_ranks<mesh_abc, "b", "c">(m, rng);
  check_group_all_ranks<mesh_abc, "c", "b">(m, rng);
  check_group_all_ranks<mesh_abc, "a", "b", "c">(m, rng);
  check_group_all_ranks<mesh_abc, "c", "a", "b">(m, rng);
}
