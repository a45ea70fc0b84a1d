// layout<Mesh, Spec, Rank> against a brute-force reference (tests/unit/support/
// layout_reference.hpp) for every valid spec of ranks 1 to 3 on a 2x2x2 mesh (171 specs,
// multi-axis dimensions such as P(('x', 'z'), None, 'y') included), with corner-case and
// random extents.
#include <catch2/catch.hpp>

#include "support/foundation.hpp"
#include "support/layout_reference.hpp"

TEST_CASE("layout on a 2x2x2 mesh matches the brute-force reference for every valid spec",
          "[layout][property]") {
  REQUIRE(ts_test::check_meshes(ts_test::mesh_list<ts_test::mesh_2x2x2>{}) == ts_test::specs_3d);
}
