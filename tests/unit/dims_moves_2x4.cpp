// Dimension moves (rule 8) on the (2, 4) mesh: every valid spec of ranks 1 to 3 against a
// serial reference (dims_moves_common.hpp).
#include "dims_moves_common.hpp"

namespace ts = typeshard;
using namespace dims_test;

TEST_CASE("dims: every spec on a 2x4 mesh, ranks 1 to 3, against a serial reference", "[dims]") {
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_2x4> m{devices};
  check_every_spec<mesh_2x4, 1>(m);
  check_every_spec<mesh_2x4, 2>(m);
  check_every_spec<mesh_2x4, 3>(m);
}

