// ts::matmul through its typed API: batched products (seed 004's shape, scaled down), random
// real-valued data against a serial GEMM within a stated tolerance, static extents in the
// result type, the typed plan equal to the planner's run-time answer, and the run-time
// errors (J or batch extents that differ, operands on different devices).
#include <typeshard/typeshard.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>

namespace {

namespace ts = typeshard;
using ts::none;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_8 = ts::mesh<ts::axis("batch", 8)>;

template <class T, std::size_t R>
ts::host_tensor<T, R> random_tensor(const ts::shape<R>& s, std::mt19937_64& rng) {
  ts::host_tensor<T, R> t(s);
  std::uniform_real_distribution<T> d(T(-1), T(1));
  for (T& v : t.values()) v = d(rng);
  return t;
}

// Compares got with the serial product of a and b (batched over the leading dimensions):
// |got - ref| <= 8 * J * eps * sum_j |a_ij b_jk|, the forward error bound of a length-J dot
// product with slack for the reduction order of psum.
template <class T, std::size_t R>
std::string compare_with_serial(const ts::host_tensor<T, R>& got, const ts::host_tensor<T, R>& a,
                                const ts::host_tensor<T, R>& b) {
  const std::size_t I = a.extent(R - 2), J = a.extent(R - 1), K = b.extent(R - 1);
  std::size_t batches = 1;
  for (std::size_t d = 0; d + 2 < R; ++d) batches *= a.extent(d);
  const long double eps = std::numeric_limits<T>::epsilon();
  for (std::size_t t = 0; t < batches; ++t)
    for (std::size_t i = 0; i < I; ++i)
      for (std::size_t k = 0; k < K; ++k) {
        long double ref = 0, mag = 0;
        for (std::size_t j = 0; j < J; ++j) {
          const long double p = (long double)a.data()[(t * I + i) * J + j] * b.data()[(t * J + j) * K + k];
          ref += p;
          mag += std::fabs(p);
        }
        const T g = got.data()[(t * I + i) * K + k];
        if (!(std::fabs(g - ref) <= 8 * (J + 1) * eps * mag))
          return "batch " + std::to_string(t) + " C(" + std::to_string(i) + "," + std::to_string(k) +
                 ") = " + std::to_string(g) + ", expected " + std::to_string((double)ref);
      }
  return {};
}

}  // namespace

TEST_CASE("matmul: seed 004's batched product with the batch sharded, no communication", "[matmul]") {
  // 8 x 4096 x 4096 in the seed; 8 x 48 x 48 here (the benchmark runs the real size).
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_8> mesh{devices};
  std::mt19937_64 rng(4);
  const auto x = random_tensor<float, 3>({8, 48, 48}, rng);
  auto X = ts::device_put<ts::spec<"batch">, ts::extents<8, 48, 48>>(mesh, x);
  auto Y = ts::matmul(X, X);
  using plan = ts::matmul_plan_for<decltype(X), decltype(X)>;
  static_assert(ts::communication_free<plan>);
  static_assert(std::is_same_v<decltype(Y)::spec, ts::spec<"batch", none, none>>);
  static_assert(std::is_same_v<decltype(Y)::extents_type, ts::extents<8, 48, 48>>);
  static_assert(plan::flops_per_device == 2.0 * 48 * 48 * 48);
  for (const auto& s : Y.addressable_shards()) CHECK(s.shape == ts::shape<3>{1, 48, 48});
  const std::string err = compare_with_serial(ts::to_host(Y), x, x);
  INFO(err);
  CHECK(err.empty());
}

TEST_CASE("matmul: random shapes and specs with real-valued data, within the error bound", "[matmul]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> mesh{devices};
  const std::uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> ext(1, 40);
  for (int trial = 0; trial < 10; ++trial) {
    const std::size_t I = ext(rng), J = ext(rng), K = ext(rng);
    INFO("seed " << seed << " trial " << trial << ": " << I << "x" << J << " . " << J << "x" << K);
    const auto a = random_tensor<float, 2>({I, J}, rng);
    const auto b = random_tensor<float, 2>({J, K}, rng);
    auto check = [&](const auto& c) {
      const std::string err = compare_with_serial(ts::to_host(c), a, b);
      INFO(err);
      CHECK(err.empty());
    };
    // One of each case, dynamic extents (uneven shards whenever the random extents are odd).
    auto A1 = ts::device_put<ts::spec<"x", none>>(mesh, a);
    auto B1 = ts::device_put<ts::spec<none, "y">>(mesh, b);
    check(ts::matmul(A1, B1));
    auto A2 = ts::device_put<ts::spec<none, ts::axes("x", "y")>>(mesh, a);
    auto B2 = ts::device_put<ts::spec<ts::axes("x", "y"), none>>(mesh, b);
    check(ts::matmul<ts::spec<none, none>>(A2, B2));
    check(ts::matmul<ts::spec<"y", "x">>(A2, B2));
    check(ts::reshard<ts::spec<none, none>>(ts::matmul(A2, B2)));
    auto B3 = ts::device_put<ts::spec<none, "x">>(mesh, b);
    check(ts::matmul<ts::spec<"x", none>>(A1, B3));
    auto A4 = ts::device_put<ts::spec<"y", "x">>(mesh, a);
    auto B4 = ts::device_put<ts::spec<"y", none>>(mesh, b);
    check(ts::reshard<ts::spec<none, none>>(ts::matmul(A4, B4)));
  }
}

TEST_CASE("matmul: double, rank 3 on the 2x2 mesh, batch over x and J over y", "[matmul]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> mesh{devices};
  std::mt19937_64 rng(7);
  const auto a = random_tensor<double, 3>({4, 9, 10}, rng);
  const auto b = random_tensor<double, 3>({4, 10, 7}, rng);
  auto A = ts::device_put<ts::spec<"x", none, "y">>(mesh, a);
  auto B = ts::device_put<ts::spec<"x", "y", none>>(mesh, b);
  auto U = ts::matmul(A, B);
  static_assert(std::is_same_v<decltype(U)::unreduced_type, ts::unreduced<"y">>);
  static_assert(std::is_same_v<decltype(U)::spec, ts::spec<"x", none, none>>);
  const std::string err = compare_with_serial(ts::to_host(ts::reshard<ts::spec<"x">>(U)), a, b);
  INFO(err);
  CHECK(err.empty());
  const std::string err2 =
      compare_with_serial(ts::to_host(ts::matmul<ts::spec<"x", "y", none>>(A, B)), a, b);
  INFO(err2);
  CHECK(err2.empty());
}

TEST_CASE("matmul: the typed plan is the planner's answer for the nominal extents", "[matmul]") {
  using plan = ts::matmul_plan<mesh_2x2, ts::spec<none, "x">, ts::spec<"y", none>, ts::spec<"x", none>>;
  const auto c = ts::detail::plan_matmul<mesh_2x2, 2>(
      ts::detail::spec_array_of<ts::spec<none, "x">, 2>(), ts::detail::spec_array_of<ts::spec<"y", none>, 2>(),
      true, ts::detail::spec_array_of<ts::spec<"x", none>, 2>(),
      ts::detail::einsum_shapes<2>{{4096, 4096}, {4096, 4096}, sizeof(float)});
  CHECK(c.lhs_gemm == plan::choice.lhs_gemm);
  CHECK(c.rhs_gemm == plan::choice.rhs_gemm);
  CHECK(c.out == plan::choice.out);
  CHECK(plan::bytes_moved({4096, 4096}, {4096, 4096}) ==
        ts::detail::einsum_cost_of<mesh_2x2>(ts::detail::matmul_equation<2>(), c,
                                             {{4096, 4096}, {4096, 4096}, sizeof(float)})
            .bytes);
}

TEST_CASE("matmul: run-time errors name the extents and the devices", "[matmul]") {
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_2x2> mesh{devices};
  ts::device_mesh<mesh_2x2> other{devices, {4, 5, 6, 7}};
  const ts::host_tensor<float, 2> a({4, 6}), b({5, 4}), b_ok({6, 4});
  auto A = ts::device_put<ts::spec<"x", none>>(mesh, a);
  auto B = ts::device_put<ts::spec<none, "y">>(mesh, b);
  CHECK_THROWS_AS(ts::matmul(A, B), ts::shape_error);
  CHECK_THROWS_WITH(ts::matmul(A, B), Catch::Matchers::Contains("lhs has 6 columns") &&
                                          Catch::Matchers::Contains("rhs has 5 rows") &&
                                          Catch::Matchers::StartsWith("typeshard: "));
  auto B_other = ts::device_put<ts::spec<none, "y">>(other, b_ok);
  CHECK_THROWS_AS(ts::matmul(A, B_other), ts::device_mesh_error);
  CHECK_THROWS_WITH(ts::matmul(A, B_other), Catch::Matchers::Contains("different devices"));
  const ts::host_tensor<float, 3> x({2, 4, 4}), y({3, 4, 4});
  auto X = ts::device_put<ts::spec<"x">>(mesh, x);
  auto Y = ts::device_put<ts::spec<"x">>(mesh, y);
  CHECK_THROWS_AS(ts::matmul(X, Y), ts::shape_error);
  CHECK_THROWS_WITH(ts::matmul(X, Y), Catch::Matchers::Contains("batch dimension 0 has extent 2 in lhs but 3"));
  // The inputs are untouched and still usable.
  auto C = ts::matmul(A, ts::device_put<ts::spec<none, "y">>(mesh, b_ok));
  CHECK(ts::to_host(C).extents() == ts::shape<2>{4, 4});
}
