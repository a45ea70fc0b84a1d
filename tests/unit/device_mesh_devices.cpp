// device_mesh<Mesh>: a mesh bound to devices. The default takes the backend's first devices in
// order; explicit lists give subsets ("half mesh"), strides and custom orders, and data put on
// such a mesh really lives on those devices. Bad lists are device_mesh_errors whose message
// names the numbers involved.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <typeshard/typeshard.hpp>

#include "support/foundation.hpp"

namespace {

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_4 = ts::mesh<ts::axis("x", 4)>;
using mesh_8 = ts::mesh<ts::axis("x", 8)>;

// The device each mesh position's shard of a freshly put array reports.
template <class Mesh>
std::vector<ts::device_id> shard_devices(const ts::device_mesh<Mesh>& m) {
  const auto a = ts::device_put<ts::spec<"x">>(m, ts::arange<int>(4 * Mesh::size));
  std::vector<ts::device_id> out;
  for (const auto& s : a.addressable_shards()) out.push_back(s.device.id);
  return out;
}

}  // namespace

TEST_CASE("the default device mesh takes the first devices, row-major", "[device_mesh]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x2> m{devices};
  REQUIRE(m.devices() == std::vector<ts::device_id>{0, 1, 2, 3});
  REQUIRE(&m.get_backend() == &devices);
  for (std::size_t p = 0; p < 4; ++p) REQUIRE(m.device_at(p) == p);
  REQUIRE(m.to_string() == "Mesh('x': 2, 'y': 2) on devices [0, 1, 2, 3]");
  REQUIRE(shard_devices(m) == std::vector<ts::device_id>{0, 1, 2, 3});

  const ts::device_mesh<mesh_8> all{devices};  // exactly as many devices as the mesh needs
  REQUIRE(all.devices() == std::vector<ts::device_id>{0, 1, 2, 3, 4, 5, 6, 7});
}

TEST_CASE("explicit device lists: half mesh, strided, permuted", "[device_mesh]") {
  ts::cpu_devices devices{8};

  SECTION("the other half") {
    const ts::device_mesh<mesh_2x2> half{devices, {4, 5, 6, 7}};
    REQUIRE(half.devices() == std::vector<ts::device_id>{4, 5, 6, 7});
    REQUIRE(half.device_at(2) == 6);
    REQUIRE(half.to_string() == "Mesh('x': 2, 'y': 2) on devices [4, 5, 6, 7]");
    REQUIRE(shard_devices(half) == std::vector<ts::device_id>{4, 5, 6, 7});
  }
  SECTION("strided") {
    const ts::device_mesh<mesh_4> even{devices, {0, 2, 4, 6}};
    const ts::device_mesh<mesh_4> odd{devices, std::vector<ts::device_id>{1, 3, 5, 7}};
    REQUIRE(shard_devices(even) == std::vector<ts::device_id>{0, 2, 4, 6});
    REQUIRE(shard_devices(odd) == std::vector<ts::device_id>{1, 3, 5, 7});
  }
  SECTION("permuted, random") {
    INFO(ts_test::seed_message());
    std::mt19937_64 rng(ts_test::seed());
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<ts::device_id> order(8);
      std::iota(order.begin(), order.end(), ts::device_id{0});
      std::shuffle(order.begin(), order.end(), rng);
      CAPTURE(order);
      const ts::device_mesh<mesh_8> m{devices, order};
      REQUIRE(m.devices() == order);
      REQUIRE(shard_devices(m) == order);
      // Position p holds block p of the array, whichever device it is.
      const auto a = ts::device_put<ts::spec<"x">>(m, ts::arange<int>(16));
      for (const auto& s : a.addressable_shards()) {
        REQUIRE(s.device.id == order[s.mesh_position]);
        REQUIRE(s.index[0].start == 2 * s.mesh_position);
      }
    }
  }
}

TEST_CASE("device meshes compare by backend and device order", "[device_mesh]") {
  ts::cpu_devices devices{8};
  ts::cpu_devices other{8};
  const ts::device_mesh<mesh_4> a{devices};
  const ts::device_mesh<mesh_4> b{devices, {0, 1, 2, 3}};
  const ts::device_mesh<mesh_4> reversed{devices, {3, 2, 1, 0}};
  const ts::device_mesh<mesh_4> elsewhere{other};
  const ts::device_mesh<mesh_4> copy = reversed;
  REQUIRE(a == b);
  REQUIRE_FALSE(a == reversed);
  REQUIRE_FALSE(a == elsewhere);  // same ids, another backend
  REQUIRE(copy == reversed);
}

TEST_CASE("bad device lists are device_mesh_errors that name the numbers", "[device_mesh]") {
  ts::cpu_devices devices{8};
  using Catch::Contains;
  using Catch::StartsWith;

  SECTION("wrong length") {
    const std::vector<ts::device_id> three{0, 1, 2};
    REQUIRE_THROWS_AS((ts::device_mesh<mesh_2x2>{devices, three}), ts::device_mesh_error);
    REQUIRE_THROWS_WITH((ts::device_mesh<mesh_2x2>{devices, three}),
                        StartsWith("typeshard: ") && Contains("needs exactly 4 devices") &&
                            Contains("has 3"));
    const std::vector<ts::device_id> five{0, 1, 2, 3, 4};
    REQUIRE_THROWS_WITH((ts::device_mesh<mesh_2x2>{devices, five}), Contains("has 5"));
    REQUIRE_THROWS_AS((ts::device_mesh<mesh_2x2>{devices, std::vector<ts::device_id>{}}),
                      ts::device_mesh_error);
  }
  SECTION("a device twice") {
    REQUIRE_THROWS_AS((ts::device_mesh<mesh_2x2>{devices, {0, 5, 2, 5}}), ts::device_mesh_error);
    REQUIRE_THROWS_WITH((ts::device_mesh<mesh_2x2>{devices, {0, 5, 2, 5}}),
                        StartsWith("typeshard: ") && Contains("device 5") && Contains("twice") &&
                            Contains("entries 1 and 3"));
  }
  SECTION("a device the backend does not have") {
    REQUIRE_THROWS_AS((ts::device_mesh<mesh_2x2>{devices, {0, 1, 8, 3}}), ts::device_mesh_error);
    REQUIRE_THROWS_WITH((ts::device_mesh<mesh_2x2>{devices, {0, 1, 8, 3}}),
                        StartsWith("typeshard: ") && Contains("device 8") && Contains("entry 2") &&
                            Contains("8 devices"));
    REQUIRE_THROWS_WITH((ts::device_mesh<mesh_2x2>{devices, {0, 1, 2, 1000}}), Contains("device 1000"));
  }
  SECTION("not enough devices for the default mesh") {
    ts::cpu_devices few{3};
    REQUIRE_THROWS_AS(ts::device_mesh<mesh_2x2>{few}, ts::device_mesh_error);
    REQUIRE_THROWS_WITH(ts::device_mesh<mesh_2x2>{few},
                        StartsWith("typeshard: ") && Contains("needs 4 devices") &&
                            Contains("has 3"));
  }
}
