// examples/seed003_matmul.cpp: seed 003 (Cophy2024) exercise 3, distributed matrix
// multiplication on a 4 x 2 mesh ('x', 'y') of 16 x 16 matrices:
//   - A @ B on one device, then the three communication-free layouts of the notebook
//     (A rows over x with B columns over y, B replicated, or A replicated), in the global view
//     (ts::matmul, its plan printed);
//   - exercise 3.1: the same three products written per device with ts::shard_map, checked
//     against ts::matmul's values and sharding (the notebook's asserts);
//   - exercise 3.2: a block-sharded A times a row-sharded B, and times a replicated B: the
//     products need communication; each is written with its collectives (psum, psum_scatter,
//     all_gather) and compared with the plan ts::matmul picks, bytes per device included;
//   - exercise 3.3: E = A @ B @ C @ D with the fewest collectives: three strategies, each
//     matmul's plan and cost printed and the collectives counted; and the bonus question (an
//     iterative algorithm without collectives) answered by a loop whose types prove it.
// Every product is compared with a serial triple loop (double accumulation); exit code 1 on
// any mismatch.
//
// Data: std::mt19937 seeded 0, 1, 2, 3 for A, B, C, D (the notebook's PRNGKey(0..3)),
// std::normal_distribution<float>: other values than JAX's, the checks do not depend on them.
// The seed's sizes (16 x 16) are the default, so --large changes nothing.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iostream>
#include <random>
#include <string>
#include <type_traits>

#include <typeshard/typeshard.hpp>

#include "support/print.hpp"

namespace ts = typeshard;
using examples::section;

namespace {

examples::checker check;

constexpr std::size_t n = 16;
using mat16 = ts::extents<n, n>;  // static extents: the plans can count bytes at compile time

ts::host_tensor<float, 2> normal(unsigned key) {
  std::mt19937 rng(key);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  ts::host_tensor<float, 2> t({n, n});
  for (float& v : t.values()) v = dist(rng);
  return t;
}

// max |got - want| / max |want|: products of several random matrices grow, and an error
// relative to the largest element does not blow up on the entries that cancel to near zero.
double scaled_error(const ts::host_tensor<float, 2>& got, const ts::host_tensor<float, 2>& want) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::abs(double(got.data()[i]) - double(want.data()[i])));
    scale = std::max(scale, std::abs(double(want.data()[i])));
  }
  return diff / scale;
}

// jnp.allclose(result, serial), and the result's sharding printed.
template <class Array>
void verify(const std::string& what, const Array& result, const ts::host_tensor<float, 2>& serial) {
  const double err = scaled_error(ts::to_host(result), serial);
  const bool ok = err <= 1e-5;
  std::cout << what << ": " << Array::spec::to_string() << Array::unreduced_type::to_string()
            << (ok ? ", matches" : ", DIFFERS FROM") << " the serial product (error " << err
            << ")\n";
  check(ok, what);
}

// "plan: all_gather(lhs, dim 1, over y); local gemm [1 collective, 128 bytes received per device]"
template <class Plan>
std::string plan_line() {
  return "plan: " + Plan::describe() + "  [" + std::to_string(Plan::collectives) +
         (Plan::collectives == 1 ? " collective, " : " collectives, ") +
         std::to_string(Plan::bytes_per_device) + " bytes received per device]";
}

// The shard_map result must equal ts::matmul's in value and sharding (the notebook's
// `(A @ B).sharding == C.sharding`): the spec is compared by the type system, the devices here.
template <class Mapped, class Global>
void same_as_global(const std::string& what, const Mapped& mapped, const Global& global) {
  static_assert(std::is_same_v<typename Mapped::spec, typename Global::spec>,
                "the shard_map's out spec differs from the sharding ts::matmul gives");
  check(mapped.device_mesh() == global.device_mesh(), what + ": other devices than ts::matmul's");
  const double err = scaled_error(ts::to_host(mapped), ts::to_host(global));
  check(err <= 1e-6, what + ": differs from ts::matmul (error " + std::to_string(err) + ")");
  std::cout << what << ": same sharding and values as ts::matmul\n";
}

}  // namespace

int main(int argc, char** argv) {
  const examples::options opts = examples::parse_options(
      argc, argv,
      "accepted for symmetry with the other examples: the seed's 16 x 16 matrices are "
      "the default already");
  if (opts.exit >= 0) return opts.exit;

  ts::cpu_devices devices{8};
  const ts::host_tensor<float, 2> A = normal(0), B = normal(1), C = normal(2), D = normal(3);
  const auto AB = examples::serial_matmul(A, B);

  section("3", "Matrix multiplication on one device");
  {
    // Arrays on the first device: a mesh of one.
    using mesh_1 = ts::mesh<ts::axis("x", 1)>;
    const ts::device_mesh<mesh_1> first{devices, {0}};
    const auto a = ts::device_put<ts::spec<>, mat16>(first, A);
    const auto b = ts::device_put<ts::spec<>, mat16>(first, B);
    const auto c = ts::matmul(a, b);
    ts::visualize(c);
    verify("A @ B on device 0", c, AB);
  }

  // mesh = jax.make_mesh((4, 2), ('x', 'y'))
  using mesh_4x2 = ts::mesh<ts::axis("x", 4), ts::axis("y", 2)>;
  const ts::device_mesh<mesh_4x2> mesh{devices};
  using P_rows = ts::spec<"x">;             // a_sharding: P('x')
  using P_cols = ts::spec<ts::none, "y">;   // b_sharding: P(None, 'y')
  using P_repl = ts::spec<>;                // fully_replicated: P()
  using P_block = ts::spec<"x", "y">;       // block_sharding: P('x', 'y')
  using P_yrows = ts::spec<"y", ts::none>;  // row_sharding: P('y', None)

  const auto A_sharded = ts::device_put<P_rows, mat16>(mesh, A);
  const auto B_sharded = ts::device_put<P_cols, mat16>(mesh, B);
  const auto A_replicated = ts::device_put<P_repl, mat16>(mesh, A);
  const auto B_replicated = ts::device_put<P_repl, mat16>(mesh, B);

  section("3.0", "A and B partitioned, A partitioned, B partitioned: no communication");
  const auto C_row_col_global = ts::matmul(A_sharded, B_sharded);
  const auto C_row_repl_global = ts::matmul(A_sharded, B_replicated);
  const auto C_repl_col_global = ts::matmul(A_replicated, B_sharded);
  {
    using plan1 = ts::matmul_plan_for<decltype(A_sharded), decltype(B_sharded)>;
    using plan2 = ts::matmul_plan_for<decltype(A_sharded), decltype(B_replicated)>;
    using plan3 = ts::matmul_plan_for<decltype(A_replicated), decltype(B_sharded)>;
    static_assert(ts::communication_free<plan1> && ts::communication_free<plan2> &&
                  ts::communication_free<plan3>);
    std::cout << "\nA rows over x . B columns over y, " << plan_line<plan1>() << "\n";
    ts::visualize(C_row_col_global);
    verify("A_sharded . B_sharded", C_row_col_global, AB);
    std::cout << "\nA rows over x . B replicated, " << plan_line<plan2>() << "\n";
    ts::visualize(C_row_repl_global);
    verify("A_sharded . B_replicated", C_row_repl_global, AB);
    std::cout << "\nA replicated . B columns over y, " << plan_line<plan3>() << "\n";
    ts::visualize(C_repl_col_global);
    verify("A_replicated . B_sharded", C_repl_col_global, AB);
  }

  section("3.1", "Exercise 3.1: the same products with shard_map");
  {
    // doc-snippet: exercise_3_1
    // Each device multiplies the blocks it holds; the out spec says how the blocks tile C.
    const auto local_product = [](const auto& a, const auto& b) { return ts::matmul(a, b); };
    const auto row_col_matmul =
        ts::shard_map<mesh_4x2, ts::specs<P_rows, P_cols>, P_block>(local_product);
    const auto row_replicated_matmul =
        ts::shard_map<mesh_4x2, ts::specs<P_rows, P_repl>, P_rows>(local_product);
    const auto replicated_col_matmul =
        ts::shard_map<mesh_4x2, ts::specs<P_repl, P_cols>, P_cols>(local_product);

    const auto C_row_col = row_col_matmul(A_sharded, B_sharded);                   // [4, 8] blocks
    const auto C_row_replicated = row_replicated_matmul(A_sharded, B_replicated);  // [4, 16]
    const auto C_replicated_col = replicated_col_matmul(A_replicated, B_sharded);  // [16, 8]
    // doc-snippet-end
    same_as_global("row_col_matmul", C_row_col, C_row_col_global);
    same_as_global("row_replicated_matmul", C_row_replicated, C_row_repl_global);
    same_as_global("replicated_col_matmul", C_replicated_col, C_repl_col_global);
    verify("row_col_matmul", C_row_col, AB);
    verify("row_replicated_matmul", C_row_replicated, AB);
    verify("replicated_col_matmul", C_replicated_col, AB);
  }

  section("3.2", "Exercise 3.2: products that need communication");
  const auto A_block_sharded = ts::device_put<P_block, mat16>(mesh, A);
  const auto B_row_sharded = ts::device_put<P_yrows, mat16>(mesh, B);
  ts::visualize(A_block_sharded);
  ts::visualize(B_row_sharded);
  {
    // Without an output sharding the product is left as partial sums over y: A's columns and
    // B's rows (J) are both split over y, so each device's local product is a partial sum,
    // and the type says so (a value the next non-linear operation would refuse).
    const auto partial = ts::matmul(A_block_sharded, B_row_sharded);
    using plan = ts::matmul_plan_for<decltype(A_block_sharded), decltype(B_row_sharded)>;
    static_assert(std::is_same_v<decltype(partial)::unreduced_type, ts::unreduced<"y">>);
    std::cout << "\nA_block . B_row without an output sharding: "
              << decltype(partial)::spec::to_string()
              << decltype(partial)::unreduced_type::to_string() << ", " << plan_line<plan>()
              << "\n";

    // doc-snippet: exercise_3_2
    // Block x row: multiply the local blocks, then sum the partial products over y: psum
    // leaves every device of a y-group the whole rows (P('x', None)), psum_scatter leaves
    // each its own columns (P('x', 'y')), for half the bytes.
    const auto A_block_matmul = ts::shard_map<mesh_4x2, ts::specs<P_block, P_yrows>, P_rows>(
        [](const auto& a, const auto& b) { return ts::psum<"y">(ts::matmul(a, b)); });
    const auto A_block_matmul_scatter =
        ts::shard_map<mesh_4x2, ts::specs<P_block, P_yrows>, P_block>(
            [](const auto& a, const auto& b) {
              return ts::psum_scatter<"y">(ts::matmul(a, b), 1);
            });
    // doc-snippet-end
    const auto C_A_block = A_block_matmul(A_block_sharded, B_row_sharded);
    const auto C_A_block_scatter = A_block_matmul_scatter(A_block_sharded, B_row_sharded);

    using plan_rows =
        ts::matmul_plan_for<decltype(A_block_sharded), decltype(B_row_sharded), P_rows>;
    using plan_block =
        ts::matmul_plan_for<decltype(A_block_sharded), decltype(B_row_sharded), P_block>;
    std::cout << "ts::matmul<P('x', None)>, " << plan_line<plan_rows>() << "\n";
    std::cout << "ts::matmul<P('x', 'y')>, " << plan_line<plan_block>() << "\n";
    same_as_global("A_block_matmul (psum)", C_A_block,
                   ts::matmul<P_rows>(A_block_sharded, B_row_sharded));
    same_as_global("A_block_matmul (psum_scatter)", C_A_block_scatter,
                   ts::matmul<P_block>(A_block_sharded, B_row_sharded));
    verify("A_block_matmul (psum)", C_A_block, AB);
    verify("A_block_matmul (psum_scatter)", C_A_block_scatter, AB);
  }
  {
    // Block x replicated: two ways. Gather A's columns over y and multiply by all of B; or
    // multiply A's block by the rows of B that match its columns (a local slice of the
    // replicated B) and sum the partial products over y. The slice depends on the device's y
    // coordinate, so its type must say it varies over y (rule 4 would otherwise accept a
    // replicated out spec for values that differ).
    const auto gather_then_multiply = ts::shard_map<mesh_4x2, ts::specs<P_block, P_repl>, P_rows>(
        [](const auto& a, const auto& b) { return ts::matmul(ts::all_gather<"y">(a, 1), b); });
    const auto slice_multiply_psum = ts::shard_map<mesh_4x2, ts::specs<P_block, P_repl>, P_rows>(
        [](const ts::shard_context<mesh_4x2>& ctx, const auto& a, const auto& b) {
          const std::size_t k = a.extent(1), first = ctx.axis_index<"y">() * k;
          ts::block<float, 2, mesh_4x2, ts::vary<mesh_4x2, "y">> b_rows(ctx, {k, b.extent(1)});
          std::copy_n(b.data() + first * b.extent(1), k * b.extent(1), b_rows.data());
          return ts::psum<"y">(ts::matmul(a, b_rows));
        });
    const auto C1 = gather_then_multiply(A_block_sharded, B_replicated);
    const auto C2 = slice_multiply_psum(A_block_sharded, B_replicated);
    using plan = ts::matmul_plan_for<decltype(A_block_sharded), decltype(B_replicated), P_rows>;
    // Gathering A's [4, 8] blocks receives 4 * 8 floats per device, psum's ring receives
    // 2 * (2 - 1) / 2 * 4 * 16: the planner picks the gather.
    static_assert(plan::steps[0].kind == ts::step_kind::all_gather);
    std::cout << "\nA_block . B_replicated, ts::matmul<P('x', None)>, " << plan_line<plan>()
              << "\n";
    same_as_global("all_gather over y, then A . B", C1,
                   ts::matmul<P_rows>(A_block_sharded, B_replicated));
    same_as_global("slice B, local product, psum over y", C2,
                   ts::matmul<P_rows>(A_block_sharded, B_replicated));
    verify("block . replicated (all_gather)", C1, AB);
    verify("block . replicated (psum)", C2, AB);
  }

  section("3.3", "Exercise 3.3: E = A @ B @ C @ D with the fewest collectives");
  const auto ABCD = examples::serial_matmul(examples::serial_matmul(AB, C), D);
  {
    // Strategy 1: A's rows over both axes, B, C and D replicated. Every product keeps A's
    // row sharding and needs nothing from other devices: no collective at all (the price:
    // each device stores B, C and D whole).
    // doc-snippet: chain
    using P_all_rows = ts::spec<ts::axes("x", "y"), ts::none>;  // P(('x', 'y'), None)
    const auto a = ts::device_put<P_all_rows, mat16>(mesh, A);
    const auto b = ts::device_put<P_repl, mat16>(mesh, B);
    const auto c = ts::device_put<P_repl, mat16>(mesh, C);
    const auto d = ts::device_put<P_repl, mat16>(mesh, D);
    const auto ab = ts::matmul(a, b);
    const auto abc = ts::matmul(ab, c);
    const auto abcd = ts::matmul(abc, d);
    using p1 = ts::matmul_plan_for<decltype(a), decltype(b)>;
    using p2 = ts::matmul_plan_for<decltype(ab), decltype(c)>;
    using p3 = ts::matmul_plan_for<decltype(abc), decltype(d)>;
    static_assert(ts::communication_free<p1> && ts::communication_free<p2> &&
                  ts::communication_free<p3>);
    // doc-snippet-end
    std::cout << "\nstrategy 1: A P(('x', 'y'), None); B, C, D replicated\n"
              << "  A @ B:   " << plan_line<p1>() << "\n  AB @ C:  " << plan_line<p2>()
              << "\n  ABC @ D: " << plan_line<p3>()
              << "\n  collectives: " << p1::collectives + p2::collectives + p3::collectives
              << "; each device stores 3 * 16 * 16 + 2 * 16 floats\n";
    ts::visualize(abcd);
    verify("strategy 1, process_allgather(ABCD)", abcd, ABCD);

    // Bonus: in an iterative algorithm (E <- E @ B @ C @ D, a power iteration) the same
    // layout avoids collectives in every iteration: the result comes out sharded as the
    // input goes in. The loop compiles only because the product has exactly E's type, so the
    // types show that no iteration reshards; the static_asserts above, that none communicates.
    auto e = a;
    ts::host_tensor<float, 2> e_serial = A;
    for (int it = 0; it < 3; ++it) {
      e = ts::matmul(ts::matmul(ts::matmul(e, b), c), d);
      e_serial = examples::serial_matmul(
          examples::serial_matmul(examples::serial_matmul(e_serial, B), C), D);
    }
    static_assert(std::is_same_v<decltype(e), std::remove_const_t<decltype(abcd)>>);
    std::cout << "bonus: 3 iterations of E <- E @ B @ C @ D, E stays "
              << decltype(e)::spec::to_string() << ", 0 collectives\n";
    verify("bonus, 3 iterations", e, e_serial);
  }
  {
    // Strategy 2: keep every matrix sharded (Megatron's alternation): A's rows over x, B's
    // columns over y, C's rows over y, D's columns over y. A @ B and ABC @ D are local; AB @ C
    // contracts over y and needs one psum. One collective, B, C, D stored in halves.
    const auto a = ts::device_put<P_rows, mat16>(mesh, A);
    const auto b = ts::device_put<P_cols, mat16>(mesh, B);
    const auto c = ts::device_put<P_yrows, mat16>(mesh, C);
    const auto d = ts::device_put<P_cols, mat16>(mesh, D);
    const auto ab = ts::matmul(a, b);            // P('x', 'y')
    const auto abc = ts::matmul<P_rows>(ab, c);  // psum over y -> P('x', None)
    const auto abcd = ts::matmul(abc, d);        // P('x', 'y')
    using p1 = ts::matmul_plan_for<decltype(a), decltype(b)>;
    using p2 = ts::matmul_plan_for<decltype(ab), decltype(c), P_rows>;
    using p3 = ts::matmul_plan_for<decltype(abc), decltype(d)>;
    static_assert(p1::collectives + p2::collectives + p3::collectives == 1);
    std::cout << "\nstrategy 2: A P('x', None), B P(None, 'y'), C P('y', None), D P(None, 'y')\n"
              << "  A @ B:   " << plan_line<p1>() << "\n  AB @ C:  " << plan_line<p2>()
              << "\n  ABC @ D: " << plan_line<p3>()
              << "\n  collectives: " << p1::collectives + p2::collectives + p3::collectives << "\n";
    verify("strategy 2, process_allgather(ABCD)", abcd, ABCD);
  }
  {
    // Strategy 3, for contrast: every matrix block-sharded P('x', 'y') and every product asked
    // to come out block-sharded too. Each product gathers or reduces.
    const auto a = ts::device_put<P_block, mat16>(mesh, A);
    const auto b = ts::device_put<P_block, mat16>(mesh, B);
    const auto c = ts::device_put<P_block, mat16>(mesh, C);
    const auto d = ts::device_put<P_block, mat16>(mesh, D);
    const auto ab = ts::matmul<P_block>(a, b);
    const auto abc = ts::matmul<P_block>(ab, c);
    const auto abcd = ts::matmul<P_block>(abc, d);
    using p = ts::matmul_plan_for<decltype(a), decltype(b), P_block>;
    std::cout << "\nstrategy 3: everything P('x', 'y')\n  each product: " << plan_line<p>()
              << "\n  collectives: " << 3 * p::collectives << "\n";
    verify("strategy 3, process_allgather(ABCD)", abcd, ABCD);
  }

  return check.exit_code("seed003_matmul");
}
