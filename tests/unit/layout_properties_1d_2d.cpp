// layout<Mesh, Spec, Rank> against a brute-force reference (tests/unit/support/
// layout_reference.hpp) for every valid spec of ranks 1 to 3 on the 1- and 2-axis meshes of
// the property tests, with corner-case and random extents.
#include <catch2/catch.hpp>

#include <type_traits>

#include <typeshard/core/layout.hpp>

#include "support/foundation.hpp"
#include "support/layout_reference.hpp"

namespace ts = typeshard;

TEST_CASE("layout on 1- and 2-axis meshes matches the brute-force reference for every valid spec",
          "[layout][property]") {
  REQUIRE(ts_test::check_meshes(ts_test::meshes_1d_2d{}) == ts_test::specs_1d_2d);
}

TEST_CASE("a spec shorter than the rank means trailing nones", "[layout]") {
  using mesh = ts::mesh<ts::axis("x", 2), ts::axis("y", 3)>;
  using short_spec = ts::layout<mesh, ts::spec<"y">, 3>;
  using full_spec = ts::layout<mesh, ts::spec<"y", ts::none, ts::none>, 3>;
  STATIC_REQUIRE(std::is_same_v<short_spec::spec_type, full_spec::spec_type>);
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed() + 1);
  for (int trial = 0; trial < 50; ++trial) {
    const auto global = ts_test::random_shape<full_spec>(rng, 1000);
    CAPTURE(global);
    for (std::size_t p = 0; p < mesh::size; ++p) {
      REQUIRE(short_spec::index(global, p) == full_spec::index(global, p));
      REQUIRE(short_spec::replica_index(p) == full_spec::replica_index(p));
    }
  }
}
