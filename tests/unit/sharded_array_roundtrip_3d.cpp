// device_put then to_host gives back the same bytes, and addressable_shards() holds the host
// data at each shard's index: every fifth valid spec of ranks 1 to 3 (multi-axis dimensions
// included) on the 2x2x2 and 2x1x3 meshes of the property tests, with default and random
// device orders (see tests/unit/support/roundtrip_reference.hpp).
#include <catch2/catch.hpp>

#include "support/foundation.hpp"
#include "support/roundtrip_reference.hpp"

TEST_CASE("device_put / to_host round trip on 3-axis meshes", "[sharded_array][property]") {
  // Valid specs of ranks 1, 2, 3 on three axes: 16, 49, 106.
  REQUIRE(ts_test::check_roundtrips<5>(ts_test::mesh_list<ts_test::mesh_2x2x2, ts_test::mesh_2x1x3>{}) ==
          2 * ts_test::sampled_specs(16, 49, 106, 5));
}
