// matmul and einsum on bfloat16 arrays (float products and sums in each device's GEMM, the
// result rounded to bfloat16; partial sums all-reduced in float per element) on 2x2 and 2x4
// meshes, over random extents and several spec pairs, against a double reference on the
// same bfloat16 values; blocks' matmul inside shard_map; ts::astype between bfloat16 and
// float on arrays (unreduced ones too) and blocks; preferred_element<float> (float results
// and collectives) for matmul and einsum.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <random>
#include <type_traits>

#include <typeshard/typeshard.hpp>

#include "support/foundation.hpp"

namespace ts = typeshard;
using bf16 = ts::bfloat16;  // (OpenBLAS's headers declare a global ::bfloat16)

namespace {

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x4 = ts::mesh<ts::axis("data", 2), ts::axis("model", 4)>;
using ts::none;

ts::host_tensor<bf16, 2> random_bf16(std::size_t r, std::size_t c, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  ts::host_tensor<bf16, 2> t({r, c});
  for (bf16& v : t.values()) v = bf16(d(rng));
  return t;
}

// got (m x n) against the double product of a (m x k) and b (k x n): within bfloat16's
// rounding of the result (2^-8 relative), plus float summation and up to `partials` roundings
// of partial sums (each to 2^-8 of the sum of magnitudes).
void check_product(const ts::host_tensor<bf16, 2>& got, const ts::host_tensor<bf16, 2>& a,
                   const ts::host_tensor<bf16, 2>& b, double partials) {
  const std::size_t m = a.extent(0), k = a.extent(1), n = b.extent(1);
  REQUIRE(got.extent(0) == m);
  REQUIRE(got.extent(1) == n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double want = 0, mag = 0;
      for (std::size_t p = 0; p < k; ++p) {
        const double x = double(float(a.data()[i * k + p])) * double(float(b.data()[p * n + j]));
        want += x;
        mag += std::abs(x);
      }
      const double tol = std::ldexp(std::abs(want), -8) + (partials + 1) * std::ldexp(mag, -8);
      const double g = float(got.data()[i * n + j]);
      if (std::abs(g - want) > tol) {
        INFO("C(" << i << ", " << j << ") = " << g << ", want " << want << " +- " << tol);
        REQUIRE(std::abs(g - want) <= tol);
      }
    }
}

// One (lhs, rhs) spec pair: matmul and the same product as einsum, reduced to replicated.
template <class Mesh, class L, class R>
void check_pair(const ts::device_mesh<Mesh>& m, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::size_t> ext(1, 40);
  for (int round = 0; round < 3; ++round) {
    const std::size_t i = ext(rng), j = ext(rng) + 30 * (round == 2), k = ext(rng);
    INFO("I " << i << " J " << j << " K " << k << " lhs " << L::to_string() << " rhs "
              << R::to_string());
    const auto ha = random_bf16(i, j, rng), hb = random_bf16(j, k, rng);
    const auto a = ts::device_put<L>(m, ha);
    const auto b = ts::device_put<R>(m, hb);
    const auto c = ts::matmul(a, b);
    static_assert(std::is_same_v<typename decltype(c)::value_type, bf16>);
    using C = std::remove_cvref_t<decltype(c)>;
    check_product(ts::to_host(ts::reshard<typename C::spec>(c)), ha, hb, double(Mesh::size));
    const auto e = ts::einsum<"ij,jk->ik">(a, b);
    using E = std::remove_cvref_t<decltype(e)>;
    check_product(ts::to_host(ts::reshard<typename E::spec>(e)), ha, hb, double(Mesh::size));
    const auto r = ts::matmul<ts::spec<none, none>>(a, b);
    check_product(ts::to_host(r), ha, hb, double(Mesh::size));
  }
}

ts::host_tensor<bf16, 2> transposed(const ts::host_tensor<bf16, 2>& t) {
  ts::host_tensor<bf16, 2> out({t.extent(1), t.extent(0)});
  for (std::size_t i = 0; i < t.extent(0); ++i)
    for (std::size_t j = 0; j < t.extent(1); ++j) out(j, i) = t(i, j);
  return out;
}

}  // namespace

TEST_CASE("bfloat16 matmul and einsum agree with a double reference on 2x2 and 2x4",
          "[bf16][matmul]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_2x2> m4{devices};
  check_pair<mesh_2x2, ts::spec<"x", none>, ts::spec<none, "y">>(m4, rng);    // no comm
  check_pair<mesh_2x2, ts::spec<none, "x">, ts::spec<"x", "y">>(m4, rng);     // unreduced x
  check_pair<mesh_2x2, ts::spec<"x", "y">, ts::spec<"x", "y">>(m4, rng);      // gathers
  ts::device_mesh<mesh_2x4> m8{devices};
  check_pair<mesh_2x4, ts::spec<"data", "model">, ts::spec<"model", none>>(m8, rng);
  check_pair<mesh_2x4, ts::spec<none, ts::axes("data", "model")>,
             ts::spec<ts::axes("data", "model"), none>>(m8, rng);
}

TEST_CASE("bfloat16 blocks: matmul inside shard_map; astype on arrays and blocks",
          "[bf16][astype]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto ha = random_bf16(6, 20, rng), hb = random_bf16(20, 8, rng);
  const auto a = ts::device_put<ts::spec<"x", none>>(m, ha);
  const auto b = ts::device_put<ts::spec<none, none>>(m, hb);
  // Local products of row blocks: no communication.
  const auto f = ts::shard_map<mesh_2x2, ts::specs<ts::spec<"x", none>, ts::spec<none, none>>,
                               ts::spec<"x", none>>(
      [](const auto& x, const auto& w) { return ts::matmul(x, w); });
  check_product(ts::to_host(f(a, b)), ha, hb, 0);

  // astype: bfloat16 -> float exact, float -> bfloat16 nearest even; unreduced kept.
  const auto wide = ts::astype<float>(a);
  static_assert(std::is_same_v<typename decltype(wide)::value_type, float>);
  static_assert(std::is_same_v<typename decltype(wide)::spec, ts::spec<"x", none>>);
  const auto hw = ts::to_host(wide);
  for (std::size_t i = 0; i < hw.size(); ++i) REQUIRE(hw.data()[i] == float(ha.data()[i]));
  const auto thirds = ts::map(wide, [](float v) { return v / 3.0f; });
  const auto narrow = ts::to_host(ts::astype<bf16>(thirds));
  const auto ht = ts::to_host(thirds);
  for (std::size_t i = 0; i < ht.size(); ++i) REQUIRE(narrow.data()[i] == bf16(ht.data()[i]));
  CHECK(ts::to_host(ts::astype<bf16>(a)) == ha);  // same type: unchanged

  const auto u = ts::matmul(ts::device_put<ts::spec<none, "y">>(m, ha),
                            ts::device_put<ts::spec<"y", none>>(m, hb));  // unreduced over y
  const auto uw = ts::astype<float>(u);
  static_assert(std::is_same_v<typename decltype(uw)::unreduced_type,
                               typename decltype(u)::unreduced_type>);
  static_assert(!decltype(uw)::unreduced_type::empty);

  const auto g = ts::shard_map<mesh_2x2, ts::spec<"x", none>, ts::spec<"x", none>>(
      [](const auto& x) { return ts::astype<float>(x); });
  const auto hg = ts::to_host(g(a));
  static_assert(std::is_same_v<typename decltype(hg)::value_type, float>);
  CHECK(hg == hw);
}

TEST_CASE("matmul and einsum with preferred_element<float> on bfloat16: float results",
          "[bf16][matmul]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_2x4> m{devices};
  for (int round = 0; round < 3; ++round) {
    std::uniform_int_distribution<std::size_t> ext(1, 50);
    const std::size_t i = ext(rng), j = ext(rng), k = ext(rng);
    INFO("I " << i << " J " << j << " K " << k);
    const auto ha = random_bf16(i, j, rng), hb = random_bf16(j, k, rng);
    const auto a = ts::device_put<ts::spec<"data", "model">>(m, ha);
    const auto b = ts::device_put<ts::spec<"model", none>>(m, hb);
    // The same plan as the bfloat16 matmul (unreduced over model), in float.
    const auto u = ts::matmul(a, b, ts::preferred_element<float>);
    using U = std::remove_cvref_t<decltype(u)>;
    static_assert(std::is_same_v<typename U::value_type, float>);
    static_assert(std::is_same_v<typename U::unreduced_type, ts::unreduced<"model">>);
    const auto r = ts::matmul<ts::spec<none, none>>(a, b, ts::preferred_element<float>);
    const auto s = ts::matmul<ts::spec<"data", none>>(a, b, ts::preferred_element<float>);
    // Against the float product of the widened operands: float sums in both.
    const auto want = ts::to_host(ts::matmul<ts::spec<none, none>>(ts::astype<float>(a),
                                                                   ts::astype<float>(b)));
    const auto eu = ts::einsum<"ij,jk->ik">(a, b, ts::preferred_element<float>);
    static_assert(std::is_same_v<decltype(eu), decltype(u)>);
    const auto er = ts::einsum<"ij,jk->ik", ts::spec<none, none>>(a, b, ts::preferred_element<float>);
    // "ji,jk->ik" on a transposed copy: the swapped-output and transposed-operand paths.
    const auto at = ts::device_put<ts::spec<"model", "data">>(m, transposed(ha));
    const auto et = ts::einsum<"ji,jk->ik", ts::spec<none, none>>(at, b, ts::preferred_element<float>);
    for (const auto& got : {ts::to_host(ts::reshard<ts::spec<none, none>>(u)), ts::to_host(r),
                            ts::to_host(s), ts::to_host(ts::reshard<ts::spec<none, none>>(eu)),
                            ts::to_host(er), ts::to_host(et)})
      for (std::size_t e = 0; e < got.size(); ++e) {
        double mag = 0;
        for (std::size_t p = 0; p < j; ++p)
          mag += std::abs(double(float(ha.data()[e / k * j + p])) *
                          double(float(hb.data()[p * k + e % k])));
        REQUIRE(std::abs(double(got.data()[e]) - double(want.data()[e])) <=
                (double(j) + 8) * std::ldexp(mag, -23));
      }
    // Same element type: plain matmul.
    static_assert(std::is_same_v<decltype(ts::matmul(a, b, ts::preferred_element<bf16>)),
                                 decltype(ts::matmul(a, b))>);
  }
}

TEST_CASE("mixed precision: a float master copy updated by SGD and Adam from bfloat16 gradients",
          "[bf16][optim]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_2x4> m{devices};
  // A bfloat16 "gradient" unreduced over data: the product of blocks that shard J over it.
  const auto hx = random_bf16(16, 10, rng), hy = random_bf16(10, 12, rng);
  const auto g = ts::matmul(ts::device_put<ts::spec<none, "data">>(m, hx),
                            ts::device_put<ts::spec<"data", none>>(m, hy));
  using G = std::remove_cvref_t<decltype(g)>;
  static_assert(std::is_same_v<typename G::value_type, bf16>);
  static_assert(std::is_same_v<typename G::unreduced_type, ts::unreduced<"data">>);
  static_assert(std::is_same_v<typename G::spec, ts::spec<none, none>>);
  ts::host_tensor<float, 2> hw({16, 12});
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (float& v : hw.values()) v = d(rng);
  const auto w = ts::device_put<typename G::spec>(m, hw);  // the float master copy
  using shard = ts::spec<"data", none>;

  // SGD: exactly w - lr * float(the bfloat16 sum over data) (2 members: one rounding, the
  // same in the reduce-scatter and in a psum).
  const auto reduced = ts::to_host(ts::reshard<typename G::spec>(g));
  ts::communication_recorder rec_bf16;
  const auto w1 = ts::zero_sgd_update<shard>(w, g, 0.25f);
  const std::size_t bytes_bf16 = rec_bf16.report().bytes_received();
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(w1)>, std::remove_cvref_t<decltype(w)>>);
  const auto h1 = ts::to_host(w1);
  for (std::size_t i = 0; i < h1.size(); ++i)
    REQUIRE(h1.data()[i] == hw.data()[i] - 0.25f * float(reduced.data()[i]));
  // The gradient's reduction moved bfloat16: the same step on the widened gradient (float
  // partial sums) receives more, by exactly half the reduction's bytes.
  const auto g32 = ts::astype<float>(g);
  ts::communication_recorder rec_f32;
  (void)ts::zero_sgd_update<shard>(w, g32, 0.25f);
  const ts::communication_report r32 = rec_f32.report();
  std::size_t rs_bytes = 0;  // the gradient's reduce-scatter, over data
  for (const auto& c : r32.collectives())
    if (c.name() == "psum_scatter") rs_bytes += c.bytes_received;
  CHECK(rs_bytes > 0);
  CHECK(r32.bytes_received() - bytes_bf16 == rs_bytes / 2);

  // Adam on the bfloat16 gradient equals Adam on its exact float widening of the reduced sum.
  auto s_bf16 = ts::zero_adam_init<shard>(w);
  auto s_f32 = ts::zero_adam_init<shard>(w);
  const auto wide = ts::device_put<typename G::spec>(m, [&] {
    ts::host_tensor<float, 2> t({16, 12});
    for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = float(reduced.data()[i]);
    return t;
  }());
  auto a = w, b = w;
  for (int step = 0; step < 2; ++step) {
    a = ts::zero_adam_update(a, g, s_bf16, {.lr = 0.01});
    b = ts::zero_adam_update(b, wide, s_f32, {.lr = 0.01});
  }
  CHECK(ts::to_host(a) == ts::to_host(b));
}
