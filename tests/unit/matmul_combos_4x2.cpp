// Every (lhs spec, rhs spec) pair on the (4, 2) mesh, rank 2 and 3, each also with output
// specs drawn at random (all of them for matrices): the rule, the cost bound and the
// numbers, as in matmul_combos_2x2.cpp.
#include "matmul_support.hpp"

#include <catch2/catch.hpp>

namespace {
using namespace matmul_test;
using mesh_4x2 = ts::mesh<ts::axis("x", 4), ts::axis("y", 2)>;
}  // namespace

TEST_CASE("matmul on (4, 2), rank 2: every lhs x rhs x out spec", "[matmul][combos]") {
  ts::cpu_devices devices{8};
  const std::uint64_t seed = std::random_device{}();
  run_all_pairs<mesh_4x2, float, 2>(devices, {8, 16}, {16, 8}, 0, false, seed);
  run_all_pairs<mesh_4x2, float, 2>(devices, {9, 6}, {6, 5}, 2, true, seed + 1);
}

TEST_CASE("matmul on (4, 2), rank 3: every lhs x rhs pair, sampled out specs", "[matmul][combos]") {
  ts::cpu_devices devices{8};
  const std::uint64_t seed = std::random_device{}();
  run_all_pairs<mesh_4x2, float, 3>(devices, {8, 8, 8}, {8, 8, 8}, 1, false, seed, sanitizer_stride(4));
  run_all_pairs<mesh_4x2, double, 3>(devices, {3, 5, 7}, {3, 7, 2}, 1, true, seed + 1, sanitizer_stride(4));
}
