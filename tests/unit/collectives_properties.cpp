// Every collective on local blocks against a serial reference, on 1- and 2-axis meshes,
// for every ordered group of axes (see collectives_properties.hpp).
#include "collectives_properties.hpp"

namespace ts = typeshard;
using namespace collectives_test;

TEST_CASE("collectives on a 1-axis mesh match the serial reference", "[collectives]") {
  INFO("seed " << seed());
  std::mt19937 rng(seed());
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_a> m{devices};
  check_group_all_ranks<mesh_a, "a">(m, rng);
}

TEST_CASE("collectives on a 2-axis mesh match the serial reference", "[collectives]") {
  INFO("seed " << seed());
  std::mt19937 rng(seed() + 1);
  ts::cpu_devices devices{6};
  ts::device_mesh<mesh_ab> m{devices};
  check_group_all_ranks<mesh_ab, "a">(m, rng);
  check_group_all_ranks<mesh_ab, "b">(m, rng);
  check_group_all_ranks<mesh_ab, "a", "b">(m, rng);
  check_group_all_ranks<mesh_ab, "b", "a">(m, rng);
}
