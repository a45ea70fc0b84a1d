// ts::value_and_grad through ts::einsum and ts::matmul on the (2,2) mesh: the gradient of
// sum(sin(einsum)) equals central finite differences (double) and the replicated (serial)
// run's, for a deterministic sample of operand specs per equation (no communication, a
// contracting letter sharded alike: an unreduced product, sharded in one operand only: a
// gather, batch letters, one sharded in one operand only, an empty output, a named output
// spec: a reduce-scatter), ranks 1 to 3, even and uneven extents. The backward of each is
// the einsum with the transposed equation, planned at compile time: the test also checks a
// few of those plans.
#include "grad_check.hpp"

namespace {

using namespace grad_test;
using ts::none;

template <ts::einsum_subscripts S, class Out = ts::auto_out>
constexpr auto contraction = [](auto a, auto b) { return sin_sum(ts::einsum<S, Out>(a, b)); };

TEST_CASE("grad: einsum ij,jk->ik and matmul", "[grad]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  for (const auto& [i, j, k] : {std::array<std::size_t, 3>{4, 4, 4}, {3, 5, 2}}) {
    const auto a = random_tensor(ts::shape<2>{i, j}, 1);
    const auto b = random_tensor(ts::shape<2>{j, k}, 2);
    const auto f = contraction<"ij,jk->ik">;
    check_gradients<ts::spec<"x", none>, ts::spec<none, "y">>("free letters", f, m, a, b);
    check_gradients<ts::spec<none, "x">, ts::spec<"x", none>>("contracting alike", f, m, a, b);
    check_gradients<ts::spec<"x", "y">, ts::spec<"y", none>>("rows and contracting", f, m, a, b);
    check_gradients<ts::spec<none, "y">, ts::spec<none, none>>("gathered lhs", f, m, a, b);
    check_gradients<ts::spec<none, "x">, ts::spec<"x", none>>(
        "named output: reduce-scatter", contraction<"ij,jk->ik", ts::spec<"x", none>>, m, a, b);
    check_gradients<ts::spec<"x", none>, ts::spec<none, none>>(
        "matmul", [](auto x, auto y) { return sin_sum(ts::matmul(x, y)); }, m, a, b);
  }
}

TEST_CASE("grad: einsum of ranks 1 to 3 (batch letters, an empty output)", "[grad]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  for (std::size_t n : {4, 5}) {
    const auto x3 = random_tensor(ts::shape<3>{2, n, 4}, 3);
    const auto w = random_tensor(ts::shape<2>{4, 3}, 4);
    check_gradients<ts::spec<"x", none, "y">, ts::spec<"y", none>>(
        "bsd,df->bsf", contraction<"bsd,df->bsf">, m, x3, w);
    const auto b3 = random_tensor(ts::shape<3>{2, 4, n}, 5);
    check_gradients<ts::spec<"x", none, "y">, ts::spec<"x", "y", none>>(
        "bij,bjk->bik", contraction<"bij,bjk->bik">, m, x3, b3);
    const auto u = random_tensor(ts::shape<1>{n}, 6);
    const auto v = random_tensor(ts::shape<1>{n}, 7);
    check_gradients<ts::spec<"x">, ts::spec<"x">>("i,i->", contraction<"i,i->">, m, u, v);
    const auto a2 = random_tensor(ts::shape<2>{3, n}, 8);
    check_gradients<ts::spec<"x", "y">, ts::spec<"y">>("ij,j->i", contraction<"ij,j->i">, m, a2, v);
  }
}

// A batch letter sharded in one operand only keeps its sharding (the whole operand read at
// its block, no communication forward); the whole operand's gradient comes back sharded
// like the batch letter and is delivered to its spec (an all_gather, as the grad plan says).
TEST_CASE("grad: a batch letter sharded in one operand only", "[grad]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  for (std::size_t n : {4, 3}) {  // even, then uneven batch blocks over x
    const auto a = random_tensor(ts::shape<3>{n, 3, 4}, 11);
    const auto b = random_tensor(ts::shape<3>{n, 4, 2}, 12);
    const auto f = contraction<"bij,bjk->bik">;
    check_gradients<ts::spec<none, none, none>, ts::spec<"x", none, none>>("rhs's b over x", f, m,
                                                                           a, b);
    check_gradients<ts::spec<"x", none, "y">, ts::spec<none, "y", none>>(
        "lhs's b over x, j over y in both", f, m, a, b);
    check_gradients<ts::spec<none, none, "x">, ts::spec<"x", none, none>>(
        "lhs's j on the axis it takes: gathered first", f, m, a, b);
    check_gradients<ts::spec<none, "x", none>, ts::spec<"x", none, none>>(
        "lhs's i on the axis it takes: output spec named",
        contraction<"bij,bjk->bik", ts::spec<"x", none, none>>, m, a, b);
    check_gradients<ts::spec<"y", none, none>, ts::spec<none, none, none>>(
        "matmul", [](auto x, auto y) { return sin_sum(ts::matmul(x, y)); }, m, a, b);
  }
  // Forward and backward plans: the forward reads a slice; d lhs (lhs whole) is a local
  // product sharded over x, gathered into lhs's replicated spec.
  using A = ts::sharded_array<float, mesh_2x2, ts::spec<none, none, none>, ts::dextents<3>>;
  using B = ts::sharded_array<float, mesh_2x2, ts::spec<"x", none, none>, ts::dextents<3>>;
  using C = ts::sharded_array<float, mesh_2x2, ts::spec<"x", none, none>, ts::dextents<3>>;
  STATIC_REQUIRE(ts::communication_free<ts::einsum_plan_for<"bij,bjk->bik", A, B>>);
  using plans = ts::einsum_grad_plans<"bij,bjk->bik", A, B, C>;
  STATIC_REQUIRE(std::is_same_v<plans::lhs_plan::out_spec, ts::spec<"x", none, none>>);
  STATIC_REQUIRE(ts::communication_free<plans::lhs_plan>);
  STATIC_REQUIRE(std::is_same_v<plans::rhs_plan::out_spec, ts::spec<"x", none, none>>);
  STATIC_REQUIRE(ts::communication_free<plans::rhs_plan>);
}

TEST_CASE("grad: the transposed einsums' plans", "[grad]") {
  using X = ts::sharded_array<float, mesh_2x2, ts::spec<"x", none>, ts::dextents<2>>;
  using W1 = ts::sharded_array<float, mesh_2x2, ts::spec<none, "y">, ts::dextents<2>>;
  using H = ts::sharded_array<float, mesh_2x2, ts::spec<"x", "y">, ts::dextents<2>>;
  using plans = ts::einsum_grad_plans<"bd,dh->bh", X, W1, H>;
  STATIC_REQUIRE(plans::lhs_subscripts == ts::einsum_subscripts("bh,dh->bd"));
  STATIC_REQUIRE(plans::rhs_subscripts == ts::einsum_subscripts("bh,bd->dh"));
  // d X = dH . W1^T contracts the "y"-sharded hidden dimension: unreduced over "y" (the
  // all-reduce Megatron's backward needs), d W1 = X^T . dH contracts the batch: unreduced
  // over "x" (data parallelism). Both are local products.
  STATIC_REQUIRE(std::is_same_v<plans::lhs_plan::out_unreduced, ts::unreduced<"y">>);
  STATIC_REQUIRE(std::is_same_v<plans::rhs_plan::out_unreduced, ts::unreduced<"x">>);
  STATIC_REQUIRE(ts::communication_free<plans::lhs_plan>);
  STATIC_REQUIRE(ts::communication_free<plans::rhs_plan>);
  STATIC_REQUIRE(!ts::einsum_differentiable<"ij,jk->i", false>);
  STATIC_REQUIRE(ts::einsum_differentiable<"ij,jk->i", true>);
}

}  // namespace
