// Every (lhs spec, rhs spec, out spec) combination on the 1-D meshes (2) and (4), rank 2
// and 3 (batched): the unnamed plan follows DESIGN rule 2 (checked against an independent
// restatement of the rules), the named plan is never costlier than the rule's plan followed
// by a reshard, and every device's block equals a serial GEMM exactly (small-integer data,
// see matmul_support.hpp). Even and uneven extents, static and dynamic planning.
#include "matmul_support.hpp"

#include <catch2/catch.hpp>

namespace {
using namespace matmul_test;
using mesh_2 = ts::mesh<ts::axis("x", 2)>;
using mesh_4 = ts::mesh<ts::axis("x", 4)>;
}  // namespace

TEST_CASE("matmul on (2): every lhs x rhs x out spec, rank 2 and 3", "[matmul][combos]") {
  ts::cpu_devices devices{2};
  const std::uint64_t seed = std::random_device{}();
  const auto s = run_all_pairs<mesh_2, float, 2>(devices, {4, 6}, {6, 2}, 0, false, seed);
  CHECK(s.pairs == 9);  // 3 specs: (None, None), ('x', None), (None, 'x')
  CHECK(s.rejected == 1);  // A[I_x, J] . B[J, K_x] without an output spec
  run_all_pairs<mesh_2, float, 2>(devices, {3, 5}, {5, 1}, 0, true, seed + 1);
  run_all_pairs<mesh_2, double, 3>(devices, {2, 4, 6}, {2, 6, 4}, 0, false, seed + 2);
  run_all_pairs<mesh_2, float, 3>(devices, {3, 3, 5}, {3, 5, 1}, 0, true, seed + 3);
}

TEST_CASE("matmul on (4): every lhs x rhs x out spec, rank 2 and 3", "[matmul][combos]") {
  ts::cpu_devices devices{4};
  const std::uint64_t seed = std::random_device{}();
  run_all_pairs<mesh_4, float, 2>(devices, {8, 4}, {4, 12}, 0, false, seed);
  run_all_pairs<mesh_4, float, 2>(devices, {6, 5}, {5, 3}, 0, true, seed + 1);
  run_all_pairs<mesh_4, float, 3>(devices, {4, 4, 8}, {4, 8, 4}, 0, false, seed + 2);
  run_all_pairs<mesh_4, double, 3>(devices, {5, 3, 2}, {5, 2, 7}, 0, true, seed + 3);
}
