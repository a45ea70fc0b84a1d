// Reliability, properties of issue 15's ops (reliability_properties_ops.hpp) on the 'x' (2) x
// 'y' (4) mesh (its compile-time choices differ from the 2x2 mesh's: together they cover more).
#include "reliability_properties_ops.hpp"

TEST_CASE("properties: random programs of einsum, reductions, broadcasting, softmax and moves on a 2x4 mesh "
          "equal the serial reference",
          "[reliability][properties]") {
  prop_ops::property_test<ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>>("unit_reliability_properties_ops_2x4");
}
