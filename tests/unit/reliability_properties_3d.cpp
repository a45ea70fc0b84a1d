// Reliability, properties (reliability_properties.hpp) on the 3-axis meshes: 'x' (2) x 'y' (2)
// x 'z' (2), and 'a' (2) x 'b' (1) x 'c' (3) (an odd axis and one of size 1).
#include "reliability_properties.hpp"

TEST_CASE("properties: random programs on 3-axis meshes equal the serial reference",
          "[reliability][properties]") {
  prop::property_test<prop::mesh_list<prop::mesh_3, prop::mesh_s>>("unit_reliability_properties_3d");
}
