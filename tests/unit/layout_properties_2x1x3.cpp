// layout<Mesh, Spec, Rank> against a brute-force reference (tests/unit/support/
// layout_reference.hpp) for every valid spec of ranks 1 to 3 on a 2x1x3 mesh (odd size and a
// size-1 axis: 171 specs), with corner-case and random extents.
#include <catch2/catch.hpp>

#include "support/foundation.hpp"
#include "support/layout_reference.hpp"

TEST_CASE("layout on a 2x1x3 mesh matches the brute-force reference for every valid spec",
          "[layout][property]") {
  REQUIRE(ts_test::check_meshes(ts_test::mesh_list<ts_test::mesh_2x1x3>{}) == ts_test::specs_3d);
}
