// device_put then to_host gives back the same bytes, and addressable_shards() holds the host
// data at each shard's index: every valid spec of ranks 1 to 3 on the 1-axis meshes of the
// property tests, every third on the 2-axis ones, with default and random device orders (see
// tests/unit/support/roundtrip_reference.hpp).
#include <catch2/catch.hpp>

#include "support/foundation.hpp"
#include "support/roundtrip_reference.hpp"

TEST_CASE("device_put / to_host round trip on 1- and 2-axis meshes", "[sharded_array][property]") {
  // Valid specs of ranks 1, 2, 3: 2, 3, 4 on one axis; 5, 11, 19 on two.
  REQUIRE(ts_test::check_roundtrips<1>(ts_test::meshes_1d{}) == 3 * ts_test::sampled_specs(2, 3, 4, 1));
  REQUIRE(ts_test::check_roundtrips<3>(ts_test::meshes_2d{}) == 5 * ts_test::sampled_specs(5, 11, 19, 3));
}
