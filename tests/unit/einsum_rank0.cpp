// An einsum whose output has no letters gives a rank-0 array (issue 35 item 5, as jnp.einsum
// does), and an operand may be rank 0 (",i->i"):
//   - arrays: "i,i->" (a dot product), "ij,ij->" and "ij,j->" (a summed letter too) on random
//     extents (even and uneven), 1d and 2d meshes, both operands sharded alike, over different
//     axes, one sharded, both replicated; the result's type (rank 0, spec<>, unreduced over the
//     contracted letters' axes until resharded, as ts::sum<> leaves it) and its value against
//     a serial loop; a named output spec<> (the psum in the plan);
//   - a rank-0 operand: ",i->i" and "i,->i" (a scaling) against a serial loop;
//   - traced values: ts::value_and_grad of a loss written as a dot product, against finite
//     differences and the replicated run (grad_check.hpp).
// Blocks have no einsum (ts::matmul only), so nothing to test there.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <type_traits>

#include <typeshard/typeshard.hpp>

#include "grad_check.hpp"

namespace {

namespace ts = typeshard;
using ts::none;
using grad_test::check_gradients;
using grad_test::random_tensor;
using mesh_4 = ts::mesh<ts::axis("x", 4)>;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

template <std::size_t R>
ts::host_tensor<double, R> integers(const ts::shape<R>& s, std::mt19937_64& rng) {
  ts::host_tensor<double, R> t(s);
  std::uniform_int_distribution<int> v(-9, 9);  // exact sums in any order
  for (double& e : t.values()) e = v(rng);
  return t;
}

// The rank-0 result y of an einsum: its type, and its value (after the psum of its
// unreduced axes) equal to `want`.
template <class Unreduced, class Y>
void check_scalar(const Y& y, double want) {
  static_assert(Y::rank == 0);
  static_assert(std::is_same_v<typename Y::spec, ts::spec<>>);
  static_assert(std::is_same_v<typename Y::extents_type, ts::extents<>>);
  static_assert(std::is_same_v<typename Y::unreduced_type, Unreduced>);
  const auto r = ts::reshard<ts::spec<>>(y);
  CHECK(r.item() == want);
  const ts::host_tensor<double, 0> h = ts::to_host(r);
  CHECK(h() == want);
}

// "i,i->" of vectors of n elements, sharded by SA and SB; the result unreduced over U (void:
// over what the plan says, for operands over different axes: the cheaper is gathered).
template <class SA, class SB, class U, class Mesh>
void check_dot(const ts::device_mesh<Mesh>& m, std::size_t n, std::mt19937_64& rng) {
  INFO("dot of " << n << " elements, " << SA::to_string() << " . " << SB::to_string());
  const auto u = integers<1>({n}, rng);
  const auto v = integers<1>({n}, rng);
  double want = 0;
  for (std::size_t i = 0; i < n; ++i) want += u(i) * v(i);
  const auto U_ = ts::device_put<SA>(m, u);
  const auto V_ = ts::device_put<SB>(m, v);
  using plan = ts::einsum_plan_for<"i,i->", decltype(U_), decltype(V_)>;
  using partial = std::conditional_t<std::is_void_v<U>, typename plan::out_unreduced, U>;
  static_assert(plan::result_rank == 0 && plan::rank == 1);
  check_scalar<partial>(ts::einsum<"i,i->">(U_, V_), want);
  // With the output spec named, the plan ends with the psum: replicated, nothing unreduced.
  const auto R = ts::einsum<"i,i->", ts::spec<>>(U_, V_);
  check_scalar<ts::unreduced<>>(R, want);
}

// "ij,ij->" (every letter contracting) and "ij,j->" (i summed in lhs) of r x c matrices.
template <class SA, class SB, class U, class Mesh>
void check_matrices(const ts::device_mesh<Mesh>& m, std::size_t r, std::size_t c,
                    std::mt19937_64& rng) {
  INFO(r << " x " << c << ", " << SA::to_string() << " . " << SB::to_string());
  const auto a = integers<2>({r, c}, rng);
  const auto b = integers<2>({r, c}, rng);
  const auto v = integers<1>({c}, rng);
  double frobenius = 0, summed = 0;
  for (std::size_t i = 0; i < r; ++i)
    for (std::size_t j = 0; j < c; ++j) {
      frobenius += a(i, j) * b(i, j);
      summed += a(i, j) * v(j);
    }
  const auto A = ts::device_put<SA>(m, a);
  check_scalar<U>(ts::einsum<"ij,ij->">(A, ts::device_put<SB>(m, b)), frobenius);
  check_scalar<ts::unreduced<>>(
      ts::einsum<"ij,j->", ts::spec<>>(A, ts::device_put<ts::spec<none>>(m, v)), summed);
}

TEST_CASE("einsum with an empty output: a rank-0 array, random extents, 1d and 2d meshes",
          "[einsum][rank0]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_4> m1{devices};
  const ts::device_mesh<mesh_2x2> m2{devices};
  std::mt19937_64 rng(35);
  std::uniform_int_distribution<std::size_t> extent(1, 13);
  for (int round = 0; round < 6; ++round) {
    const std::size_t n = extent(rng), r = extent(rng), c = extent(rng);
    // 1d mesh: sharded alike (local products, unreduced over x), one sharded (gathered),
    // replicated.
    check_dot<ts::spec<"x">, ts::spec<"x">, ts::unreduced<"x">>(m1, n, rng);
    check_dot<ts::spec<"x">, ts::spec<none>, ts::unreduced<>>(m1, n, rng);
    check_dot<ts::spec<none>, ts::spec<"x">, ts::unreduced<>>(m1, n, rng);
    check_dot<ts::spec<none>, ts::spec<none>, ts::unreduced<>>(m1, n, rng);
    // 2d mesh: over two axes alike, over different axes (one operand gathered).
    check_dot<ts::spec<ts::axes("x", "y")>, ts::spec<ts::axes("x", "y")>,
              ts::unreduced<"x", "y">>(m2, n, rng);
    check_dot<ts::spec<"y">, ts::spec<"y">, ts::unreduced<"y">>(m2, n, rng);
    check_dot<ts::spec<"x">, ts::spec<"y">, void>(m2, n, rng);
    check_matrices<ts::spec<"x", "y">, ts::spec<"x", "y">, ts::unreduced<"x", "y">>(m2, r, c,
                                                                                      rng);
    check_matrices<ts::spec<"x", none>, ts::spec<none, "y">, ts::unreduced<>>(m2, r, c, rng);
    check_matrices<ts::spec<none, none>, ts::spec<"y", none>, ts::unreduced<>>(m2, r, c, rng);
  }
}

TEST_CASE("einsum with a rank-0 operand: a scaling", "[einsum][rank0]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  std::mt19937_64 rng(5);
  for (std::size_t n : {1u, 6u, 11u}) {
    const auto v = integers<1>({n}, rng);
    const auto w = integers<2>({3, 4}, rng);
    // a rank-0 array: the psum'd sum of w (every rank holds it)
    double s = 0;
    for (double e : w.values()) s += e;
    const auto S = ts::reshard<ts::spec<>>(ts::sum<>(ts::device_put<ts::spec<"x", "y">>(m, w)));
    const auto V = ts::device_put<ts::spec<"y">>(m, v);
    const auto left = ts::einsum<",i->i">(S, V);
    const auto right = ts::einsum<"i,->i">(V, S);
    static_assert(std::is_same_v<decltype(left)::spec, ts::spec<"y">>);
    static_assert(std::is_same_v<decltype(right)::spec, ts::spec<"y">>);
    const auto hl = ts::to_host(left);
    const auto hr = ts::to_host(right);
    for (std::size_t i = 0; i < n; ++i) {
      CHECK(hl(i) == s * v(i));
      CHECK(hr(i) == s * v(i));
    }
  }
}

TEST_CASE("einsum with an empty output: value_and_grad of a dot-product loss", "[grad][rank0]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  // The loss written as a dot product: rank 0 without a reduction op.
  const auto dot = [](auto w, auto x) { return ts::einsum<"i,i->">(ts::sin(w), x); };
  // A quadratic form x^T W x, both contractions einsums, the last with an empty output.
  const auto form = [](auto w, auto x) {
    const auto y = ts::einsum<"ij,j->i">(w, x);
    return ts::einsum<"i,i->">(ts::reshard<typename decltype(y)::spec>(y), x);
  };
  for (unsigned seed : {1u, 2u}) {
    const auto w = random_tensor(ts::shape<1>{10}, seed);
    const auto x = random_tensor(ts::shape<1>{10}, seed + 10);
    check_gradients<ts::spec<"x">, ts::spec<"x">>("dot, both over x", dot, m, w, x);
    check_gradients<ts::spec<"y">, ts::spec<none>>("dot, one sharded", dot, m, w, x);
    check_gradients<ts::spec<none>, ts::spec<none>>("dot, replicated", dot, m, w, x);
    const auto W = random_tensor(ts::shape<2>{6, 6}, seed + 20);
    const auto v = random_tensor(ts::shape<1>{6}, seed + 30);
    check_gradients<ts::spec<"x", "y">, ts::spec<"y">>("quadratic form", form, m, W, v);
  }
  // The loss is rank 0 and unreduced over x until resharded; item() reads it once reduced.
  const auto [l, g] = ts::value_and_grad(dot)(
      ts::device_put<ts::spec<"x">>(m, random_tensor(ts::shape<1>{8}, 3)),
      ts::device_put<ts::spec<"x">>(m, random_tensor(ts::shape<1>{8}, 4)));
  using L = std::remove_cvref_t<decltype(l)>;
  static_assert(L::rank == 0 && std::is_same_v<L::unreduced_type, ts::unreduced<"x">>);
  CHECK(std::isfinite(ts::reshard<ts::spec<>>(l).item()));
  static_assert(std::remove_cvref_t<decltype(g)>::rank == 1);
}

}  // namespace
