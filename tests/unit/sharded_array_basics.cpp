// sharded_array: the type an array carries (padded spec, extents, unreduced axes), static
// extents checked at device_put, the sharding string, shards shared between copies, replicas
// in their own (aligned) memory, empty arrays, and a larger round trip.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <random>
#include <type_traits>

#include <typeshard/typeshard.hpp>

#include "support/foundation.hpp"

namespace {
namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_8 = ts::mesh<ts::axis("x", 8)>;

ts::host_tensor<float, 2> iota_matrix(std::size_t rows, std::size_t cols) {
  ts::host_tensor<float, 2> t({rows, cols});
  for (std::size_t i = 0; i < t.size(); ++i) t.values()[i] = static_cast<float>(i);
  return t;
}
}  // namespace

TEST_CASE("the array's type carries element, mesh, padded spec, extents, unreduced axes",
          "[sharded_array]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const auto a = ts::device_put<ts::spec<"x">>(m, iota_matrix(4, 2));
  using A = std::remove_const_t<decltype(a)>;
  STATIC_REQUIRE(std::is_same_v<A::value_type, float>);
  STATIC_REQUIRE(std::is_same_v<A::mesh_type, mesh_2x2>);
  STATIC_REQUIRE(std::is_same_v<A::spec, ts::spec<"x", ts::none>>);  // padded to the rank
  STATIC_REQUIRE(std::is_same_v<A::extents_type, ts::dextents<2>>);
  STATIC_REQUIRE(std::is_same_v<A::unreduced_type, ts::unreduced<>>);
  STATIC_REQUIRE(A::rank == 2);
  STATIC_REQUIRE(ts::sharded_array_like<A> && ts::sharded_array_like<const A&>);
  STATIC_REQUIRE(!ts::sharded_array_like<ts::host_tensor<float, 2>>);
  REQUIRE(A::sharding_string() ==
          "NamedSharding(mesh=Mesh('x': 2, 'y': 2), spec=PartitionSpec('x', None))");
  REQUIRE(a.extents() == ts::shape<2>{4, 2});
  REQUIRE(a.extent(0) == 4);
  REQUIRE(a.size() == 8);
  for (std::size_t p = 0; p < 4; ++p) {
    REQUIRE(a.index(p) == A::layout_type::index({4, 2}, p));
    REQUIRE(a.local_shape(p) == A::layout_type::local_shape({4, 2}, p));
  }
}

TEST_CASE("arrays whose specs are spelled differently but pad equal combine", "[sharded_array][elementwise]") {
  // device_put<spec<"x">> and device_put<spec<"x", none>> give arrays of equal padded specs
  // (rule 5 is satisfied) but different template arguments; elementwise ops accept both, and
  // also operands whose extents differ in which dimensions are static.
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const auto h = iota_matrix(4, 3);
  const auto a = ts::device_put<ts::spec<"x">>(m, h);
  const auto b = ts::device_put<ts::spec<"x", ts::none>>(m, h);
  const auto c = ts::device_put<ts::spec<"x">, ts::extents<4, ts::dyn>>(m, h);
  const auto sum = a + b;
  STATIC_REQUIRE(std::is_same_v<decltype(sum)::spec, ts::spec<"x", ts::none>>);
  REQUIRE(ts::to_host(sum) == ts::to_host(a * 2.0f));
  REQUIRE(ts::to_host(ts::maximum(b, a)) == h);
  REQUIRE(ts::to_host(a - ts::sin(a)) == ts::to_host(b - ts::sin(b)));  // sin(a)'s spec is padded
  const auto mixed = b + c;
  STATIC_REQUIRE(std::is_same_v<decltype(mixed)::extents_type, ts::extents<4, ts::dyn>>);  // static wins
  const auto mixed_other_way = c * b;
  STATIC_REQUIRE(std::is_same_v<decltype(mixed_other_way)::extents_type, ts::extents<4, ts::dyn>>);
  REQUIRE(ts::to_host(mixed) == ts::to_host(b * 2.0f));
}

TEST_CASE("static extents are checked at device_put", "[sharded_array]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const auto a = ts::device_put<ts::spec<"x", "y">, ts::extents<6, ts::dyn>>(m, iota_matrix(6, 5));
  STATIC_REQUIRE(std::is_same_v<std::remove_const_t<decltype(a)>::extents_type, ts::extents<6, ts::dyn>>);
  REQUIRE(ts::to_host(a) == iota_matrix(6, 5));

  using fixed = ts::extents<6, ts::dyn>;
  REQUIRE_THROWS_AS((ts::device_put<ts::spec<"x", "y">, fixed>(m, iota_matrix(7, 5))), ts::shape_error);
  REQUIRE_THROWS_WITH((ts::device_put<ts::spec<"x", "y">, fixed>(m, iota_matrix(7, 5))),
                      Catch::StartsWith("typeshard: ") && Catch::Contains("dimension 0") &&
                          Catch::Contains("extent 7") && Catch::Contains("fixes it to 6"));
  using both = ts::extents<6, 4>;
  REQUIRE_THROWS_WITH((ts::device_put<ts::spec<"x", "y">, both>(m, iota_matrix(6, 5))),
                      Catch::Contains("dimension 1") && Catch::Contains("extent 5") &&
                          Catch::Contains("fixes it to 4"));
}

TEST_CASE("copies share their shards; replicas have their own memory", "[sharded_array]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const auto a = ts::device_put<ts::spec<"x", ts::none>>(m, iota_matrix(6, 3));
  const auto copy = a;  // NOLINT: the copy is the point
  for (std::size_t p = 0; p < 4; ++p) REQUIRE(copy.local_data(p).data() == a.local_data(p).data());

  // (0, 0) and (0, 1) hold the same rows: equal data, each device its own buffer.
  const auto s = a.addressable_shards();
  REQUIRE(s[0].replica_id == 0);
  REQUIRE(s[1].replica_id == 1);
  REQUIRE(s[0].index == s[1].index);
  REQUIRE(s[0].data.data() != s[1].data.data());
  REQUIRE(std::equal(s[0].data.begin(), s[0].data.end(), s[1].data.begin(), s[1].data.end()));
  for (const auto& shard : s) {
    CAPTURE(shard.mesh_position);
    // Shard memory is cache-line aligned, so no two devices share a line.
    REQUIRE(reinterpret_cast<std::uintptr_t>(shard.data.data()) % ts::detail::shard_alignment == 0);
  }
}

TEST_CASE("empty arrays and empty shards", "[sharded_array]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_8> m{devices};
  SECTION("no elements at all") {
    const auto a = ts::device_put<ts::spec<"x", ts::none>>(m, ts::host_tensor<float, 2>({0, 4}));
    REQUIRE(a.size() == 0);
    for (const auto& s : a.addressable_shards()) {
      REQUIRE(s.shape == ts::shape<2>{0, 4});
      REQUIRE(s.data.empty());
    }
    REQUIRE(ts::to_host(a).extents() == ts::shape<2>{0, 4});
  }
  SECTION("fewer rows than devices: the trailing shards are empty") {
    const auto h = iota_matrix(3, 2);
    const auto a = ts::device_put<ts::spec<"x", ts::none>>(m, h);
    const auto s = a.addressable_shards();
    for (std::size_t p = 0; p < 8; ++p) {
      CAPTURE(p);
      REQUIRE(s[p].shape[0] == (p < 3 ? 1u : 0u));
      REQUIRE(s[p].data.size() == (p < 3 ? 2u : 0u));
    }
    REQUIRE(ts::to_host(a) == h);
  }
}

TEST_CASE("a larger array round-trips on 8 devices", "[sharded_array]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{8};
  const ts::device_mesh<ts::mesh<ts::axis("x", 4), ts::axis("y", 2)>> m{devices, {7, 6, 5, 4, 3, 2, 1, 0}};
  ts::host_tensor<double, 2> h({1001, 517});
  for (double& v : h.values()) v = std::uniform_real_distribution<double>(-1, 1)(rng);
  const auto a = ts::device_put<ts::spec<"y", "x">>(m, h);
  REQUIRE(ts::to_host(a) == h);
  const auto b = ts::device_put<ts::spec<ts::axes("x", "y"), ts::none>>(m, h);
  REQUIRE(ts::to_host(b) == h);
}
