// A batch letter sharded in one operand only (DESIGN rule 2): the result keeps the sharded
// side's entry and the whole operand is sliced locally, with no communication, as
// broadcasting does (rule 5). Property test over random extents (even and uneven blocks) on
// a 1-d mesh (4) and a 2-d mesh (2, 2), through the public entry points:
//   - ts::einsum and ts::matmul on arrays: the result's spec and unreduced axes, the
//     collectives a communication_recorder sees (none where the plan has none), and the
//     values, equal to a serial einsum on the same (integer-valued) data;
//   - the same products on traced values: ts::value_and_grad's loss and gradients equal the
//     replicated (serial) run's and central finite differences (grad_check.hpp), so the
//     whole operand's gradient, computed sharded along the batch letter, is reassembled;
//   - traced ts::matmul runs the array ts::matmul's plan forward (its collectives, block for
//     block), with preferred_element too (bfloat16 copies, float gradients, exact).
// Traced and array calls accept the same operands: every traced case here (named output
// specs included) is the array case beside it; tests/compile_fail/
// rule2_traced_matmul_batch_specs_differ.cpp checks the refusal (over different axes).
// Compiled at -O0 with the other grad_* tests (tests/CMakeLists.txt).
#include "grad_check.hpp"

#include <array>
#include <cstddef>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>

namespace {

using namespace grad_test;
using ts::none;

using mesh_4 = ts::mesh<ts::axis("x", 4)>;

// The letters of part 0 (lhs), 1 (rhs) or 2 (output) of "lhs,rhs->out".
constexpr std::string_view part(std::string_view s, int which) {
  const std::size_t comma = s.find(','), arrow = s.find("->");
  if (which == 0) return s.substr(0, comma);
  if (which == 1) return s.substr(comma + 1, arrow - comma - 1);
  return s.substr(arrow + 2);
}

// Random extents per letter (4 to 9: blocks even or uneven over axes of 2 and 4).
struct letter_extents {
  std::array<std::size_t, 128> of{};
  explicit letter_extents(std::mt19937& rng) {
    std::uniform_int_distribution<std::size_t> u(4, 9);
    for (std::size_t& e : of) e = u(rng);
  }
  template <std::size_t Rank>
  ts::shape<Rank> shape_of(std::string_view letters) const {
    ts::shape<Rank> s{};
    for (std::size_t d = 0; d < Rank; ++d) s[d] = of[static_cast<unsigned char>(letters[d])];
    return s;
  }
};

template <class T, std::size_t Rank>
ts::host_tensor<T, Rank> random_integers(const ts::shape<Rank>& s, std::mt19937& rng) {
  ts::host_tensor<T, Rank> t(s);
  std::uniform_int_distribution<int> u(-3, 3);
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<T>(u(rng));
  return t;
}

// Row-major offset of the element of `letters` at the letters' current indices.
inline std::size_t offset_of(std::string_view letters, const letter_extents& ext,
                             const std::array<std::size_t, 128>& at) {
  std::size_t o = 0;
  for (char c : letters) {
    const auto l = static_cast<unsigned char>(c);
    o = o * ext.of[l] + at[l];
  }
  return o;
}

// The serial einsum: every index combination of the equation's letters, summed in double.
template <class T, std::size_t RA, std::size_t RB, std::size_t RC>
ts::host_tensor<double, RC> serial_einsum(std::string_view s, const letter_extents& ext,
                                          const ts::host_tensor<T, RA>& a,
                                          const ts::host_tensor<T, RB>& b) {
  const std::string_view la = part(s, 0), lb = part(s, 1), lc = part(s, 2);
  std::string letters(la);
  for (char c : lb)
    if (letters.find(c) == std::string::npos) letters += c;
  ts::host_tensor<double, RC> c(ext.shape_of<RC>(lc));
  for (std::size_t i = 0; i < c.size(); ++i) c.data()[i] = 0;
  std::array<std::size_t, 128> at{};
  while (true) {
    c.data()[offset_of(lc, ext, at)] += double(a.data()[offset_of(la, ext, at)]) *
                                        double(b.data()[offset_of(lb, ext, at)]);
    std::size_t k = letters.size();
    while (k-- > 0) {
      const auto l = static_cast<unsigned char>(letters[k]);
      if (++at[l] < ext.of[l]) break;
      at[l] = 0;
    }
    if (k == std::size_t(-1)) break;
  }
  return c;
}

// One forward case over `trials` random shapes: lhs sharded by LS, rhs by RS, the product
// `call(A, B)` (S's equation) of spec Want, unreduced over WantU, running exactly
// `collectives` collectives.
template <ts::einsum_subscripts S, class LS, class RS, class Want, class WantU, class Mesh,
          class Call>
void forward_case(const std::string& what, const ts::device_mesh<Mesh>& m, std::mt19937& rng,
                  std::size_t collectives, const Call& call, int trials = 6) {
  INFO(what << " " << S.view());
  constexpr std::size_t ra = part(S.view(), 0).size(), rb = part(S.view(), 1).size();
  constexpr std::size_t rc = part(S.view(), 2).size();
  for (int t = 0; t < trials; ++t) {
    const letter_extents ext(rng);
    const auto a = random_integers<float>(ext.shape_of<ra>(part(S.view(), 0)), rng);
    const auto b = random_integers<float>(ext.shape_of<rb>(part(S.view(), 1)), rng);
    const auto A = ts::device_put<LS>(m, a);
    const auto B = ts::device_put<RS>(m, b);
    ts::communication_recorder rec;
    const auto C = call(A, B);
    const ts::communication_report r = rec.report();
    using CT = std::remove_cvref_t<decltype(C)>;
    STATIC_REQUIRE(std::is_same_v<typename CT::spec, Want>);
    STATIC_REQUIRE(std::is_same_v<typename CT::unreduced_type, WantU>);
    INFO("extents " << A.extents()[0] << "x" << A.extents()[1] << ", rhs " << B.extents()[0]
                    << "x" << B.extents()[1]);
    CHECK(r.size() == collectives);
    const auto want = serial_einsum<float, ra, rb, rc>(S.view(), ext, a, b);
    const auto got = host_of(C);
    REQUIRE(got.extents() == want.extents());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i) wrong += double(got.data()[i]) != want.data()[i];
    CHECK(wrong == 0);
  }
}

template <ts::einsum_subscripts S, class Out = ts::auto_out>
constexpr auto einsum_call = [](const auto& a, const auto& b) { return ts::einsum<S, Out>(a, b); };

template <class Out = ts::auto_out>
constexpr auto matmul_call = [](const auto& a, const auto& b) { return ts::matmul<Out>(a, b); };

// One gradient case over `trials` random shapes: the loss f of the product of equation S
// (both operands of rank Rank) differentiated with lhs and rhs sharded by LS and RS.
template <ts::einsum_subscripts S, class LS, class RS, class F, class Mesh>
void gradient_case(const std::string& what, const F& f, const ts::device_mesh<Mesh>& m,
                   std::mt19937& rng, int trials = 2) {
  constexpr std::size_t ra = part(S.view(), 0).size(), rb = part(S.view(), 1).size();
  for (int t = 0; t < trials; ++t) {
    const letter_extents ext(rng);
    const unsigned seed = static_cast<unsigned>(rng());
    const auto a = random_tensor(ext.shape_of<ra>(part(S.view(), 0)), seed);
    const auto b = random_tensor(ext.shape_of<rb>(part(S.view(), 1)), seed + 1);
    check_gradients<LS, RS>(what + " " + std::string(S.view()), f, m, a, b);
  }
}

TEST_CASE("batch letter sharded in one operand only: einsum and matmul on arrays",
          "[einsum][matmul][batch]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_4> m1{devices};
  const ts::device_mesh<mesh_2x2> m2{devices};
  std::mt19937 rng(20261128);
  using x__ = ts::spec<"x", none, none>;
  using ___ = ts::spec<none, none, none>;
  using no_u = ts::unreduced<>;
  // Either side sharded, the other sliced; 1-d and 2-d meshes.
  forward_case<"bij,bjk->bik", ___, x__, x__, no_u>("rhs's b over x (4)", m1, rng, 0,
                                                    einsum_call<"bij,bjk->bik">);
  forward_case<"bij,bjk->bik", x__, ___, x__, no_u>("lhs's b over x (4)", m1, rng, 0,
                                                    einsum_call<"bij,bjk->bik">);
  forward_case<"bij,bjk->bik", ts::spec<none, none, "y">, ts::spec<"x", "y", none>, x__,
               ts::unreduced<"y">>("b over x in rhs, j over y in both", m2, rng, 0,
                                   einsum_call<"bij,bjk->bik">);
  forward_case<"bij,bjk->bik", ___, ts::spec<"x", none, "y">, ts::spec<"x", none, "y">, no_u>(
      "b over x, k over y in rhs", m2, rng, 0, einsum_call<"bij,bjk->bik">);
  forward_case<"bij,bjk->bik", ts::spec<ts::axes("x", "y"), none, none>, ___,
               ts::spec<ts::axes("x", "y"), none, none>, no_u>("b over (x, y) in lhs", m2, rng,
                                                               0, einsum_call<"bij,bjk->bik">);
  forward_case<"bhqd,bhkd->bhqk", ts::spec<"x", "y">, ts::spec<"x">, ts::spec<"x", "y", none, none>,
               no_u>("attention: heads over y in q only", m2, rng, 0,
                     einsum_call<"bhqd,bhkd->bhqk">, 3);
  forward_case<"bi,bk->bik", ts::spec<none, none>, ts::spec<"x", none>, x__, no_u>(
      "outer products, b over x in rhs", m1, rng, 0, einsum_call<"bi,bk->bik">);
  // The whole operand's contracted letter on the axis it takes: gathered first (one
  // all_gather), then the product is local.
  forward_case<"bij,bjk->bik", ts::spec<none, none, "x">, x__, x__, no_u>(
      "lhs's j on the taken axis", m1, rng, 1, einsum_call<"bij,bjk->bik">);
  // Its free letter on that axis: two output letters on one axis, an output spec named.
  forward_case<"bij,bjk->bik", ts::spec<none, "x", none>, x__, x__, no_u>(
      "lhs's i on the taken axis, output spec named", m2, rng, 1,
      einsum_call<"bij,bjk->bik", x__>);
  // matmul's batch dimensions: the same rule (rank 4: each operand shards one batch
  // dimension, both are sliced).
  forward_case<"bij,bjk->bik", ___, x__, x__, no_u>("matmul, rhs's batch over x", m1, rng, 0,
                                                    matmul_call<>);
  forward_case<"bij,bjk->bik", ts::spec<"y", "x", none>, ___, ts::spec<"y", "x", none>, no_u>(
      "matmul, lhs's batch over y, i over x", m2, rng, 0, matmul_call<>);
  forward_case<"abij,abjk->abik", ts::spec<"x", none, none, none>, ts::spec<none, "y", none, none>,
               ts::spec<"x", "y", none, none>, no_u>("matmul rank 4, a over x in lhs, b over y "
                                                     "in rhs",
                                                     m2, rng, 0, matmul_call<>, 3);
  forward_case<"bij,bjk->bik", ___, x__, x__, no_u>("matmul, output spec named", m2, rng, 0,
                                                    matmul_call<x__>);
}

TEST_CASE("batch letter sharded in one operand only: value_and_grad against the serial run",
          "[grad][einsum][matmul][batch]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_4> m1{devices};
  const ts::device_mesh<mesh_2x2> m2{devices};
  std::mt19937 rng(7);
  using x__ = ts::spec<"x", none, none>;
  using ___ = ts::spec<none, none, none>;
  const auto mm = [](auto x, auto y) { return sin_sum(ts::matmul(x, y)); };
  gradient_case<"bij,bjk->bik", ___, x__>(
      "einsum, rhs's b over x (4)",
      [](auto x, auto y) { return sin_sum(ts::einsum<"bij,bjk->bik">(x, y)); }, m1, rng);
  gradient_case<"bi,bk->bik", ts::spec<none, none>, ts::spec<"x", none>>(
      "einsum outer products",
      [](auto x, auto y) { return sin_sum(ts::einsum<"bi,bk->bik">(x, y)); }, m1, rng);
  gradient_case<"bhqd,bhkd->bhqk", ts::spec<"x", "y">, ts::spec<"x">>(
      "attention scores, heads over y in q only",
      [](auto x, auto y) { return sin_sum(ts::einsum<"bhqd,bhkd->bhqk">(x, y)); }, m2, rng, 1);
  gradient_case<"bij,bjk->bik", ts::spec<none, none, "y">, ts::spec<"x", "y", none>>(
      "matmul, b over x in rhs, j over y in both (unreduced)", mm, m2, rng);
  gradient_case<"abij,abjk->abik", ts::spec<"x", none, none, none>,
                ts::spec<none, "y", none, none>>(
      "matmul rank 4, each operand shards one batch dimension", mm, m2, rng, 1);
  // Output specs named: the traced calls accept what the array calls accept (for einsum, a
  // batch letter over different axes too).
  gradient_case<"bij,bjk->bik", ___, x__>(
      "matmul, output spec named", [](auto x, auto y) { return sin_sum(ts::matmul<x__>(x, y)); },
      m2, rng, 1);
  gradient_case<"bij,bjk->bik", ts::spec<"y", none, none>, x__>(
      "einsum, b over y in lhs and x in rhs, output spec named",
      [](auto x, auto y) { return sin_sum(ts::einsum<"bij,bjk->bik", x__>(x, y)); }, m2, rng, 1);
}

// ts::matmul<Out> on traced values runs ts::matmul's plan on the arrays (batch dimensions
// fixed), not the plain einsum's: here the array plan slices the whole lhs and gathers the
// product (b x i x k), where the einsum of the same equation would gather rhs (b x j x k,
// fewer bytes for j < i). The forward's collectives under value_and_grad are the array
// call's, block for block.
TEST_CASE("batch sharded in one operand only: traced matmul<Out> runs the array plan",
          "[grad][matmul][batch]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_4> m{devices};
  std::mt19937 rng(3);
  using Out = ts::spec<none, none, none>;
  const auto a = random_tensor(ts::shape<3>{8, 12, 2}, 1);
  const auto b = random_tensor(ts::shape<3>{8, 2, 10}, 2);
  // Static extents: with dynamic ones both plans are planned alike (a tie, enumeration order).
  const auto A = ts::device_put<ts::spec<>, ts::extents<8, 12, 2>>(m, a);
  const auto B = ts::device_put<ts::spec<"x", none, none>, ts::extents<8, 2, 10>>(m, b);
  using plan = ts::matmul_plan_for<decltype(A), decltype(B), Out>;
  STATIC_REQUIRE(plan::collectives == 1);
  using einsum_plan = ts::einsum_plan_for<"bij,bjk->bik", decltype(A), decltype(B), Out>;
  CHECK(plan::describe() != einsum_plan::describe());  // what tells the two paths apart
  ts::communication_recorder array_rec;
  const auto C = ts::matmul<Out>(A, B);
  const ts::communication_report array_run = array_rec.report();
  REQUIRE(array_run.size() == 1);
  CHECK(array_run.collectives()[0].block_bytes == 8 * 12 * 10 * sizeof(double));  // gathered
  ts::communication_recorder traced_rec;
  const auto [loss, grads] = ts::value_and_grad<0, 1>(
      [](auto x, auto y) { return ts::sum(ts::matmul<Out>(x, y)); })(A, B);
  const ts::communication_report traced_run = traced_rec.report();
  REQUIRE(traced_run.size() >= 1);
  CHECK(traced_run.collectives()[0].name() == array_run.collectives()[0].name());
  CHECK(traced_run.collectives()[0].axes == array_run.collectives()[0].axes);
  CHECK(traced_run.collectives()[0].block_bytes == array_run.collectives()[0].block_bytes);
  double want = 0;
  const auto c = ts::to_host(C);
  for (std::size_t i = 0; i < c.size(); ++i) want += c.data()[i];
  CHECK(close(host_of(loss).data()[0], want, 1e-12));
  (void)grads;
}

// Mixed precision: bfloat16 copies of float arguments through ts::matmul with
// preferred_element<float> (the traced mixed path), rhs's batch over x: the loss and the
// float gradients equal the replicated run's exactly (small integers: every product and sum
// is exact in bfloat16 and float).
TEST_CASE("batch sharded in one operand only: mixed-precision traced matmul",
          "[grad][matmul][batch][bf16]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  std::mt19937 rng(5);
  const auto f = [](auto x, auto y) {
    return ts::sum(ts::matmul(ts::astype<ts::bfloat16>(x), ts::astype<ts::bfloat16>(y),
                              ts::preferred_element<float>));
  };
  for (int t = 0; t < 3; ++t) {
    const letter_extents ext(rng);
    const auto a = random_integers<float>(ext.shape_of<3>("bij"), rng);
    const auto b = random_integers<float>(ext.shape_of<3>("bjk"), rng);
    const auto [l, g] = ts::value_and_grad<0, 1>(f)(ts::device_put<ts::spec<>>(m, a),
                                                  ts::device_put<ts::spec<"x">>(m, b));
    const auto [ls, gs] = ts::value_and_grad<0, 1>(f)(ts::device_put<ts::spec<>>(m, a),
                                                    ts::device_put<ts::spec<>>(m, b));
    CHECK(host_of(l).data()[0] == host_of(ls).data()[0]);
    const auto ga = host_of(std::get<0>(g)), gsa = host_of(std::get<0>(gs));
    const auto gb = host_of(std::get<1>(g)), gsb = host_of(std::get<1>(gs));
    REQUIRE(ga.extents() == a.extents());
    REQUIRE(gb.extents() == b.extents());
    CHECK(ga == gsa);
    CHECK(gb == gsb);
    // d a[t, i, j] = sum_k b[t, j, k]: the whole operand's gradient, reassembled.
    std::size_t wrong = 0;
    for (std::size_t n = 0; n < ga.size(); ++n) {
      const std::size_t J = a.extent(2), K = b.extent(2);
      const std::size_t t3 = n / (a.extent(1) * J), j = n % J;
      double s = 0;
      for (std::size_t k = 0; k < K; ++k) s += b.data()[(t3 * J + j) * K + k];
      wrong += double(ga.data()[n]) != s;
    }
    CHECK(wrong == 0);
  }
}

}  // namespace
