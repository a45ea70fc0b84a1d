// How meshes, specs, index slices and shapes print: the strings JAX and numpy print for the
// same things, so a JAX user reads typeshard's output at sight.
#include <catch2/catch.hpp>

#include <typeshard/core/layout.hpp>
#include <typeshard/core/mesh.hpp>
#include <typeshard/core/spec.hpp>

namespace {
namespace ts = typeshard;
}  // namespace

TEST_CASE("meshes print as JAX's Mesh", "[mesh][printing]") {
  REQUIRE(ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>::to_string() == "Mesh('x': 2, 'y': 4)");
  REQUIRE(ts::mesh<ts::axis("data", 8)>::to_string() == "Mesh('data': 8)");
  REQUIRE(ts::mesh<>::to_string() == "Mesh()");
}

TEST_CASE("specs print as JAX's PartitionSpec", "[spec][printing]") {
  REQUIRE(ts::spec<"x", ts::none>::to_string() == "PartitionSpec('x', None)");
  REQUIRE(ts::spec<"x">::to_string() == "PartitionSpec('x',)");  // a 1-tuple
  REQUIRE(ts::spec<ts::axes("x", "y")>::to_string() == "PartitionSpec(('x', 'y'),)");
  REQUIRE(ts::spec<ts::none, ts::axes("model", "data"), "pipe">::to_string() ==
          "PartitionSpec(None, ('model', 'data'), 'pipe')");
  REQUIRE(ts::spec<ts::none>::to_string() == "PartitionSpec(None,)");
  REQUIRE(ts::spec<>::to_string() == "PartitionSpec()");
}

TEST_CASE("index slices and shapes print as Python does", "[layout][printing]") {
  REQUIRE(ts::slice{0, 4096}.to_string() == "slice(0, 4096, None)");
  REQUIRE(ts::to_string(ts::index_slices<2>{ts::slice{0, 2}, ts::slice{4, 8}}) ==
          "(slice(0, 2, None), slice(4, 8, None))");
  REQUIRE(ts::to_string(ts::index_slices<1>{ts::slice{3, 3}}) == "(slice(3, 3, None),)");
  REQUIRE(ts::to_string(ts::shape<2>{4096, 512}) == "(4096, 512)");
  REQUIRE(ts::to_string(ts::shape<1>{7}) == "(7,)");
}
