// host_tensor<T, Rank>: construction, row-major indexing, and the shape_errors for a wrong
// number of values and for extents whose product overflows size_t.
#include <catch2/catch.hpp>

#include <cstddef>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <typeshard/array/host_tensor.hpp>

#include "support/foundation.hpp"

namespace {
namespace ts = typeshard;
constexpr std::size_t max_size = std::numeric_limits<std::size_t>::max();
}  // namespace

TEST_CASE("host_tensor construction", "[host_tensor]") {
  SECTION("zero-initialised") {
    const ts::host_tensor<float, 2> a({3, 4});
    REQUIRE(a.extents() == ts::shape<2>{3, 4});
    REQUIRE(a.extent(0) == 3);
    REQUIRE(a.extent(1) == 4);
    REQUIRE(a.size() == 12);
    for (float v : a.values()) REQUIRE(v == 0.0f);
  }
  SECTION("filled") {
    const ts::host_tensor<int, 3> a({2, 1, 3}, 7);
    REQUIRE(a.size() == 6);
    for (int v : a.values()) REQUIRE(v == 7);
  }
  SECTION("from values, row-major") {
    const ts::host_tensor<int, 2> a({2, 3}, {0, 1, 2, 10, 11, 12});
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t j = 0; j < 3; ++j) REQUIRE(a(i, j) == static_cast<int>(10 * i + j));
    const std::vector<double> v{1.5, 2.5};
    const ts::host_tensor<double, 1> b({2}, v);
    REQUIRE(b(1) == 2.5);
  }
  SECTION("empty extents") {
    const ts::host_tensor<float, 2> a({0, 5});
    REQUIRE(a.size() == 0);
    const ts::host_tensor<float, 2> b({5, 0}, std::vector<float>{});
    REQUIRE(b.size() == 0);
    REQUIRE(b.extents() == ts::shape<2>{5, 0});
    const ts::host_tensor<float, 1> c;
    REQUIRE(c.size() == 0);
  }
  SECTION("element writes and equality") {
    ts::host_tensor<float, 2> a({2, 2});
    a(1, 0) = 3.0f;
    REQUIRE(a.values()[2] == 3.0f);
    const ts::host_tensor<float, 2> b({2, 2}, {0, 0, 3, 0});
    REQUIRE(a == b);
    REQUIRE_FALSE(a == ts::host_tensor<float, 2>({2, 2}));
    REQUIRE_FALSE(a == ts::host_tensor<float, 2>({4, 1}, {0, 0, 3, 0}));  // same values, other shape
  }
}

TEST_CASE("host_tensor offset is row-major, against a brute-force count", "[host_tensor]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  for (int trial = 0; trial < 50; ++trial) {
    ts::shape<3> e{};
    for (auto& x : e) x = std::uniform_int_distribution<std::size_t>(1, 6)(rng);
    CAPTURE(e);
    const ts::host_tensor<int, 3> t(e);
    std::size_t expected = 0;  // visiting indices in row-major order counts 0, 1, 2, ...
    for (std::size_t i = 0; i < e[0]; ++i)
      for (std::size_t j = 0; j < e[1]; ++j)
        for (std::size_t k = 0; k < e[2]; ++k) REQUIRE(t.offset({i, j, k}) == expected++);
    REQUIRE(expected == t.size());
  }
}

TEST_CASE("arange and reshape", "[host_tensor]") {
  const auto a = ts::arange<double>(6);
  REQUIRE(a.extents() == ts::shape<1>{6});
  for (std::size_t i = 0; i < 6; ++i) REQUIRE(a(i) == static_cast<double>(i));
  const auto b = ts::reshape<2>(a, {2, 3});
  REQUIRE(b(1, 2) == 5.0);
  REQUIRE(b(1, 0) == 3.0);
  REQUIRE_THROWS_AS(ts::reshape<2>(a, {4, 2}), ts::shape_error);
}

TEST_CASE("a wrong number of values is a shape_error naming both counts", "[host_tensor]") {
  using Catch::Contains;
  REQUIRE_THROWS_AS((ts::host_tensor<float, 2>({2, 3}, {1, 2, 3, 4, 5})), ts::shape_error);
  REQUIRE_THROWS_WITH((ts::host_tensor<float, 2>({2, 3}, {1, 2, 3, 4, 5})),
                      Catch::StartsWith("typeshard: ") && Contains("(2, 3)") &&
                          Contains("needs 6 values") && Contains("got 5"));
  REQUIRE_THROWS_WITH((ts::host_tensor<int, 1>({2}, std::vector<int>(3))),
                      Contains("(2,)") && Contains("needs 2") && Contains("got 3"));
  REQUIRE_THROWS_AS((ts::host_tensor<int, 2>({0, 3}, {1})), ts::shape_error);
  // shape_error is a typeshard::error is a std::runtime_error
  REQUIRE_THROWS_AS((ts::host_tensor<int, 1>({2}, {1})), ts::error);
  REQUIRE_THROWS_AS((ts::host_tensor<int, 1>({2}, {1})), std::runtime_error);
}

TEST_CASE("extents whose product overflows size_t are a shape_error", "[host_tensor]") {
  using Catch::Contains;
  const std::size_t half = max_size / 2 + 1;  // half * 2 overflows
  // Thrown before any allocation is attempted (else std::bad_alloc or length_error).
  REQUIRE_THROWS_AS((ts::host_tensor<char, 2>({half, 2})), ts::shape_error);
  REQUIRE_THROWS_WITH((ts::host_tensor<char, 2>({half, 2})),
                      Catch::StartsWith("typeshard: ") && Contains("overflows") &&
                          Contains(std::to_string(half)));
  REQUIRE_THROWS_AS((ts::host_tensor<char, 3>({1u << 22, 1u << 22, 1u << 22})), ts::shape_error);
  REQUIRE_THROWS_AS((ts::host_tensor<int, 2>({max_size, 2}, 0)), ts::shape_error);
  REQUIRE_THROWS_AS((ts::host_tensor<int, 2>({max_size, 2}, std::vector<int>{})), ts::shape_error);
  REQUIRE_THROWS_AS((ts::host_tensor<int, 2>::element_count({max_size, max_size})), ts::shape_error);
  // A zero extent makes the product 0, whatever the others: no overflow.
  REQUIRE((ts::host_tensor<int, 3>::element_count({max_size, 0, max_size})) == 0);
  REQUIRE((ts::host_tensor<int, 2>::element_count({max_size, 1})) == max_size);
}
