// Every (lhs spec, rhs spec) pair on the 2x2 mesh, and for matrices every output spec too:
// the plan follows DESIGN rule 2 (checked against an independent restatement of the
// rules), and every device's block of the result equals a serial GEMM (exactly: the data
// are small integers, see matmul_support.hpp). Even and uneven extents; plans made with the
// real extents (static) and with all extents taken equal (dynamic).
#include "matmul_support.hpp"

#include <catch2/catch.hpp>

namespace {
using namespace matmul_test;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
}  // namespace

TEST_CASE("matmul 2x2 mesh, rank 2: every lhs x rhs x out spec", "[matmul][combos]") {
  ts::cpu_devices devices{4};
  const std::uint64_t seed = std::random_device{}();
  // 11 specs: 121 pairs, each also with all 11 output specs.
  const auto even = run_all_pairs<mesh_2x2, float, 2>(devices, {8, 12}, {12, 4}, 0, false, seed);
  CHECK(even.pairs == 121);
  CHECK(even.planned + even.rejected == 121);
  CHECK(even.named == 121 * 11);
  // Uneven: 5 rows, 7 contracting, 3 columns (4 shards of 3 leave one empty).
  run_all_pairs<mesh_2x2, float, 2>(devices, {5, 7}, {7, 3}, 0, true, seed + 1);
}

TEST_CASE("matmul 2x2 mesh, rank 3 (batched): every lhs x rhs pair, sampled out specs", "[matmul][combos]") {
  ts::cpu_devices devices{4};
  const std::uint64_t seed = std::random_device{}();
  const auto s = run_all_pairs<mesh_2x2, float, 3>(devices, {4, 4, 8}, {4, 8, 4}, 1, false, seed);
  CHECK(s.one_sided > 0);  // a batch dimension sharded in one operand only: planned, checked
  run_all_pairs<mesh_2x2, double, 3>(devices, {3, 5, 6}, {3, 6, 2}, 1, true, seed + 1);
}
