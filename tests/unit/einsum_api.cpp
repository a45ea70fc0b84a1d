// ts::einsum through its typed API: a Megatron MLP's two products and attention scores on a
// ("data", "model") mesh against a serial einsum, the result types (spec, unreduced axes,
// static extents), named output specs, einsum_valid / matmul_valid answering without a
// diagnostic, the run-time errors, and issue 18's case-4 fix: the ts::matmul<OutSpec> the
// message suggests compiles on any mesh's axis names and runs one all_gather.
#include <typeshard/typeshard.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

namespace ts = typeshard;
using ts::none;
using mesh_dm = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;

template <std::size_t R>
ts::host_tensor<float, R> integers(const ts::shape<R>& s, std::mt19937_64& rng) {
  ts::host_tensor<float, R> t(s);
  std::uniform_int_distribution<int> d(-3, 3);
  for (float& v : t.values()) v = static_cast<float>(d(rng));
  return t;
}

// The serial einsum of two host tensors for the letters given (small, exact integers).
template <std::size_t RA, std::size_t RB, std::size_t RC>
ts::host_tensor<float, RC> serial(const char* subscripts, const ts::host_tensor<float, RA>& a,
                                  const ts::host_tensor<float, RB>& b, const ts::shape<RC>& out) {
  const auto eq = ts::detail::parse_einsum(subscripts);
  std::string letters;
  std::array<std::size_t, 128> extent{};
  for (std::size_t l = 0; l < RA; ++l) {
    letters += eq.lhs[l];
    extent[static_cast<unsigned char>(eq.lhs[l])] = a.extent(l);
  }
  for (std::size_t r = 0; r < RB; ++r)
    if (!eq.in_lhs(eq.rhs[r])) {
      letters += eq.rhs[r];
      extent[static_cast<unsigned char>(eq.rhs[r])] = b.extent(r);
    }
  ts::host_tensor<float, RC> c(out);
  for (float& v : c.values()) v = 0;
  std::array<std::size_t, 128> at{};
  std::size_t total = 1;
  for (char x : letters) total *= extent[static_cast<unsigned char>(x)];
  for (std::size_t n = 0; n < total; ++n) {
    std::size_t rem = n;
    for (std::size_t k = letters.size(); k-- > 0;) {
      const auto x = static_cast<unsigned char>(letters[k]);
      at[x] = rem % extent[x];
      rem /= extent[x];
    }
    std::array<std::size_t, RA> ai{};
    std::array<std::size_t, RB> bi{};
    std::array<std::size_t, RC> ci{};
    for (std::size_t l = 0; l < RA; ++l) ai[l] = at[static_cast<unsigned char>(eq.lhs[l])];
    for (std::size_t r = 0; r < RB; ++r) bi[r] = at[static_cast<unsigned char>(eq.rhs[r])];
    for (std::size_t o = 0; o < eq.out_rank; ++o) ci[o] = at[static_cast<unsigned char>(eq.out[o])];
    c.data()[c.offset(ci)] += a.data()[a.offset(ai)] * b.data()[b.offset(bi)];
  }
  return c;
}

template <std::size_t R>
bool equal(const ts::host_tensor<float, R>& x, const ts::host_tensor<float, R>& y) {
  return x.extents() == y.extents() &&
         std::equal(x.values().begin(), x.values().end(), y.values().begin());
}

}  // namespace

TEST_CASE("einsum: a Megatron MLP's products, global view only", "[einsum]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_dm> m{devices};
  std::mt19937_64 rng(42);
  const auto x = integers<3>({4, 5, 6}, rng);  // [B, S, D]
  const auto w1 = integers<2>({6, 8}, rng);    // [D, F]
  const auto w2 = integers<2>({8, 6}, rng);    // [F, D]
  auto X = ts::device_put<ts::spec<"data", none, none>>(m, x);
  auto W1 = ts::device_put<ts::spec<none, "model">>(m, w1);
  auto W2 = ts::device_put<ts::spec<"model", none>>(m, w2);

  auto H = ts::einsum<"bsd,df->bsf">(X, W1);  // column-parallel: no communication
  static_assert(std::is_same_v<decltype(H)::spec, ts::spec<"data", none, "model">>);
  static_assert(std::is_same_v<decltype(H)::unreduced_type, ts::unreduced<>>);
  static_assert(ts::communication_free<ts::einsum_plan_for<"bsd,df->bsf", decltype(X), decltype(W1)>>);
  const auto h = serial<3, 2, 3>("bsd,df->bsf", x, w1, {4, 5, 8});
  CHECK(equal(ts::to_host(H), h));

  auto U = ts::einsum<"bsf,fd->bsd">(H, W2);  // row-parallel: unreduced over model
  static_assert(std::is_same_v<decltype(U)::spec, ts::spec<"data", none, none>>);
  static_assert(std::is_same_v<decltype(U)::unreduced_type, ts::unreduced<"model">>);
  const auto y = serial<3, 2, 3>("bsf,fd->bsd", h, w2, {4, 5, 6});
  CHECK(equal(ts::to_host(ts::reshard<ts::spec<"data", none, none>>(U)), y));

  // A partial-sum operand (rule 3: the product is linear in it): the result stays partial.
  const auto w3 = integers<2>({6, 3}, rng);
  auto P = ts::einsum<"bsd,de->bse">(U, ts::device_put<ts::spec<none, none>>(m, w3));
  static_assert(std::is_same_v<decltype(P)::unreduced_type, ts::unreduced<"model">>);
  CHECK(equal(ts::to_host(ts::reshard<ts::spec<"data", none, none>>(P)),
              serial<3, 2, 3>("bsd,de->bse", y, w3, {4, 5, 3})));

  // Named: all-reduce, or reduce-scatter along S (sequence parallel).
  auto Y = ts::einsum<"bsf,fd->bsd", ts::spec<"data", none, none>>(H, W2);
  static_assert(std::is_same_v<decltype(Y)::unreduced_type, ts::unreduced<>>);
  CHECK(equal(ts::to_host(Y), y));
  auto S = ts::einsum<"bsf,fd->bsd", ts::spec<"data", "model", none>>(H, W2);
  // With these static extents the reduce-scatter moves the fewest bytes (with dynamic
  // extents, all taken equal, an all_to_all of H's F before the product is cheaper).
  using splan = ts::einsum_plan<"bsf,fd->bsd", mesh_dm, ts::spec<"data", none, "model">,
                                ts::spec<"model", none>, ts::spec<"data", "model", none>,
                                ts::extents<4, 5, 8>, ts::extents<8, 6>>;
  static_assert(splan::steps.back().kind == ts::step_kind::psum_scatter);
  CHECK(equal(ts::to_host(S), y));
}

TEST_CASE("einsum: attention scores, static extents, vectors and a dot product", "[einsum]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_dm> m{devices};
  std::mt19937_64 rng(7);
  const auto q = integers<4>({2, 2, 3, 4}, rng);
  const auto k = integers<4>({2, 2, 5, 4}, rng);
  auto Q = ts::device_put<ts::spec<"data", "model", none, none>, ts::extents<2, 2, 3, 4>>(m, q);
  auto K = ts::device_put<ts::spec<"data", "model", none, none>, ts::extents<2, 2, 5, 4>>(m, k);
  auto A = ts::einsum<"bhqd,bhkd->bhqk">(Q, K);
  static_assert(std::is_same_v<decltype(A)::extents_type, ts::extents<2, 2, 3, 5>>);
  static_assert(std::is_same_v<decltype(A)::spec, ts::spec<"data", "model", none, none>>);
  CHECK(equal(ts::to_host(A), serial<4, 4, 4>("bhqd,bhkd->bhqk", q, k, {2, 2, 3, 5})));

  const auto u = integers<1>({7}, rng);
  const auto v = integers<1>({7}, rng);
  auto U = ts::device_put<ts::spec<"model">>(m, u);
  auto V = ts::device_put<ts::spec<"model">>(m, v);
  auto D = ts::einsum<"i,i->", ts::spec<>>(U, V);  // a dot product: rank 0
  static_assert(decltype(D)::rank == 0);
  CHECK(D.item() == serial<1, 1, 1>("i,i->", u, v, {1})(0));
  auto O = ts::einsum<"i,j->ij">(U, ts::device_put<ts::spec<"data">>(m, v));
  static_assert(std::is_same_v<decltype(O)::spec, ts::spec<"model", "data">>);
  CHECK(equal(ts::to_host(O), serial<1, 1, 2>("i,j->ij", u, v, {7, 7})));
}

TEST_CASE("einsum_valid and matmul_valid answer without a diagnostic", "[einsum]") {
  using X = ts::sharded_array<float, mesh_dm, ts::spec<none, "model">, ts::dextents<2>>;
  using Y = ts::sharded_array<float, mesh_dm, ts::spec<none, "model">, ts::dextents<2>>;
  using Z = ts::sharded_array<float, mesh_dm, ts::spec<"model", none>, ts::dextents<2>>;
  using B1 = ts::sharded_array<float, mesh_dm, ts::spec<"data", none, none>, ts::dextents<3>>;
  using B2 = ts::sharded_array<float, mesh_dm, ts::spec<"model", none, none>, ts::dextents<3>>;
  using S8 = ts::sharded_array<float, mesh_dm, ts::spec<none, none>, ts::extents<8, 8>>;
  using S6 = ts::sharded_array<float, mesh_dm, ts::spec<none, none>, ts::extents<6, 6>>;
  using I2 = ts::sharded_array<int, mesh_dm, ts::spec<none, none>, ts::dextents<2>>;
  // A[I, J_model] . B[J, K_model]: J gathered; fine.
  static_assert(ts::einsum_valid<"ij,jk->ik", X, Y> && ts::matmul_valid<X, Y>);
  // A[I_model, J] . B[J, K_model] (rows and columns on one axis): only with an output spec.
  static_assert(!ts::einsum_valid<"ij,jk->ik", Z, Y> && !ts::matmul_valid<Z, Y>);
  static_assert(ts::einsum_valid<"ij,jk->ik", Z, Y, ts::spec<"model", none>>);
  static_assert(ts::matmul_valid<Z, Y, ts::spec<"model", none>>);
  // Batch letters sharded differently: only with an output spec for einsum; never for matmul.
  static_assert(!ts::einsum_valid<"bij,bjk->bik", B1, B2> && !ts::matmul_valid<B1, B2>);
  static_assert(ts::einsum_valid<"bij,bjk->bik", B1, B2, ts::spec<"data", none, none>>);
  // Malformed subscripts, a wrong rank, static extents that differ, int elements.
  static_assert(!ts::einsum_valid<"ij,jk>ik", X, Y> && !ts::einsum_valid<"ijk,jk->ik", X, Y>);
  static_assert(!ts::einsum_valid<"ij,jk->ik", S8, S6> && !ts::matmul_valid<S8, S6>);
  static_assert(!ts::einsum_valid<"ij,jk->ik", I2, I2> && !ts::matmul_valid<I2, I2>);
  static_assert(!ts::einsum_valid<"ij,jk->iz", X, Y> && !ts::einsum_valid<"ii,jk->ik", X, Y>);
  static_assert(!ts::einsum_valid<"ij,jk->ik", X, Y, ts::spec<"nope", none>>);
}

TEST_CASE("einsum: run-time errors name the letter and the fix", "[einsum]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_dm> m{devices};
  ts::host_tensor<float, 2> a({4, 6}), b({5, 4});
  auto A = ts::device_put<ts::spec<"data", none>>(m, a);
  auto B = ts::device_put<ts::spec<none, none>>(m, b);
  try {
    (void)ts::einsum<"ij,jk->ik">(A, B);
    FAIL("no shape_error");
  } catch (const ts::shape_error& e) {
    CHECK(std::string(e.what()).find("letter 'j' has extent 6 in lhs") != std::string::npos);
  }
}

TEST_CASE("matmul: the case-4 fix on a (data, model) mesh runs one all_gather", "[einsum][matmul]") {
  // A[I_model, J] . B[J, K_model]: the message says to name the output spec with the
  // clashing axis; ts::matmul<ts::spec<"model", none>> gathers B's K: one all_gather.
  using plan = ts::matmul_plan<mesh_dm, ts::spec<"model", none>, ts::spec<none, "model">,
                               ts::spec<"model", none>, ts::extents<8, 8>>;
  static_assert(plan::valid && plan::collectives == 1 && plan::steps.size() == 2);
  static_assert(plan::steps[0].kind == ts::step_kind::all_gather &&
                plan::steps[0].operand == ts::step_operand::rhs);
  using plan_k = ts::matmul_plan<mesh_dm, ts::spec<"model", none>, ts::spec<none, "model">,
                                 ts::spec<none, "model">, ts::extents<8, 8>>;
  static_assert(plan_k::collectives == 1 && plan_k::steps[0].operand == ts::step_operand::lhs);
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_dm> m{devices};
  std::mt19937_64 rng(3);
  const auto a = integers<2>({8, 8}, rng);
  const auto b = integers<2>({8, 8}, rng);
  auto A = ts::device_put<ts::spec<"model", none>>(m, a);
  auto B = ts::device_put<ts::spec<none, "model">>(m, b);
  auto C = ts::matmul<ts::spec<"model", none>>(A, B);
  CHECK(equal(ts::to_host(C), serial<2, 2, 2>("ij,jk->ik", a, b, {8, 8})));
  auto E = ts::einsum<"ij,jk->ik", ts::spec<"model", none>>(A, B);
  CHECK(equal(ts::to_host(E), serial<2, 2, 2>("ij,jk->ik", a, b, {8, 8})));
}

TEST_CASE("einsum kernel: a pending slice of J or of a batch dimension is read in place",
          "[einsum][matmul]") {
  namespace tsd = ts::detail;
  std::vector<float> x(4 * 6 * 8);
  const std::array<std::size_t, 3> no_strides{};
  // lhs [batch 4, I 6, J 8] holding all of the batch and of J, reading batch [2, 4), J [4, 8):
  // rows of 4 at leading dimension 8, batch elements 48 apart.
  const auto mm = tsd::matmul_equation<3>();
  const auto a = tsd::gemm_operand_of<float, 3>(mm, true, x.data(), {4, 6, 8}, {2, 0, 4},
                                                {2, 6, 4}, no_strides, false, 2, 6, 4);
  CHECK(a.packed.size() == 0);
  CHECK(!a.transposed);
  CHECK(a.ld == 8);
  CHECK(a.data == x.data() + 2 * 48 + 4);
  CHECK(a.offset(1) == 48);
  // rhs [batch 4, J 8, K 6] reading J [4, 8): leading dimension 6.
  const auto b = tsd::gemm_operand_of<float, 3>(mm, false, x.data(), {4, 8, 6}, {0, 4, 0},
                                                {4, 4, 6}, no_strides, false, 4, 4, 6);
  CHECK(b.packed.size() == 0);
  CHECK(b.ld == 6);
  CHECK(b.data == x.data() + 4 * 6);
  CHECK(b.offset(3) == 3 * 48);
  // "ji,jk->ik": lhs stored [J 8, I 6], sliced along J, read transposed in place.
  const auto tr = tsd::parse_einsum("ji,jk->ik");
  std::array<std::size_t, 2> s2{};
  const auto t = tsd::gemm_operand_of<float, 2>(tr, true, x.data(), {8, 6}, {4, 0}, {4, 6}, s2,
                                                false, 1, 6, 4);
  CHECK(t.packed.size() == 0);
  CHECK(t.transposed);
  CHECK(t.ld == 6);
  CHECK(t.data == x.data() + 4 * 6);
  // "xyj,jk->xyk" with y sliced: the rows (x, y) are no evenly strided run: packed.
  const auto rows = tsd::parse_einsum("xyj,jk->xyk");
  const std::array<std::size_t, 3> packed_strides{12, 4, 1};
  const auto p = tsd::gemm_operand_of<float, 3>(rows, true, x.data(), {4, 6, 8}, {0, 0, 0},
                                                {4, 3, 4}, packed_strides, false, 1, 12, 4);
  CHECK(p.packed.size() == 4 * 3 * 4);
  CHECK(p.ld == 4);
}
