// Every (lhs spec, rhs spec) pair on the 3-D mesh (2, 2, 2), rank 2 and 3, with output specs
// drawn at random: the rule, the cost bound and the numbers, as in matmul_combos_2x2.cpp.
// Under a sanitizer a fixed fraction of the pairs runs (sanitizer_stride), from a random
// offset, so every pair still gets covered across runs.
#include "matmul_support.hpp"

#include <catch2/catch.hpp>

namespace {
using namespace matmul_test;
using mesh_2x2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2), ts::axis("z", 2)>;
}  // namespace

TEST_CASE("matmul on (2, 2, 2), rank 2: every lhs x rhs pair, sampled out specs", "[matmul][combos]") {
  ts::cpu_devices devices{8};
  const std::uint64_t seed = std::random_device{}();
  run_all_pairs<mesh_2x2x2, float, 2>(devices, {8, 16}, {16, 8}, 3, false, seed, sanitizer_stride(4));
  run_all_pairs<mesh_2x2x2, float, 2>(devices, {7, 5}, {5, 9}, 1, true, seed + 1, sanitizer_stride(4));
}

TEST_CASE("matmul on (2, 2, 2), rank 3: every lhs x rhs pair, sampled out specs", "[matmul][combos]") {
  ts::cpu_devices devices{8};
  const std::uint64_t seed = std::random_device{}();
  run_all_pairs<mesh_2x2x2, float, 3>(devices, {8, 8, 8}, {8, 8, 8}, 1, false, seed, sanitizer_stride(16));
  run_all_pairs<mesh_2x2x2, double, 3>(devices, {3, 5, 6}, {3, 6, 3}, 1, true, seed + 1, sanitizer_stride(16));
}
