// The compile-time enumeration of valid specs used by the property tests
// (tests/unit/support/foundation.hpp): it yields only valid specs, never the same one twice,
// as many as combinatorics says there are, and its types are the ones users spell by hand.
#include <array>
#include <cstddef>
#include <utility>
#include <type_traits>

#include <typeshard/core/spec.hpp>

#include "../unit/support/foundation.hpp"

namespace ts = typeshard;

namespace {

// Number of ways to give k labelled axes each at most one place in Rank ordered lists:
// choose j used axes, order them (j!), and cut the order into Rank lists (C(j+R-1, R-1)).
constexpr std::size_t binomial(std::size_t n, std::size_t r) {
  std::size_t out = 1;
  for (std::size_t i = 1; i <= r; ++i) out = out * (n - r + i) / i;
  return out;
}
constexpr std::size_t expected_count(std::size_t k, std::size_t rank) {
  std::size_t total = 0;
  for (std::size_t j = 0; j <= k; ++j) {
    std::size_t factorial = 1;
    for (std::size_t i = 2; i <= j; ++i) factorial *= i;
    total += binomial(k, j) * factorial * binomial(j + rank - 1, rank - 1);
  }
  return total;
}

// A valid spec is determined by where each mesh axis goes: unused, or (dimension, position).
// key() packs those places into one number, so distinctness is a cheap comparison.
template <class Mesh, std::size_t Rank>
constexpr std::size_t key(const std::array<ts::dim_spec, Rank>& dims) {
  std::size_t k = 0;
  for (std::size_t m = 0; m < Mesh::rank; ++m) {
    std::size_t place = 0;
    for (std::size_t d = 0; d < Rank; ++d)
      for (std::size_t a = 0; a < dims[d].count; ++a)
        if (dims[d].axes[a] == Mesh::axes[m].name) place = 1 + d * Mesh::rank + a;
    k = k * (Rank * Mesh::rank + 1) + place;
  }
  return k;
}

template <class Mesh, std::size_t Rank>
constexpr bool all_valid_and_distinct() {
  using all = ts_test::all_specs<Mesh, Rank>;
  std::array<std::size_t, all::count> keys{};
  for (std::size_t i = 0; i < all::count; ++i) {
    // valid: every axis in the mesh, none twice
    std::size_t used = 0;
    for (std::size_t d = 0; d < Rank; ++d)
      for (std::size_t a = 0; a < all::list[i][d].count; ++a) {
        if (!Mesh::contains(all::list[i][d].axes[a])) return false;
        ++used;
      }
    for (std::size_t m = 0; m < Mesh::rank; ++m) {
      std::size_t seen = 0;
      for (std::size_t d = 0; d < Rank; ++d) seen += all::list[i][d].uses(Mesh::axes[m].name) ? 1 : 0;
      if (seen > 1) return false;
    }
    if (used > Mesh::rank) return false;
    // distinct
    keys[i] = key<Mesh, Rank>(all::list[i]);
    for (std::size_t j = 0; j < i; ++j)
      if (keys[i] == keys[j]) return false;
  }
  return true;
}

template <class Mesh, std::size_t Rank>
constexpr bool enumeration_ok =
    ts_test::all_specs<Mesh, Rank>::count == expected_count(Mesh::rank, Rank) &&
    all_valid_and_distinct<Mesh, Rank>();

using m1 = ts::mesh<ts::axis("x", 4)>;
using m2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using m3 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2), ts::axis("z", 2)>;

static_assert(expected_count(3, 3) == 106 && expected_count(2, 2) == 11 && expected_count(1, 3) == 4);
static_assert(enumeration_ok<m1, 1> && enumeration_ok<m1, 2> && enumeration_ok<m1, 3>);
static_assert(enumeration_ok<m2, 1> && enumeration_ok<m2, 2> && enumeration_ok<m2, 3>);
static_assert(enumeration_ok<m3, 1> && enumeration_ok<m3, 2> && enumeration_ok<m3, 3>);
static_assert(ts_test::specs_3d == expected_count(3, 1) + expected_count(3, 2) + expected_count(3, 3));
static_assert(ts_test::specs_1d_2d ==
              3 * (expected_count(1, 1) + expected_count(1, 2) + expected_count(1, 3)) +
                  5 * (expected_count(2, 1) + expected_count(2, 2) + expected_count(2, 3)));

// Every enumerated spec is valid by the library's own rule-1 check too.
template <class Mesh, std::size_t Rank, std::size_t... I>
constexpr bool library_agrees(std::index_sequence<I...>) {
  return (ts::valid_spec<Mesh, typename ts_test::all_specs<Mesh, Rank>::template at<I>, Rank> && ...);
}
static_assert(library_agrees<m3, 2>(std::make_index_sequence<ts_test::all_specs<m3, 2>::count>{}));
static_assert(library_agrees<m2, 3>(std::make_index_sequence<ts_test::all_specs<m2, 3>::count>{}));

// The enumerated types are the types users write: the first spec leaves every axis unused,
// and some later one is P(('y', 'x'), None) on m2.
static_assert(std::is_same_v<ts_test::all_specs<m2, 2>::at<0>, ts::spec<ts::none, ts::none>>);
template <class Mesh, std::size_t Rank, class Spec, std::size_t... I>
constexpr bool enumerates(std::index_sequence<I...>) {
  return (std::is_same_v<typename ts_test::all_specs<Mesh, Rank>::template at<I>, Spec> || ...);
}
static_assert(enumerates<m2, 2, ts::spec<ts::axes("y", "x"), ts::none>>(std::make_index_sequence<11>{}));
static_assert(enumerates<m2, 2, ts::spec<"y", "x">>(std::make_index_sequence<11>{}));
static_assert(enumerates<m3, 3, ts::spec<ts::none, ts::axes("z", "x"), "y">>(std::make_index_sequence<106>{}));

}  // namespace
