// examples/tutorial.cpp: seed 001 ("Tutorial 1: Parallelization Basics") end to end, in C++.
//
// On 8 simulated CPU devices (JAX: XLA_FLAGS=--xla_force_host_platform_device_count=8), in
// the notebook's order:
//   1.1  the 2x2 mesh and its devices
//   2.1  an 8192 x 8192 matrix sharded P('x', 'y'), and its picture
//   2.2  its addressable shards
//   2.3  sin on one device against sin on four (timed: median of 5 runs, printed, not checked;
//        TYPESHARD_TUTORIAL_TIMED_SIZE=n times an n x n matrix, as the MPI tests do)
//   2.4  each sharding strategy with its picture
//   3.1  element-wise operations keep their sharding
//   3.2-3.5  the four sharded-matmul cases, each through ts::matmul with the plan the compiler
//        chose printed beside it (and static_asserted), and through ts::shard_map as the
//        notebook writes them; between them the collective demos with the notebook's numbers:
//        all_gather of [3 9 5 2], psum giving [22 20 12 17], psum_scatter giving [22] [20]
//        [12] [17]
//   3.6  the all_to_all table
// Every result is checked against a serial computation on the same data; the exit code is
// 1 on any mismatch. docs/tutorial.md shows this program's output (docs/generate.py runs it).
//
// Random data: the notebook draws A with jax.random.uniform(PRNGKey(42)); this program draws
// from std::mt19937 seeded with 42, so the values differ from JAX's (the checks do not
// depend on them).
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include <typeshard/typeshard.hpp>

#include "support/blocks.hpp"
#include "support/print.hpp"

namespace ts = typeshard;
using examples::numpy_str;
using examples::section;

namespace {

examples::checker check;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh1d = ts::mesh<ts::axis("i", 4)>;

// "[0, 1, 2, 3]", as Python prints [d.id for d in mesh.devices.flat].
std::string id_list(const std::vector<ts::device_id>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  return out + "]";
}

// Whether every shard of `a` holds the host data at its index (the serial view of sharding).
template <class Array, class T>
bool shards_hold_their_slices(const Array& a, const ts::host_tensor<T, 2>& host) {
  for (const auto& s : a.addressable_shards())
    for (std::size_t i = 0; i < s.shape[0]; ++i)
      for (std::size_t j = 0; j < s.shape[1]; ++j)
        if (s.data[i * s.shape[1] + j] != host(s.index[0].start + i, s.index[1].start + j))
          return false;
  return true;
}

// ---- the collective demos ----------------------------------------------------------------

// What each device held before and after the collective, as the notebook's print() calls
// inside the shard_mapped function show it.
template <class T>
struct trace {
  std::vector<ts::host_tensor<T, 1>> before = std::vector<ts::host_tensor<T, 1>>(mesh1d::size);
  std::vector<ts::host_tensor<T, 1>> after = std::vector<ts::host_tensor<T, 1>>(mesh1d::size);
};

// Splits `all`, the devices' blocks concatenated along P('i'), into one block per device.
// (A function of the element type only, not of the collective traced below.)
template <class T>
void record_blocks(const ts::host_tensor<T, 1>& all, std::vector<ts::host_tensor<T, 1>>& blocks) {
  const std::size_t n = all.size() / mesh1d::size;
  for (std::size_t p = 0; p < mesh1d::size; ++p)
    blocks[p] = ts::host_tensor<T, 1>(
        {n}, std::vector<T>(all.data() + p * n, all.data() + (p + 1) * n));
}

// Runs `op` on each device's block of x under shard_map<mesh1d, P('i'), OutSpec>, recording
// the blocks: the shard_map also returns each device's input and output block, concatenated
// along P('i'), so that every process sees every device's (under MPI a device's block lives
// in its own rank).
template <class OutSpec, class T, class Op>
ts::host_tensor<T, 1> traced(const ts::device_mesh<mesh1d>& m, const ts::host_tensor<T, 1>& x,
                             trace<T>& t, Op op) {
  using P_i = ts::spec<"i">;
  const auto f = ts::shard_map<mesh1d, P_i, ts::specs<OutSpec, P_i, P_i>>([&](const auto& x_block) {
    auto y_block = op(x_block);
    return std::tuple{y_block, y_block, x_block};
  });
  const auto [y, after, before] = f(ts::device_put<P_i>(m, x));
  record_blocks(ts::to_host(before), t.before);
  record_blocks(ts::to_host(after), t.after);
  return ts::to_host(y);
}

template <class T>
void print_blocks(const char* when, const ts::device_mesh<mesh1d>& m,
                  const std::vector<ts::host_tensor<T, 1>>& blocks) {
  std::cout << when << ":\n";
  for (std::size_t p = 0; p < mesh1d::size; ++p)
    std::cout << "On " << m.get_backend().describe(m.device_at(p)).to_string()
              << " at mesh coordinates " << examples::mesh_coordinates<mesh1d>(p) << ":\n"
              << numpy_str(blocks[p]) << "\n";
}

template <class T>
void print_trace(const ts::device_mesh<mesh1d>& m, const trace<T>& t,
                 const ts::host_tensor<T, 1>& result) {
  print_blocks("BEFORE", m, t.before);
  print_blocks("AFTER", m, t.after);
  std::cout << "FINAL RESULT:\n" << numpy_str(result) << "\n";
}

// The serial view of x's four blocks: block(x, r) is device r's.
template <class T>
std::vector<T> block(const ts::host_tensor<T, 1>& x, std::size_t r) {
  const std::size_t n = x.size() / mesh1d::size;
  return {x.data() + r * n, x.data() + (r + 1) * n};
}
template <class T>
std::vector<T> values(const ts::host_tensor<T, 1>& t) {
  return {t.values().begin(), t.values().end()};
}

// ---- 2.3: sin on one device against sin on four --------------------------------------------

// The side of the matrix section 2.3 times: the notebook's (`notebook`), unless
// TYPESHARD_TUTORIAL_TIMED_SIZE=n asks for an n x n one. The MPI tests set it (examples/
// CMakeLists.txt), for the thread run they compare with as well: under mpiexec, to_host hands
// every rank the whole result, and 256 MB to 8 ranks twice cost 20 s (60 s over TCP). Only
// timings, which no test compares, depend on the size.
std::size_t timed_matrix_size(std::size_t notebook) {
  const char* asked = std::getenv("TYPESHARD_TUTORIAL_TIMED_SIZE");
  if (asked == nullptr || *asked == '\0') return notebook;
  char* end = nullptr;
  const unsigned long n = std::strtoul(asked, &end, 10);
  if (*end != '\0' || n == 0 || n > notebook) {
    std::cerr << "TYPESHARD_TUTORIAL_TIMED_SIZE=" << asked << ": expected a size from 1 to "
              << notebook << "; timing the notebook's " << notebook << " x " << notebook << "\n";
    return notebook;
  }
  return n;
}

// `matrix` on one device against `sharded_matrix` (the same values, P('x', 'y') on 4).
template <class Devices, class Sharded>
void performance_benefits(Devices& devices, const ts::host_tensor<float, 2>& matrix,
                          const Sharded& sharded_matrix) {
  // doc-snippet: sin
  // `matrix` on a single device, as jnp.ones puts it: a mesh of one device.
  using mesh_1 = ts::mesh<ts::axis("x", 1)>;
  const ts::device_mesh<mesh_1> one_device{devices, {0}};
  const auto on_one = ts::device_put<ts::spec<ts::none, ts::none>>(one_device, matrix);

  const double one_ms = examples::median_ms(5, [&] { (void)ts::sin(on_one); });
  const double four_ms = examples::median_ms(5, [&] { (void)ts::sin(sharded_matrix); });
  std::cout << "sin on 1 device:  " << examples::format_ms(one_ms) << " (median of 5 runs)\n";
  std::cout << "sin on 4 devices: " << examples::format_ms(four_ms) << " (median of 5 runs)\n";
  // doc-snippet-end
  std::cout << "(" << std::thread::hardware_concurrency()
            << " hardware threads here: 4 devices can be at most that many times faster)\n";

  // sin on the shards is the serial sin of each element.
  const ts::host_tensor<float, 2> got = ts::to_host(ts::sin(sharded_matrix));
  bool same = true;
  for (std::size_t i = 0; i < got.size(); ++i)
    same = same && std::abs(got.data()[i] - std::sin(matrix.data()[i])) <= 1e-6f;
  check(same, "sin of the sharded matrix differs from the serial sin");
  check(ts::to_host(ts::sin(on_one)) == got, "sin on one device differs from sin on four");
}

// ---- the matmul cases --------------------------------------------------------------------

// Prints "Correct result: true" as the notebook does, and counts a mismatch if not.
template <class Array>
ts::host_tensor<float, 2> verify(const std::string& what, const Array& c,
                                 const ts::host_tensor<float, 2>& expected) {
  const ts::host_tensor<float, 2> got = ts::to_host(c);
  const bool ok = examples::allclose(got, expected);
  std::cout << "Correct result (" << what << "): " << (ok ? "true" : "false") << "\n";
  check(ok, what + ": differs from the serial product A @ B");
  return got;
}

}  // namespace

int main(int argc, char** argv) {
  const examples::options opts = examples::parse_options(
      argc, argv, "accepted for symmetry with the other examples: seed 001's sizes are "
                  "already the notebook's (8192 x 8192)");
  if (opts.exit >= 0) return opts.exit;

  // ---- 1. Multi-device computation --------------------------------------------------------
  section("1", "Multi-device computation");
  // doc-snippet: devices
  ts::cpu_devices devices{8};  // XLA_FLAGS=--xla_force_host_platform_device_count=8
  std::string available;
  for (ts::device_id d = 0; d < devices.device_count(); ++d)
    available += (d ? ", " : "") + devices.describe(d).to_string();
  std::cout << "Available devices: [" << available << "]\n";
  std::cout << "Device count: " << devices.device_count() << "\n";
  // doc-snippet-end
  check(devices.device_count() == 8, "device count");

  section("1.1", "Creating a device mesh");
  // doc-snippet: mesh
  using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
  const ts::device_mesh<mesh_2x2> mesh_2d{devices, {0, 1, 2, 3}};  // jax.make_mesh((2, 2), ('x', 'y')): the first 4
  std::cout << "2D Mesh: " << mesh_2x2::to_string() << "\n";
  std::cout << id_list(mesh_2d.devices()) << "\n";
  // doc-snippet-end
  check(id_list(mesh_2d.devices()) == "[0, 1, 2, 3]", "the mesh takes devices 0..3 in order");

  // ---- 2. Sharded matrices ------------------------------------------------------------------
  section("2.1", "Device mesh and partition specifications");
  // doc-snippet: matrix
  constexpr std::size_t matrix_size = 8192;
  const ts::host_tensor<float, 2> matrix({matrix_size, matrix_size}, 1.0f);  // jnp.ones
  std::cout << "Matrix shape: " << ts::to_string(matrix.extents()) << ", Size in memory: "
            << matrix.size() * sizeof(float) / (1024.0 * 1024.0) << " MB\n";

  const auto sharded_matrix = ts::device_put<ts::spec<"x", "y">>(mesh_2d, matrix);
  std::cout << "Sharding spec: " << sharded_matrix.sharding_string() << "\n";
  ts::visualize(sharded_matrix);
  // doc-snippet-end
  check(shards_hold_their_slices(sharded_matrix, matrix), "P('x', 'y'): a shard holds other data");

  section("2.2", "Inspecting sharded matrices");
  // doc-snippet: shards
  std::cout << "Global matrix shape " << ts::to_string(sharded_matrix.extents()) << "\n";
  std::cout << "Shapes of Matrix Shards:\n";
  // Every shard, this process's or not (under MPI, addressable_shards() holds one rank's).
  for (std::size_t p = 0; p < mesh_2x2::size; ++p)
    std::cout << devices.describe(mesh_2d.device_at(p)).to_string() << " "
              << ts::to_string(sharded_matrix.index(p)) << " "
              << ts::to_string(sharded_matrix.local_shape(p)) << "\n";
  // doc-snippet-end
  for (const auto& shard : sharded_matrix.addressable_shards())
    check(shard.shape == ts::shape<2>{matrix_size / 2, matrix_size / 2},
          "P('x', 'y'): every shard is a quarter of the matrix");

  section("2.3", "Performance benefits");
  if (const std::size_t n = timed_matrix_size(matrix_size); n == matrix_size) {
    performance_benefits(devices, matrix, sharded_matrix);
  } else {
    const ts::host_tensor<float, 2> smaller({n, n}, 1.0f);
    performance_benefits(devices, smaller, ts::device_put<ts::spec<"x", "y">>(mesh_2d, smaller));
  }

  section("2.4", "Sharding strategies");
  {
    // doc-snippet: strategies
    const auto ix_jy = ts::device_put<ts::spec<"x", "y">>(mesh_2d, matrix);
    std::cout << "P('x', 'y'): rows over x, columns over y\n";
    ts::visualize(ix_jy);

    const auto iy_jx = ts::device_put<ts::spec<"y", "x">>(mesh_2d, matrix);
    std::cout << "P('y', 'x'): rows over y, columns over x\n";
    ts::visualize(iy_jx);

    const auto ix_j = ts::device_put<ts::spec<"x", ts::none>>(mesh_2d, matrix);
    std::cout << "P('x', None): rows over x, columns replicated\n";
    ts::visualize(ix_j);

    const auto i_jy = ts::device_put<ts::spec<ts::none, "y">>(mesh_2d, matrix);
    std::cout << "P(None, 'y'): rows replicated, columns over y\n";
    ts::visualize(i_jy);
    // doc-snippet-end
    check(shards_hold_their_slices(ix_jy, matrix), "P('x', 'y') shards");
    check(shards_hold_their_slices(iy_jx, matrix), "P('y', 'x') shards");
    check(shards_hold_their_slices(ix_j, matrix), "P('x', None) shards");
    check(shards_hold_their_slices(i_jy, matrix), "P(None, 'y') shards");
    // The replica groups the notebook's pictures show: "TPU 0,1 / TPU 2,3" and "TPU 0,2 | TPU 1,3".
    using rows_x = decltype(ix_j)::layout_type;
    using cols_y = decltype(i_jy)::layout_type;
    check(rows_x::replica_groups() == std::vector<std::vector<std::size_t>>{{0, 1}, {2, 3}},
          "P('x', None) replica groups");
    check(cols_y::replica_groups() == std::vector<std::vector<std::size_t>>{{0, 2}, {1, 3}},
          "P(None, 'y') replica groups");
  }

  // ---- 3. Collective operations -------------------------------------------------------------
  section("3.1", "Element-wise operations keep their sharding");
  {
    // A small matrix, so that the values can be printed: x[i][j] = i * 4 + j - 6.
    ts::host_tensor<float, 2> host({4, 4});
    for (std::size_t i = 0; i < host.size(); ++i) host.data()[i] = static_cast<float>(i) - 6.0f;
    // doc-snippet: elementwise
    const auto x = ts::device_put<ts::spec<"x", "y">>(mesh_2d, host);
    const auto y = ts::relu(x) * 2.0f + ts::sin(x);  // each device computes its own block
    static_assert(std::is_same_v<decltype(y)::spec, ts::spec<"x", "y">>);  // no resharding
    std::cout << "relu(x) * 2 + sin(x), sharded " << decltype(y)::spec::to_string() << ":\n"
              << numpy_str(ts::to_host(y)) << "\n";
    ts::visualize(y);
    // x + ts::device_put<ts::spec<"y", "x">>(mesh_2d, host) does not compile (rule 5):
    //   typeshard: rule 5 (elementwise): the operands have different specs; fix: bring one
    //   to the other's spec first with ts::reshard<Spec>(array)
    const auto x_t = ts::device_put<ts::spec<"y", "x">>(mesh_2d, host);
    const auto z = x + ts::reshard<ts::spec<"x", "y">>(x_t);
    // doc-snippet-end
    ts::host_tensor<float, 2> want({4, 4}), twice({4, 4});
    for (std::size_t i = 0; i < host.size(); ++i) {
      const float v = host.data()[i];
      want.data()[i] = (v < 0 ? 0.0f : v) * 2.0f + std::sin(v);
      twice.data()[i] = v + v;
    }
    check(examples::allclose(ts::to_host(y), want), "relu(x) * 2 + sin(x)");
    check(ts::to_host(z) == twice, "x + reshard(x')");
  }

  // The notebook's matrices for cases 2 to 4: A = arange(16).reshape(4, 4), B = arange(16, 32).
  const ts::host_tensor<float, 2> A = ts::reshape<2>(ts::arange<float>(16), {4, 4});
  ts::host_tensor<float, 2> B({4, 4});
  for (std::size_t i = 0; i < B.size(); ++i) B.data()[i] = static_cast<float>(16 + i);
  const ts::host_tensor<float, 2> C_expected = examples::serial_matmul(A, B);  // A @ B

  section("3.2", "Case 1: no sharded contracting dimension");
  {
    // A = uniform(key, (4, 4)), B = uniform(key, (4, 4)) + 1 with the same key: B = A + 1.
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    ts::host_tensor<float, 2> A1({4, 4}), B1({4, 4});
    for (std::size_t i = 0; i < A1.size(); ++i) {
      A1.data()[i] = uniform(rng);
      B1.data()[i] = A1.data()[i] + 1.0f;
    }
    // doc-snippet: case1
    // A[I_X, J] . B[J, K_Y] -> C[I_X, K_Y]: J is sharded in neither operand.
    const auto A_sharded = ts::device_put<ts::spec<"x", ts::none>>(mesh_2d, A1);
    const auto B_sharded = ts::device_put<ts::spec<ts::none, "y">>(mesh_2d, B1);
    std::cout << "Matrix A sharding (rows split along X):\n";
    ts::visualize(A_sharded);
    std::cout << "Matrix B sharding (columns split along Y):\n";
    ts::visualize(B_sharded);

    const auto C = ts::matmul(A_sharded, B_sharded);
    using plan = ts::matmul_plan_for<decltype(A_sharded), decltype(B_sharded)>;
    static_assert(ts::communication_free<plan>);  // no collective: each device its own block
    static_assert(std::is_same_v<decltype(C)::spec, ts::spec<"x", "y">>);
    std::cout << "plan: " << plan::describe() << "\n";
    std::cout << "Result C sharding (both dimensions sharded): " << decltype(C)::spec::to_string()
              << "\n";
    ts::visualize(C);
    // doc-snippet-end
    verify("case 1, ts::matmul", C, examples::serial_matmul(A1, B1));
    std::cout << "C shape: " << ts::to_string(C.extents()) << "\n";
  }

  section("3.3", "Case 2: one matrix has a sharded contracting dimension");
  {
    // doc-snippet: case2-problem
    // A[I, J_X] . B[J, K]: each device holds only half of A's columns.
    const auto A_sharded = ts::device_put<ts::spec<ts::none, "x">>(mesh_2d, A);
    const auto B_replicated = ts::device_put<ts::spec<ts::none, ts::none>>(mesh_2d, B);
    std::cout << "Matrix A sharding (columns split along X - contracting dimension):\n";
    ts::visualize(A_sharded, {.use_color = false});
    std::cout << "Matrix B (replicated on all devices):\n";
    ts::visualize(B_replicated, {.use_color = false});
    std::cout << "What each device sees locally:\n";
    const auto A_blocks = examples::every_block(A_sharded);  // each device's, on every process
    for (std::size_t p = 0; p < A_blocks.size(); ++p) {
      if (p != 0 && p != 2) continue;  // one device per x
      std::cout << "Device " << mesh_2d.device_at(p) << " has A columns "
                << A_sharded.index(p)[1].to_string() << ":\n"
                << numpy_str(A_blocks[p]) << "\n";
    }
    // doc-snippet-end
    for (const auto& shard : A_sharded.addressable_shards()) {
      const std::size_t x = mesh_2x2::coordinates(shard.mesh_position)[0];
      check(shard.index[1] == ts::slice{2 * x, 2 * x + 2}, "case 2: device columns");
    }
  }

  // 3.3: the all_gather demo, on a 1-D mesh of the first four devices.
  // doc-snippet: mesh1d
  using mesh1d = ts::mesh<ts::axis("i", 4)>;
  const ts::device_mesh<mesh1d> mesh_1d{devices, {0, 1, 2, 3}};  // Mesh(jax.devices()[:4], ('i',))
  // doc-snippet-end
  const ts::host_tensor<int, 1> sixteen({16}, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 1, 2});

  section("3.3.1", "All-gather");
  {
    const ts::host_tensor<int, 1> x({4}, {3, 9, 5, 2});
    trace<int> t;
    // doc-snippet: all_gather
    // shard_map(mesh=mesh1d, in_specs=P('i'), out_specs=P('i')) of
    // jax.lax.all_gather(x, 'i', tiled=True)
    const auto y = traced<ts::spec<"i">>(mesh_1d, x, t, [](const auto& x_block) {
      return ts::all_gather<"i">(x_block, 0);
    });
    // doc-snippet-end
    print_trace(mesh_1d, t, y);
    // Serial: every device ends with the whole x; P('i') out concatenates the four copies.
    std::vector<int> four_copies;
    for (std::size_t r = 0; r < 4; ++r) {
      check(values(t.before[r]) == block(x, r),
            "all_gather: device " + std::to_string(r) + " before");
      check(t.after[r] == x, "all_gather: device " + std::to_string(r) + " after");
      four_copies.insert(four_copies.end(), x.values().begin(), x.values().end());
    }
    check(values(y) == four_copies, "all_gather: final result");
  }

  section("3.3.2", "Case 2 with an all-gather");
  {
    const auto A_sharded = ts::device_put<ts::spec<ts::none, "x">>(mesh_2d, A);
    const auto B_replicated = ts::device_put<ts::spec<ts::none, ts::none>>(mesh_2d, B);
    // doc-snippet: case2
    // Global view: the compiler sees J sharded over x in A only, and gathers A.
    const auto C = ts::matmul(A_sharded, B_replicated);
    using plan = ts::matmul_plan_for<decltype(A_sharded), decltype(B_replicated)>;
    static_assert(plan::steps[0].kind == ts::step_kind::all_gather);
    static_assert(!ts::communication_free<plan>);
    std::cout << "plan: " << plan::describe() << "\n";
    std::cout << "Result C (replicated on all devices):\n";
    ts::visualize(C);

    // Per device, as the notebook writes it: all_gather A's columns, then multiply.
    std::string log;
    const auto matmul_with_allgather =
        ts::shard_map<mesh_2x2, ts::specs<ts::spec<ts::none, "x">, ts::spec<ts::none, ts::none>>,
                      ts::spec<ts::none, ts::none>>(
            [&](const ts::shard_context<mesh_2x2>& c, const auto& A_shard, const auto& B_shard) {
              const auto A_full = ts::all_gather<"x">(A_shard, 1);
              if (c.position() == 0)
                log = "Before all-gather, A_shard shape: " + ts::to_string(A_shard.extents()) +
                      "\nAfter all-gather, A_full shape: " + ts::to_string(A_full.extents()) + "\n";
              return ts::matmul(A_full, B_shard);
            });
    const auto C_manual = matmul_with_allgather(A_sharded, B_replicated);
    std::cout << log;
    // doc-snippet-end
    const ts::host_tensor<float, 2> got = verify("case 2, ts::matmul", C, C_expected);
    verify("case 2, shard_map", C_manual, C_expected);
    std::cout << "Result shape: " << ts::to_string(got.extents()) << "\n";
    std::cout << "First few elements of result:\n"
              << numpy_str(examples::corner(got, 2, 2)) << "\n";
  }

  section("3.4", "Case 3: both matrices have sharded contracting dimensions");
  {
    // doc-snippet: case3-problem
    // A[I, J_X] . B[J_X, K]: each device can multiply its blocks, but gets a partial sum.
    const auto A_sharded = ts::device_put<ts::spec<ts::none, "x">>(mesh_2d, A);
    const auto B_sharded = ts::device_put<ts::spec<"x", ts::none>>(mesh_2d, B);
    std::cout << "Matrix A sharding (columns split along X):\n";
    ts::visualize(A_sharded, {.use_color = false});
    std::cout << "Matrix B sharding (rows split along X):\n";
    ts::visualize(B_sharded, {.use_color = false});

    const auto C_partial = ts::matmul(A_sharded, B_sharded);  // no output spec: C{U_x}
    static_assert(std::is_same_v<decltype(C_partial)::unreduced_type, ts::unreduced<"x">>);
    std::cout << "ts::matmul(A, B) without an output spec: plan "
              << ts::matmul_plan_for<decltype(A_sharded), decltype(B_sharded)>::describe()
              << ", result unreduced " << decltype(C_partial)::unreduced_type::to_string() << "\n";
    const auto C_blocks = examples::every_block(C_partial);  // the partial sums
    for (std::size_t p = 0; p < C_blocks.size(); ++p) {
      const std::size_t x = mesh_2x2::coordinates(p)[0];
      if (mesh_2x2::coordinates(p)[1] != 0) continue;  // one device per x
      const std::string j = std::to_string(2 * x) + ":" + std::to_string(2 * x + 2);
      std::cout << "Device " << mesh_2d.device_at(p) << ": A[:, " << j << "] @ B[" << j
                << ", :] = partial result\n"
                << numpy_str(C_blocks[p]) << "\n";
    }
    // ts::to_host(C_partial) or ts::sin(C_partial) does not compile (rule 3): a partial sum
    // must be reduced first.
    // doc-snippet-end
    for (const auto& shard : C_partial.addressable_shards()) {
      const std::size_t x = mesh_2x2::coordinates(shard.mesh_position)[0];
      ts::host_tensor<float, 2> a_cols({4, 2}), b_rows({2, 4});
      for (std::size_t i = 0; i < 4; ++i)
        for (std::size_t j = 0; j < 2; ++j) {
          a_cols(i, j) = A(i, 2 * x + j);
          b_rows(j, i) = B(2 * x + j, i);
        }
      check(shard.to_host() == examples::serial_matmul(a_cols, b_rows),
            "case 3: the partial sum of device " + std::to_string(shard.device.id));
    }
  }

  section("3.4.1", "All-reduce (psum)");
  {
    trace<int> t;
    // doc-snippet: psum
    // shard_map(mesh=mesh1d, in_specs=P('i'), out_specs=P(None)) of jax.lax.psum(x, 'i')
    const auto y = traced<ts::spec<ts::none>>(mesh_1d, sixteen, t, [](const auto& x_block) {
      return ts::psum<"i">(x_block);
    });
    // doc-snippet-end
    print_trace(mesh_1d, t, y);
    std::vector<int> sum(4, 0);  // serial: the four blocks added
    for (std::size_t r = 0; r < 4; ++r)
      for (std::size_t k = 0; k < 4; ++k) sum[k] += block(sixteen, r)[k];
    for (std::size_t r = 0; r < 4; ++r)
      check(values(t.after[r]) == sum, "psum: device " + std::to_string(r));
    check(values(y) == sum, "psum: final result");
  }

  section("3.4.2", "Case 3 with an all-reduce");
  {
    const auto A_sharded = ts::device_put<ts::spec<ts::none, "x">>(mesh_2d, A);
    const auto B_sharded = ts::device_put<ts::spec<"x", ts::none>>(mesh_2d, B);
    // doc-snippet: case3
    // Naming the output spec reduces the partial sums: replicated over x is a psum...
    const auto C = ts::matmul<ts::spec<ts::none, ts::none>>(A_sharded, B_sharded);
    using plan = ts::matmul_plan_for<decltype(A_sharded), decltype(B_sharded),
                                     ts::spec<ts::none, ts::none>>;
    static_assert(plan::steps.back().kind == ts::step_kind::psum);
    std::cout << "plan: " << plan::describe() << "\n";
    std::cout << "Result C (replicated on all devices after all-reduce):\n";
    ts::visualize(C);
    // ... and sharded over x is a psum_scatter (reduce-scatter).
    const auto C_rows = ts::matmul<ts::spec<"x", ts::none>>(A_sharded, B_sharded);
    using plan_rows = ts::matmul_plan_for<decltype(A_sharded), decltype(B_sharded),
                                          ts::spec<"x", ts::none>>;
    static_assert(plan_rows::steps.back().kind == ts::step_kind::psum_scatter);
    std::cout << "with output spec P('x', None), plan: " << plan_rows::describe() << "\n";
    ts::visualize(C_rows, {.use_color = false});

    // Per device, as the notebook writes it: local product, then psum over x.
    std::string log;
    const auto matmul_with_allreduce =
        ts::shard_map<mesh_2x2, ts::specs<ts::spec<ts::none, "x">, ts::spec<"x", ts::none>>,
                      ts::spec<ts::none, ts::none>>(
            [&](const ts::shard_context<mesh_2x2>& c, const auto& A_shard, const auto& B_shard) {
              const auto C_partial = ts::matmul(A_shard, B_shard);  // varies over x
              const auto C_full = ts::psum<"x">(C_partial);         // invariant over x again
              if (c.position() == 0)
                log = "Local shard shapes: A=" + ts::to_string(A_shard.extents()) +
                      ", B=" + ts::to_string(B_shard.extents()) +
                      "\nPartial result shape: " + ts::to_string(C_partial.extents()) +
                      "\nAfter all-reduce shape: " + ts::to_string(C_full.extents()) + "\n";
              return C_full;
            });
    const auto C_manual = matmul_with_allreduce(A_sharded, B_sharded);
    std::cout << log;
    // doc-snippet-end
    const ts::host_tensor<float, 2> got =
        verify("case 3, ts::matmul<P(None, None)>", C, C_expected);
    verify("case 3, ts::matmul<P('x', None)>", C_rows, C_expected);
    verify("case 3, shard_map", C_manual, C_expected);
    std::cout << "Result shape: " << ts::to_string(got.extents()) << "\n";
    std::cout << "First few elements of result:\n"
              << numpy_str(examples::corner(got, 2, 2)) << "\n";
  }

  section("3.4.3", "All-reduce as reduce-scatter + all-gather (psum_scatter)");
  {
    trace<int> t;
    // doc-snippet: psum_scatter
    // shard_map(mesh=mesh1d, in_specs=P('i'), out_specs=P('i')) of
    // jax.lax.psum_scatter(x, 'i', tiled=True)
    const auto y = traced<ts::spec<"i">>(mesh_1d, sixteen, t, [](const auto& x_block) {
      return ts::psum_scatter<"i">(x_block, 0);
    });
    // doc-snippet-end
    print_trace(mesh_1d, t, y);
    std::vector<int> sum(4, 0);
    for (std::size_t r = 0; r < 4; ++r)
      for (std::size_t k = 0; k < 4; ++k) sum[k] += block(sixteen, r)[k];
    for (std::size_t r = 0; r < 4; ++r)
      check(values(t.after[r]) == std::vector<int>{sum[r]},
            "psum_scatter: device " + std::to_string(r) + " keeps element " + std::to_string(r));
    check(values(y) == sum, "psum_scatter: final result");
  }

  section("3.5", "Case 4: both non-contracting dimensions sharded over the same axis");
  {
    // doc-snippet: case4
    // A[I_X, J] . B[J, K_X]: C[I_X, K_X] would shard over x twice.
    const auto A_sharded = ts::device_put<ts::spec<"x", ts::none>>(mesh_2d, A);
    const auto B_sharded = ts::device_put<ts::spec<ts::none, "x">>(mesh_2d, B);
    std::cout << "Matrix A sharding (rows split along X):\n";
    ts::visualize(A_sharded, {.use_color = false});
    std::cout << "Matrix B sharding (columns split along X):\n";
    ts::visualize(B_sharded, {.use_color = false});

    // ts::matmul(A_sharded, B_sharded) does not compile: which operand to gather is the
    // caller's choice, so the error asks for it
    // (tests/compile_fail/rule2_case4_without_out_spec.cpp):
    //   typeshard: rule 2 (matmul): lhs's rows I and rhs's columns K are sharded over the same
    //   mesh axis (A[I_X, J] . B[J, K_X], case 4), so the result C[I_X, K_X] would use the
    //   axis twice; fix: name the output spec, which decides the operand to gather: ...
    // Option 1: rows of C over x, so B is gathered.
    const auto C = ts::matmul<ts::spec<"x", ts::none>>(A_sharded, B_sharded);
    using plan_b = ts::matmul_plan_for<decltype(A_sharded), decltype(B_sharded),
                                       ts::spec<"x", ts::none>>;
    static_assert(plan_b::steps[0].kind == ts::step_kind::all_gather &&
                  plan_b::steps[0].operand == ts::step_operand::rhs);
    std::cout << "output P('x', None), plan: " << plan_b::describe() << "\n";
    std::cout << "Result C sharding (rows split along X):\n";
    ts::visualize(C, {.use_color = false});
    // Option 2: columns of C over x, so A is gathered.
    const auto C_alt = ts::matmul<ts::spec<ts::none, "x">>(A_sharded, B_sharded);
    using plan_a = ts::matmul_plan_for<decltype(A_sharded), decltype(B_sharded),
                                       ts::spec<ts::none, "x">>;
    static_assert(plan_a::steps[0].kind == ts::step_kind::all_gather &&
                  plan_a::steps[0].operand == ts::step_operand::lhs);
    std::cout << "output P(None, 'x'), plan: " << plan_a::describe() << "\n";
    std::cout << "Result with A gathered (columns split along X):\n";
    ts::visualize(C_alt, {.use_color = false});

    // Per device, as the notebook writes option 1.
    std::string log;
    const auto matmul_case4_allgather_B =
        ts::shard_map<mesh_2x2, ts::specs<ts::spec<"x", ts::none>, ts::spec<ts::none, "x">>,
                      ts::spec<"x", ts::none>>(
            [&](const ts::shard_context<mesh_2x2>& c, const auto& A_shard, const auto& B_shard) {
              const auto B_full = ts::all_gather<"x">(B_shard, 1);
              auto C_shard = ts::matmul(A_shard, B_full);
              if (c.position() == 0)
                log = "Before all-gather: A=" + ts::to_string(A_shard.extents()) +
                      ", B=" + ts::to_string(B_shard.extents()) +
                      "\nAfter all-gather B: B_full=" + ts::to_string(B_full.extents()) +
                      "\nResult shape: " + ts::to_string(C_shard.extents()) + "\n";
              return C_shard;
            });
    const auto C_manual = matmul_case4_allgather_B(A_sharded, B_sharded);
    std::cout << log;
    // doc-snippet-end
    verify("case 4, ts::matmul<P('x', None)>", C, C_expected);
    verify("case 4, ts::matmul<P(None, 'x')>", C_alt, C_expected);
    verify("case 4, shard_map", C_manual, C_expected);
    static_assert(std::is_same_v<decltype(C)::spec, ts::spec<"x", ts::none>>);
    static_assert(std::is_same_v<decltype(C_alt)::spec, ts::spec<ts::none, "x">>);
  }

  section("3.6", "All-to-all");
  {
    trace<int> t;
    // doc-snippet: all_to_all
    // shard_map(mesh=mesh1d, in_specs=P('i'), out_specs=P('i')) of
    // jax.lax.all_to_all(x, 'i', split_axis=0, concat_axis=0, tiled=True)
    const auto y = traced<ts::spec<"i">>(mesh_1d, sixteen, t, [](const auto& x_block) {
      return ts::all_to_all<"i">(x_block, 0, 0);
    });
    // doc-snippet-end
    print_trace(mesh_1d, t, y);
    // Serial: device r receives element r of every device's block, in device order (the
    // blocks, as a 4 x 4 table, transposed).
    std::vector<int> transposed;
    for (std::size_t r = 0; r < 4; ++r) {
      std::vector<int> mine;
      for (std::size_t s = 0; s < 4; ++s) mine.push_back(block(sixteen, s)[r]);
      check(values(t.after[r]) == mine, "all_to_all: device " + std::to_string(r));
      transposed.insert(transposed.end(), mine.begin(), mine.end());
    }
    check(values(y) == transposed, "all_to_all: final result");
  }

  section("11", "Typed gradients");
  {
    auto make = [](std::size_t r, std::size_t c, float scale) {
      ts::host_tensor<float, 2> t({r, c});
      for (std::size_t i = 0; i < t.size(); ++i)
        t.data()[i] = scale * float(int((i * 7 + 3) % 11) - 5);
      return t;
    };
    const auto x_host = make(8, 6, 0.1f), y_host = make(8, 3, 0.05f);
    const auto w1_host = make(6, 4, 0.08f), w2_host = make(4, 3, 0.1f);
    // doc-snippet: grad
    // A Megatron MLP on 4 x 2 devices: the batch over "data", the hidden dimension over "model".
    using mesh_4x2 = ts::mesh<ts::axis("data", 4), ts::axis("model", 2)>;
    const ts::device_mesh<mesh_4x2> m{devices};
    auto loss = [](auto w1, auto w2, auto x, auto y) {
      auto h = ts::tanh(ts::matmul(x, w1));  // [B, H]: H over "model", no communication
      auto out = ts::reshard<ts::spec<"data", ts::none>>(ts::matmul(h, w2));  // psum over "model"
      auto e = out - y;
      return ts::mean(e * e);
    };
    auto W1 = ts::device_put<ts::spec<ts::none, "model">>(m, w1_host);
    auto W2 = ts::device_put<ts::spec<"model", ts::none>>(m, w2_host);
    const auto X = ts::device_put<ts::spec<"data", ts::none>>(m, x_host);
    const auto Y = ts::device_put<ts::spec<"data", ts::none>>(m, y_host);
    auto [l, grads] = ts::value_and_grad<0, 1>(loss)(W1, W2, X, Y);   // jax.value_and_grad(loss, argnums=(0, 1))
    auto& [dW1, dW2] = grads;
    // W1's spec, and a partial sum over "data" (the batch was contracted): known at compile time
    using G1 = std::remove_cvref_t<decltype(dW1)>;
    static_assert(std::is_same_v<G1::spec, ts::spec<ts::none, "model">>);
    static_assert(std::is_same_v<G1::unreduced_type, ts::unreduced<"data">>);
    std::cout << "dW1: " << G1::sharding_string() << " " << G1::unreduced_type::to_string() << "\n";
    // You choose the reduction in the type: all-reduce (DDP) or reduce-scatter (ZeRO)
    using ddp = ts::reshard_plan_for<G1, ts::spec<ts::none, "model">>;
    using zero = ts::reshard_plan_for<G1, ts::spec<"data", "model">>;
    std::cout << ddp::describe() << zero::describe();
    W1 = W1 - ts::reshard<ts::spec<ts::none, "model">>(dW1) * 0.1f;   // an SGD step, DDP
    // doc-snippet-end
    (void)W1;
    std::cout << "loss " << ts::reshard<ts::spec<>>(l).item() << "\n";
    // Serial reference in double: the chain rule written out.
    const std::size_t B = x_host.extent(0), D = x_host.extent(1), H = w1_host.extent(1),
                      O = w2_host.extent(1);
    std::vector<double> h(B * H), dw1(D * H, 0), dw2(H * O, 0);
    double ref_loss = 0;
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t j = 0; j < H; ++j) {
        double z = 0;
        for (std::size_t d = 0; d < D; ++d) z += double(x_host(b, d)) * w1_host(d, j);
        h[b * H + j] = std::tanh(z);
      }
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t o = 0; o < O; ++o) {
        double e = -double(y_host(b, o));
        for (std::size_t j = 0; j < H; ++j) e += h[b * H + j] * w2_host(j, o);
        ref_loss += e * e / double(B * O);
        const double de = 2 * e / double(B * O);
        for (std::size_t j = 0; j < H; ++j) {
          dw2[j * O + o] += h[b * H + j] * de;
          const double dz = de * w2_host(j, o) * (1 - h[b * H + j] * h[b * H + j]);
          for (std::size_t d = 0; d < D; ++d) dw1[d * H + j] += x_host(b, d) * dz;
        }
      }
    const auto g1 = ts::to_host(ts::reshard<ts::spec<ts::none, "model">>(dW1));
    const auto g2 = ts::to_host(ts::reshard<ts::spec<"model", ts::none>>(dW2));
    check(std::abs(ts::reshard<ts::spec<>>(l).item() - ref_loss) < 1e-5,
          "grad: loss matches the serial one");
    bool same = true;
    for (std::size_t k = 0; k < dw1.size(); ++k) same = same && std::abs(g1.data()[k] - dw1[k]) < 1e-5;
    for (std::size_t k = 0; k < dw2.size(); ++k) same = same && std::abs(g2.data()[k] - dw2[k]) < 1e-5;
    check(same, "grad: dW1 and dW2 match the serial backprop");
    std::cout << "dW1 and dW2 match the serial backprop\n";
    // What the backward runs: the two products' transposes (ts::backward_plans).
    for (const std::string& op : ts::backward_plans<0, 1>(loss)(W1, W2, X, Y))
      if (op.rfind("einsum", 0) == 0) std::cout << op << "\n";
  }

  return check.exit_code("tutorial");
}
