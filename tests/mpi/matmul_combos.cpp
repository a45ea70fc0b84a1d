// matmul on MPI: every (lhs spec, rhs spec) pair on a (2,2) mesh under 4 ranks (a 1-D mesh of
// 2 under 2 ranks), each planned as ts::matmul plans it, without an output spec and with
// every output spec, run through the one-run executor (detail::run_einsum, the code
// ts::matmul runs) on the MPI backend; this rank's block of the result must equal a serial
// GEMM. The data are small integers stored as float and double (tests/unit/
// matmul_support.hpp), so every partial sum is exact whatever order MPI reduces in: the
// numbers are bit for bit the thread pool's, whose unit tests check the same products.
#include "support.hpp"

#include "../unit/matmul_support.hpp"

namespace {

using namespace matmul_test;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_1d = ts::mesh<ts::axis("x", 2)>;

// This rank's block of a result laid out by c.out (unreduced over c.out_unreduced) against
// the serial product (a partial sum over the device's block of J where unreduced).
template <class Mesh, class T, std::size_t Rank>
void check_block(const tsd::einsum_choice<Rank>& c, std::size_t p, const tsd::buffer<T>& got,
                 const ts::host_tensor<T, Rank>& a, const ts::host_tensor<T, Rank>& b) {
  ts::shape<Rank> cg = a.extents();
  cg[Rank - 1] = b.extent(Rank - 1);
  const ts::index_slices<Rank> ix = tsd::index_of<Mesh>(c.out, cg, p);
  const ts::slice js = ts::shard_slice(a.extent(Rank - 1), tsd::shards_of<Mesh>(c.out_unreduced),
                                       tsd::shard_of<Mesh>(c.out_unreduced, p));
  ts::shape<Rank> local{};
  std::size_t n = 1;
  for (std::size_t d = 0; d < Rank; ++d) n *= (local[d] = ix[d].size());
  REQUIRE(got.size() == n);
  for (std::size_t e = 0; e < n; ++e) {
    ts::shape<Rank> gi{};
    for (std::size_t d = Rank, rem = e; d-- > 0; rem /= local[d]) gi[d] = ix[d].start + rem % local[d];
    const double want = reference(a, b, gi, js.start, js.stop);
    if (double(got.data()[e]) != want) {
      INFO("element " << e << " = " << got.data()[e] << ", expected " << want);
      REQUIRE(double(got.data()[e]) == want);
    }
  }
}

// Every pair; with outs_per_pair == 0 every output spec, else that many drawn at random.
template <class Mesh, class T, std::size_t Rank>
std::size_t all_pairs(const ts::shape<Rank>& ga, const ts::shape<Rank>& gb,
                      std::size_t outs_per_pair, std::uint64_t seed) {
  ts::device_mesh<Mesh> m{mpi_test::devices()};
  const std::size_t p = static_cast<std::size_t>(mpi_test::rank());
  std::mt19937_64 rng(seed);
  constexpr spec_list<Rank> specs = all_specs<Mesh, Rank>();
  const auto a = random_integers<T>(ga, rng);
  const auto b = random_integers<T>(gb, rng);
  const tsd::einsum_shapes<Rank> sh{ga, gb, sizeof(T)};
  std::uniform_int_distribution<std::size_t> pick(0, specs.count - 1);
  std::size_t runs = 0;
  for (std::size_t i = 0; i < specs.count; ++i) {
    const auto a_blocks = put_blocks<Mesh>(a, specs.specs[i]);
    for (std::size_t j = 0; j < specs.count; ++j) {
      const auto b_blocks = put_blocks<Mesh>(b, specs.specs[j]);
      const std::string where = "lhs " + str(specs.specs[i]) + " rhs " + str(specs.specs[j]) +
                                " shapes " + ts::to_string(ga) + " . " + ts::to_string(gb) +
                                ", seed " + std::to_string(seed);
      auto run = [&](const tsd::einsum_choice<Rank>& c, const std::string& what) {
        INFO(what);
        const auto got = tsd::run_einsum<T, Mesh, Rank>(tsd::matmul_equation<Rank>(), c, m, spans(a_blocks), ga,
                                                        spans(b_blocks), gb);
        check_block<Mesh>(c, p, got[p], a, b);
        ++runs;
      };
      const auto c = tsd::plan_matmul<Mesh, Rank>(specs.specs[i], specs.specs[j], false, {}, sh);
      if (c.problem == tsd::einsum_problem::batch_specs_differ) continue;  // no plan at all
      if (c.problem == tsd::einsum_problem::none) run(c, where + " (no output spec)");
      const std::size_t n_out = outs_per_pair == 0 ? specs.count : outs_per_pair;
      for (std::size_t k = 0; k < n_out; ++k) {
        const auto& out = specs.specs[outs_per_pair == 0 ? k : pick(rng)];
        const auto cn = tsd::plan_matmul<Mesh, Rank>(specs.specs[i], specs.specs[j], true, out, sh);
        REQUIRE(cn.problem == tsd::einsum_problem::none);
        run(cn, where + " out " + str(out));
      }
    }
  }
  return runs;
}

template <class Mesh>
void enumerate(std::uint64_t seed) {
  // Matrices: every output spec; even, then uneven extents (4 shards of 3 leave one empty).
  CHECK(all_pairs<Mesh, float, 2>({8, 12}, {12, 4}, 0, seed) > 0);
  CHECK(all_pairs<Mesh, float, 2>({5, 7}, {7, 3}, 0, seed + 1) > 0);
  // Batched: every pair, two output specs drawn per pair.
  CHECK(all_pairs<Mesh, double, 3>({4, 4, 8}, {4, 8, 4}, 2, seed + 2) > 0);
  CHECK(all_pairs<Mesh, double, 3>({3, 5, 6}, {3, 6, 2}, 2, seed + 3) > 0);
}

// A batch dimension sharded in one operand only keeps its sharding, the whole operand read
// at its block (no communication), through the typed ts::einsum and ts::matmul on MPI:
// both orders (the sharded operand on either side), against a serial batched GEMM; and the
// gradients of the traced matmul against their closed form.
template <class Mesh>
void batch_sharded_in_one_operand(std::uint64_t seed) {
  using ts::none;
  ts::device_mesh<Mesh> m{mpi_test::devices()};
  std::mt19937_64 rng(seed);
  const auto a = random_integers<float>(ts::shape<3>{4, 3, 5}, rng);
  const auto b = random_integers<float>(ts::shape<3>{4, 5, 2}, rng);
  ts::host_tensor<float, 3> want({4, 3, 2});
  for (std::size_t t = 0; t < 4; ++t)
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t k = 0; k < 2; ++k) {
        double s = 0;
        for (std::size_t j = 0; j < 5; ++j) s += double(a(t, i, j)) * double(b(t, j, k));
        want(t, i, k) = static_cast<float>(s);
      }
  auto A = ts::device_put<ts::spec<none, none, none>>(m, a);
  auto B = ts::device_put<ts::spec<"x", none, none>>(m, b);
  static_assert(
      ts::communication_free<ts::einsum_plan_for<"bij,bjk->bik", decltype(A), decltype(B)>>);
  static_assert(ts::communication_free<ts::matmul_plan_for<decltype(A), decltype(B)>>);
  const auto C = ts::einsum<"bij,bjk->bik">(A, B);
  const auto D = ts::matmul(A, B);
  static_assert(std::is_same_v<typename decltype(C)::spec, ts::spec<"x", none, none>>);
  static_assert(std::is_same_v<typename decltype(D)::spec, ts::spec<"x", none, none>>);
  REQUIRE(ts::to_host(C) == want);
  REQUIRE(ts::to_host(D) == want);
  // The other way round: lhs sharded, rhs whole.
  auto A2 = ts::device_put<ts::spec<"x", none, none>>(m, a);
  auto B2 = ts::device_put<ts::spec<none, none, none>>(m, b);
  const auto E = ts::matmul(A2, B2);
  static_assert(std::is_same_v<typename decltype(E)::spec, ts::spec<"x", none, none>>);
  REQUIRE(ts::to_host(E) == want);
  // Traced: value_and_grad of sum(matmul(A, B)): d A[t,i,j] = sum_k B[t,j,k] (A's gradient
  // computed sharded along the batch, then gathered into A's replicated spec), d B[t,j,k] =
  // sum_i A[t,i,j] (B's spec); the loss is the sum of the product.
  const auto [loss, grads] = ts::value_and_grad<0, 1>(
      [](auto x, auto y) { return ts::sum(ts::matmul(x, y)); })(A, B);
  const auto& [dA, dB] = grads;
  static_assert(std::is_same_v<typename std::remove_cvref_t<decltype(dA)>::spec,
                               ts::spec<none, none, none>>);
  static_assert(std::is_same_v<typename std::remove_cvref_t<decltype(dB)>::spec,
                               ts::spec<"x", none, none>>);
  double total = 0;
  for (std::size_t e = 0; e < want.size(); ++e) total += want.data()[e];
  const auto whole = [](const auto& v) { return ts::to_host(ts::reshard<ts::spec<>>(v)); };
  REQUIRE(double(whole(loss).data()[0]) == total);  // the loss may be unreduced over x
  const auto ga = whole(dA);
  const auto gb = whole(dB);
  for (std::size_t t = 0; t < 4; ++t)
    for (std::size_t j = 0; j < 5; ++j) {
      for (std::size_t i = 0; i < 3; ++i) {
        double s = 0;
        for (std::size_t k = 0; k < 2; ++k) s += double(b(t, j, k));
        REQUIRE(double(ga(t, i, j)) == s);
      }
      for (std::size_t k = 0; k < 2; ++k) {
        double s = 0;
        for (std::size_t i = 0; i < 3; ++i) s += double(a(t, i, j));
        REQUIRE(double(gb(t, j, k)) == s);
      }
    }
}

}  // namespace

TEST_CASE("batch dimension sharded in one operand only on MPI: kept, no communication",
          "[mpi][matmul][einsum]") {
  const std::uint64_t seed = mpi_test::shared_seed();
  INFO("seed " << seed);
  if (mpi_test::size() == 4)
    batch_sharded_in_one_operand<mesh_2x2>(seed);
  else if (mpi_test::size() == 2)
    batch_sharded_in_one_operand<mesh_1d>(seed);
  else
    WARN("run with 2 or 4 ranks; nothing checked with " << mpi_test::size());
}

TEST_CASE("matmul on MPI: every spec pair and output spec against a serial GEMM",
          "[mpi][matmul]") {
  const std::uint64_t seed = mpi_test::shared_seed();
  INFO("seed " << seed);
  if (mpi_test::size() == 4)
    enumerate<mesh_2x2>(seed);
  else if (mpi_test::size() == 2)
    enumerate<mesh_1d>(seed);
  else
    WARN("run with 2 or 4 ranks; nothing checked with " << mpi_test::size());
}
