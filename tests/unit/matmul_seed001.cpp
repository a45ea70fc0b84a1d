// Seed 001 section 3: the four sharded-matmul cases on the 2x2 mesh, through ts::matmul,
// with the notebook's matrices (A = arange(16).reshape(4, 4), B = arange(16, 32)...) and
// its numbers: C[:2, :2] = [[152, 158], [504, 526]], plus the whole product against a serial
// loop, the plans the notebook describes, and the shards each device holds.
#include <typeshard/typeshard.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <type_traits>

namespace {

namespace ts = typeshard;
using ts::none;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

struct seed001 {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> mesh{devices};
  ts::host_tensor<float, 2> a = ts::reshape<2>(ts::arange<float>(16), {4, 4});
  ts::host_tensor<float, 2> b{{4, 4}};
  ts::host_tensor<float, 2> expected{{4, 4}};

  seed001() {
    for (std::size_t i = 0; i < 16; ++i) b.data()[i] = float(16 + i);
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t k = 0; k < 4; ++k)
        for (std::size_t j = 0; j < 4; ++j) expected(i, k) += a(i, j) * b(j, k);
  }
};

template <class C>
void check_product(const C& c, const ts::host_tensor<float, 2>& expected) {
  const ts::host_tensor<float, 2> got = ts::to_host(c);
  CHECK(got == expected);
  // The notebook's printout of C[:2, :2].
  CHECK(got(0, 0) == 152.0f);
  CHECK(got(0, 1) == 158.0f);
  CHECK(got(1, 0) == 504.0f);
  CHECK(got(1, 1) == 526.0f);
}

}  // namespace

TEST_CASE_METHOD(seed001, "seed 001 case 1: no sharded contracting dimension, no collective", "[matmul][seed]") {
  auto A = ts::device_put<ts::spec<"x", none>>(mesh, a);
  auto B = ts::device_put<ts::spec<none, "y">>(mesh, b);
  auto C = ts::matmul(A, B);
  static_assert(std::is_same_v<decltype(C)::spec, ts::spec<"x", "y">>);
  using plan = ts::matmul_plan_for<decltype(A), decltype(B)>;
  static_assert(ts::communication_free<plan>);
  CHECK(plan::describe() == "local gemm");
  check_product(C, expected);
  // "TPU 0 TPU 1 TPU 2 TPU 3": each device one 2x2 block.
  for (const auto& s : C.addressable_shards()) CHECK(s.shape == ts::shape<2>{2, 2});
}

TEST_CASE_METHOD(seed001, "seed 001 case 2: J sharded in one operand, all_gather it", "[matmul][seed]") {
  auto A = ts::device_put<ts::spec<none, "x">>(mesh, a);
  auto B = ts::device_put<ts::spec<none, none>>(mesh, b);
  auto C = ts::matmul(A, B);
  static_assert(std::is_same_v<decltype(C)::spec, ts::spec<none, none>>);
  using plan = ts::matmul_plan_for<decltype(A), decltype(B)>;
  static_assert(!ts::communication_free<plan>);
  CHECK(plan::describe() == "all_gather(lhs, dim 1, over x); local gemm");
  // "Before all-gather, A_shard shape: (4, 2)" / "Result C (replicated on all devices)".
  for (const auto& s : A.addressable_shards()) CHECK(s.shape == ts::shape<2>{4, 2});
  for (const auto& s : C.addressable_shards()) CHECK(s.shape == ts::shape<2>{4, 4});
  check_product(C, expected);
}

TEST_CASE_METHOD(seed001, "seed 001 case 3: J sharded in both, unreduced, then psum or psum_scatter", "[matmul][seed]") {
  auto A = ts::device_put<ts::spec<none, "x">>(mesh, a);
  auto B = ts::device_put<ts::spec<"x", none>>(mesh, b);

  auto U = ts::matmul(A, B);  // C{U_x}: the type says it is a partial sum
  static_assert(std::is_same_v<decltype(U)::unreduced_type, ts::unreduced<"x">>);
  CHECK(ts::matmul_plan_for<decltype(A), decltype(B)>::describe() == "local gemm");
  // "Device 0: A[:, 0:2] @ B[0:2, :] = partial result": x = 0 holds the sum over j < 2.
  for (const auto& s : U.addressable_shards()) {
    const std::size_t x = mesh_2x2::coordinates(s.mesh_position)[0];
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t k = 0; k < 4; ++k) {
        float partial = 0;
        for (std::size_t j = 2 * x; j < 2 * x + 2; ++j) partial += a(i, j) * b(j, k);
        CHECK(s.data[i * 4 + k] == partial);
      }
  }
  check_product(ts::reshard<ts::spec<none, none>>(U), expected);

  auto R = ts::matmul<ts::spec<none, none>>(A, B);
  CHECK(ts::matmul_plan_for<decltype(A), decltype(B), ts::spec<none, none>>::describe() ==
        "local gemm; psum(out, over x)");
  check_product(R, expected);

  auto S = ts::matmul<ts::spec<"x", none>>(A, B);
  CHECK(ts::matmul_plan_for<decltype(A), decltype(B), ts::spec<"x", none>>::describe() ==
        "local gemm; psum_scatter(out, dim 0, over x)");
  for (const auto& s : S.addressable_shards()) CHECK(s.shape == ts::shape<2>{2, 4});
  check_product(S, expected);
}

TEST_CASE_METHOD(seed001, "seed 001 case 4: I and K over the same axis, the output spec decides", "[matmul][seed]") {
  auto A = ts::device_put<ts::spec<"x", none>>(mesh, a);
  auto B = ts::device_put<ts::spec<none, "x">>(mesh, b);
  // Option 1, all-gather B: "Before all-gather: A=(2, 4), B=(4, 2)", result rows over x.
  auto C = ts::matmul<ts::spec<"x", none>>(A, B);
  CHECK(ts::matmul_plan_for<decltype(A), decltype(B), ts::spec<"x", none>>::describe() ==
        "all_gather(rhs, dim 1, over x); local gemm");
  for (const auto& s : C.addressable_shards()) CHECK(s.shape == ts::shape<2>{2, 4});
  check_product(C, expected);
  // Option 2, all-gather A: result columns over x.
  auto C_alt = ts::matmul<ts::spec<none, "x">>(A, B);
  CHECK(ts::matmul_plan_for<decltype(A), decltype(B), ts::spec<none, "x">>::describe() ==
        "all_gather(lhs, dim 0, over x); local gemm");
  for (const auto& s : C_alt.addressable_shards()) CHECK(s.shape == ts::shape<2>{4, 2});
  check_product(C_alt, expected);
}
