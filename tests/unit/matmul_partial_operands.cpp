// Rule 3: ts::matmul of partial sums. matmul is linear in each operand, so an operand
// unreduced over some axes gives a product unreduced over them too, provided the other
// operand neither shards nor is partial over those axes (else a compile error, see
// tests/compile_fail/rule2_unreduced_operand.cpp). Every lhs spec x unreduced axes x rhs spec
// (x rhs unreduced axes) on the 2x2 mesh, unnamed and with every output spec: the planner's
// verdict against the rule, and the numbers (inputs split into integer partial sums,
// results reduced and compared exactly with a serial GEMM).
#include "matmul_support.hpp"

#include <catch2/catch.hpp>

#include <type_traits>

namespace {

using namespace matmul_test;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
constexpr std::size_t R = 2;

// The subsets of the mesh axes a spec leaves free (an array cannot be partial over an axis
// it is sharded over).
std::vector<ts::dim_spec> free_axis_sets(const spec_array<R>& s) {
  std::vector<ts::dim_spec> out(1);  // {}
  for (std::size_t a = 0; a < mesh_2x2::rank; ++a) {
    const ts::axis_name n = mesh_2x2::axes[a].name;
    if (tsd::uses_axis(s, n)) continue;
    const std::size_t k = out.size();
    for (std::size_t i = 0; i < k; ++i) {
      ts::dim_spec d = out[i];
      d.axes[d.count++] = n;
      out.push_back(d);
    }
  }
  return out;
}

// Blocks of `host` sharded by `spec` and split into partial sums over `u`: member r < n-1
// of each group over u holds small integers derived from (block, r, element), the last one
// the remainder, so the group's sum is exactly the block. Replicas agree.
std::vector<tsd::buffer<float>> put_partial(const ts::host_tensor<float, R>& host,
                                            const spec_array<R>& spec, const ts::dim_spec& u) {
  auto blocks = put_blocks<mesh_2x2>(host, spec);
  const std::size_t n = tsd::group_size<mesh_2x2>(u);
  for (std::size_t p = 0; p < mesh_2x2::size; ++p) {
    const std::size_t r = tsd::group_rank<mesh_2x2>(u, p);
    const auto ix = tsd::index_of<mesh_2x2>(spec, host.extents(), p);
    const std::size_t h = ix[0].start * 131 + ix[1].start;
    float* b = blocks[p].data();
    for (std::size_t e = 0; e < blocks[p].size(); ++e) {
      auto part = [&](std::size_t q) { return float(int((e * 31 + q * 17 + h * 7) % 7) - 3); };
      if (r + 1 < n) {
        b[e] = part(r);
      } else {
        for (std::size_t q = 0; q + 1 < n; ++q) b[e] -= part(q);
      }
    }
  }
  return blocks;
}

// The result's blocks reduced over `u` (psum, spec kept) on the devices.
std::vector<tsd::buffer<float>> reduce(ts::device_mesh<mesh_2x2>& m, std::vector<tsd::buffer<float>> blocks,
                                       const spec_array<R>& spec, const ts::dim_spec& u,
                                       const ts::shape<R>& global) {
  if (u.count == 0) return blocks;
  const auto steps = tsd::reshard_steps<mesh_2x2>(spec, u, spec, {}, global);
  std::vector<tsd::buffer<float>> out(mesh_2x2::size);
  tsd::for_each_position(m, [&](std::size_t p) {
    out[p] = tsd::run_steps_on<float, mesh_2x2, R>(m.get_backend(), p, blocks[p].data(), global, spec,
                                                   tsd::steps_span(steps));
  });
  return out;
}

bool uses_any(const spec_array<R>& s, const ts::dim_spec& axes) {
  for (std::size_t a = 0; a < axes.count; ++a)
    if (tsd::uses_axis(s, axes.axes[a])) return true;
  return false;
}

}  // namespace

TEST_CASE("matmul of partial sums on the 2x2 mesh: every spec, unreduced axes and output", "[matmul][unreduced]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const std::uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  const ts::shape<R> ga{8, 4}, gb{4, 8};
  const auto a = random_integers<float>(ga, rng);
  const auto b = random_integers<float>(gb, rng);
  const tsd::einsum_shapes<R> sh{ga, gb, sizeof(float)};
  const auto specs = all_specs<mesh_2x2, R>();
  std::size_t runs = 0, conflicts = 0;
  for (std::size_t i = 0; i < specs.count; ++i)
    for (const ts::dim_spec& ua : free_axis_sets(specs.specs[i]))
      for (std::size_t j = 0; j < specs.count; ++j)
        for (const ts::dim_spec& ub : free_axis_sets(specs.specs[j])) {
          if (ua.count == 0 && ub.count == 0) continue;  // covered by matmul_combos_2x2
          const auto& lhs = specs.specs[i];
          const auto& rhs = specs.specs[j];
          std::string where = "seed " + std::to_string(seed) + ": lhs " + str(lhs) + " rhs " + str(rhs) +
                              " lhs unreduced over " + tsd::axes_string(ua) + ", rhs over " +
                              tsd::axes_string(ub);
          INFO(where);
          const auto c = tsd::plan_matmul<mesh_2x2, R>(lhs, rhs, false, {}, sh, ua, ub);
          // The rule: neither operand may shard or be partial over the other's partial axes.
          bool overlap = uses_any(rhs, ua) || uses_any(lhs, ub);
          for (std::size_t k = 0; k < ua.count; ++k) overlap = overlap || ub.uses(ua.axes[k]);
          if (overlap) {
            REQUIRE(c.problem == tsd::einsum_problem::unreduced_conflict);
            ++conflicts;
            continue;
          }
          // Otherwise the rules for the specs, with the partial axes added.
          const auto e = expect_by_rule<mesh_2x2>(lhs, rhs, ga, gb);
          REQUIRE(c.problem == e.problem);
          const auto a_blocks = put_partial(a, lhs, ua);
          const auto b_blocks = put_partial(b, rhs, ub);
          auto run = [&](const tsd::einsum_choice<R>& choice) {
            auto got = tsd::run_einsum<float, mesh_2x2, R>(tsd::matmul_equation<R>(), choice, m, spans(a_blocks), ga, spans(b_blocks), gb);
            got = reduce(m, std::move(got), choice.out, choice.out_unreduced, {ga[0], gb[1]});
            auto reduced = choice;
            reduced.out_unreduced = {};
            const std::string err = check_result<mesh_2x2>(reduced, got, a, b);
            INFO(err);
            REQUIRE(err.empty());
            ++runs;
          };
          if (c.problem == tsd::einsum_problem::none) {
            REQUIRE(c.out == e.out);
            REQUIRE(c.out_unreduced.count == e.unreduced.count + ua.count + ub.count);
            for (const ts::dim_spec* u : {&e.unreduced, &ua, &ub})
              for (std::size_t k = 0; k < u->count; ++k) REQUIRE(c.out_unreduced.uses(u->axes[k]));
            run(c);
          }
          for (std::size_t k = 0; k < specs.count; ++k) {
            const auto cn = tsd::plan_matmul<mesh_2x2, R>(lhs, rhs, true, specs.specs[k], sh, ua, ub);
            INFO("out " << str(specs.specs[k]));
            REQUIRE(cn.problem == tsd::einsum_problem::none);
            REQUIRE(cn.out_unreduced.count == 0);
            run(cn);
          }
        }
  CHECK(conflicts > 0);
  CHECK(runs > 100);  // the loop ran plans, not only conflicts
}

TEST_CASE("matmul of a partial sum through the typed API: a chain of two products", "[matmul][unreduced]") {
  using ts::none;
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  std::mt19937_64 rng(11);
  const auto a = random_integers<float>(ts::shape<2>{6, 8}, rng);
  const auto b = random_integers<float>(ts::shape<2>{8, 5}, rng);
  const auto w = random_integers<float>(ts::shape<2>{5, 4}, rng);
  auto A = ts::device_put<ts::spec<none, "x">>(m, a);
  auto B = ts::device_put<ts::spec<"x", none>>(m, b);
  auto W = ts::device_put<ts::spec<none, "y">>(m, w);
  auto U = ts::matmul(A, B);  // (A.B){U_x}
  auto V = ts::matmul(U, W);  // (A.B.W){U_x}, columns over y: no communication
  static_assert(std::is_same_v<decltype(V)::unreduced_type, ts::unreduced<"x">>);
  static_assert(std::is_same_v<decltype(V)::spec, ts::spec<none, "y">>);
  static_assert(ts::communication_free<ts::matmul_plan_for<decltype(U), decltype(W)>>);
  auto C = ts::matmul<ts::spec<"x", "y">>(U, W);  // ... psum_scatter'd straight into rows over x
  CHECK(ts::matmul_plan_for<decltype(U), decltype(W), ts::spec<"x", "y">>::describe() ==
        "local gemm; psum_scatter(out, dim 0, over x)");
  ts::host_tensor<float, 2> ab({6, 5}), abw({6, 4});
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t k = 0; k < 5; ++k)
      for (std::size_t j = 0; j < 8; ++j) ab(i, k) += a(i, j) * b(j, k);
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t k = 0; k < 4; ++k)
      for (std::size_t j = 0; j < 5; ++j) abw(i, k) += ab(i, j) * w(j, k);
  CHECK(ts::to_host(ts::reshard<ts::spec<none, none>>(V)) == abw);
  CHECK(ts::to_host(C) == abw);
}
