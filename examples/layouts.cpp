// examples/layouts.cpp: where the shards of an array live, and the pictures of them.
//
// Reproduces, on 8 simulated CPU devices:
//   - seed 001 ("Parallelization Basics") sections 1-2: the 2x2 mesh and its device ids, an
//     8192 x 8192 matrix of ones sharded P('x', 'y') with its shards listed,
//     each sharding strategy of section 2.4 with its picture, and the replicated layout of
//     section 3's results;
//   - seed 003 (Cophy2024) exercise 1: a 16 x 16 array on a 1-D mesh of 8, on half of the
//     devices, transposed, 2-D, transposed 2-D, on a partial 2-D mesh, and on the
//     "mysterious" device order, each with its picture.
// Every layout is checked against the picture the seed shows (which devices hold which
// block, written out below by hand), every shard's data against the host data at its index,
// and the round trip to_host(device_put(x)) == x. Exit code 1 on any mismatch.
//
// The pictures are ts::visualize's: boxes when stdout is a pipe, colours on a terminal,
// byte for byte what jax.debug.visualize_array_sharding prints (the seeds' TPUs say "TPU 0").
#include <algorithm>
#include <cstddef>
#include <iostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

namespace {

int mismatches = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    ++mismatches;
    std::cerr << "MISMATCH: " << what << "\n";
  }
}

void section(const std::string& title) { std::cout << "\n=== " << title << " ===\n"; }

// "[0, 1, 2, 3]", as JAX prints [d.id for d in mesh.devices.flat].
std::string id_list(const std::vector<ts::device_id>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  return out + "]";
}

// The picture a seed shows, as a grid: boxes[r][c] lists the devices holding block (r, c)
// of the array (rows split in boxes.size() blocks, columns in boxes[0].size()). A 1-D array
// is one row.
using picture_grid = std::vector<std::vector<std::set<ts::device_id>>>;

// What check_layout reads of an array, as values: per mesh position its device, index
// slices and local shape, the shards this process holds and (with the round trip) to_host's
// result. (So the check is a function of the element type and rank, not of every array type.)
template <class T, std::size_t Rank>
struct array_view {
  std::vector<ts::device_id> devices;
  std::vector<ts::index_slices<Rank>> index;
  std::vector<ts::shape<Rank>> local_shape;
  std::vector<ts::shard<T, Rank>> shards;
  const ts::host_tensor<T, Rank>* round_trip = nullptr;  // to_host(array), when checked
};

// Checks that an array's shards form exactly that picture: each mesh position's block is
// the block of its box (index slices and local shape) and the devices of each box are the
// listed ones; each shard this process holds has the host data of its block; then that
// to_host gives the host data back (skipped for the big matrix and its strategies: the shard
// check already covers every element, and another 256 MB copy per strategy is most of this
// program's run time, under MPI 10-20 s for the 8 ranks). The picture is read from the layout of every mesh position, not from
// addressable_shards(): under MPI a process addresses its own device's shard only (as in a
// multi-process JAX program), and every process checks the whole picture.
template <class T, std::size_t Rank>
void check_layout(const std::string& name, const array_view<T, Rank>& a,
                  const ts::host_tensor<T, Rank>& host, const picture_grid& boxes) {
  const std::size_t rows = boxes.size(), cols = boxes.front().size();
  const std::size_t block_rows = Rank == 2 ? host.extent(0) / rows : 1;
  const std::size_t block_cols = host.extent(Rank - 1) / cols;
  // The box a block starts in, and the block of a box.
  auto box_of = [&](const ts::index_slices<Rank>& index) {
    return std::pair{Rank == 2 ? index[0].start / block_rows : 0, index[Rank - 1].start / block_cols};
  };
  auto block_of = [&](std::size_t r, std::size_t c) {
    ts::index_slices<Rank> block{};
    if constexpr (Rank == 2) block[0] = {r * block_rows, (r + 1) * block_rows};
    block[Rank - 1] = {c * block_cols, (c + 1) * block_cols};
    return block;
  };
  picture_grid seen(rows, std::vector<std::set<ts::device_id>>(cols));
  for (std::size_t p = 0; p < a.devices.size(); ++p) {
    const ts::device_id device = a.devices[p];
    const auto [r, c] = box_of(a.index[p]);
    if (r >= rows || c >= cols) {
      expect(false, name + ": a shard starts outside the picture");
      continue;
    }
    seen[r][c].insert(device);
    const ts::index_slices<Rank> block = block_of(r, c);
    expect(a.index[p] == block, name + ": device " + std::to_string(device) + " holds " +
                                    ts::to_string(a.index[p]) + ", expected " + ts::to_string(block));
    ts::shape<Rank> local{};
    for (std::size_t d = 0; d < Rank; ++d) local[d] = block[d].size();
    expect(a.local_shape[p] == local, name + ": device " + std::to_string(device) + " has shape " +
                                          ts::to_string(a.local_shape[p]));
  }
  for (const auto& s : a.shards) {
    // The shard's rows are the host rows of its block.
    const ts::index_slices<Rank>& block = s.index;
    bool same = s.data.size() == s.shape[0] * (Rank == 2 ? s.shape[Rank - 1] : 1);
    const std::size_t width = s.shape[Rank - 1];
    for (std::size_t i = 0; same && i < (Rank == 2 ? s.shape[0] : 1); ++i) {
      const T* host_row = host.data() + (Rank == 2 ? (block[0].start + i) * host.extent(1) : 0) +
                          block[Rank - 1].start;
      same = std::equal(host_row, host_row + width, s.data.begin() + static_cast<std::ptrdiff_t>(i * width));
    }
    expect(same, name + ": device " + std::to_string(s.device.id) + " holds other data");
  }
  expect(seen == boxes, name + ": the devices of the boxes differ from the seed's picture");
  if (a.round_trip) expect(*a.round_trip == host, name + ": to_host does not give the data back");
}

// check_layout of array `a` (its view: the only function of the array's type).
template <class Array, class T, std::size_t Rank>
void check_array(const std::string& name, const Array& a, const ts::host_tensor<T, Rank>& host,
                 const picture_grid& boxes, bool round_trip = true) {
  array_view<T, Rank> view{a.device_mesh().devices(), {}, {}, a.addressable_shards()};
  for (std::size_t p = 0; p < Array::mesh_type::size; ++p) {
    view.index.push_back(a.index(p));
    view.local_shape.push_back(a.local_shape(p));
  }
  ts::host_tensor<T, Rank> back;
  if (round_trip) {
    back = ts::to_host(a);
    view.round_trip = &back;
  }
  check_layout(name, view, host, boxes);
}

// Puts `host` on `m` with Spec, prints the picture and checks it against the seed's.
template <class Spec, class Mesh, class T, std::size_t Rank>
void show(const std::string& title, const ts::device_mesh<Mesh>& m,
          const ts::host_tensor<T, Rank>& host, const picture_grid& boxes) {
  constexpr std::size_t big = std::size_t{1} << 20;
  const auto a = ts::device_put<Spec>(m, host);
  std::cout << "\n" << title << ": " << a.sharding_string() << " on devices "
            << id_list(m.devices()) << "\n";
  ts::visualize(a);
  check_array(title, a, host, boxes, host.size() < big);
}

}  // namespace

int main() {
  ts::cpu_devices devices{8};  // XLA_FLAGS=--xla_force_host_platform_device_count=8

  // ---- seed 001, section 1: devices and a 2-D mesh ----------------------------------------
  section("seed 001, 1.1: a device mesh");
  std::string available = "[";
  for (ts::device_id d = 0; d < devices.device_count(); ++d)
    available += (d ? ", " : "") + devices.describe(d).to_string();
  std::cout << "Available devices: " << available << "]\n";
  std::cout << "Device count: " << devices.device_count() << "\n";
  expect(devices.device_count() == 8, "device count");

  using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
  const ts::device_mesh<mesh_2x2> mesh_2d{devices, {0, 1, 2, 3}};  // jax.make_mesh((2, 2), ('x', 'y')): the first 4
  std::cout << "2D Mesh: " << mesh_2x2::to_string() << "\n" << id_list(mesh_2d.devices()) << "\n";
  expect(mesh_2x2::to_string() == "Mesh('x': 2, 'y': 2)", "mesh printout");
  expect(id_list(mesh_2d.devices()) == "[0, 1, 2, 3]", "mesh device ids");

  // ---- seed 001, section 2: an 8192 x 8192 matrix of ones ---------------------------------
  section("seed 001, 2.1: device mesh and partition specifications");
  constexpr std::size_t matrix_size = 8192;
  const ts::host_tensor<float, 2> matrix({matrix_size, matrix_size}, 1.0f);
  std::cout << "Matrix shape: " << ts::to_string(matrix.extents()) << ", Size in memory: "
            << matrix.size() * sizeof(float) / (1024 * 1024) << ".00 MB\n";
  {
    const auto sharded_matrix = ts::device_put<ts::spec<"x", "y">>(mesh_2d, matrix);
    std::cout << "Sharding spec: " << sharded_matrix.sharding_string() << "\n";
    ts::visualize(sharded_matrix);

    section("seed 001, 2.2: inspecting sharded matrices");
    std::cout << "Global matrix shape " << ts::to_string(sharded_matrix.extents()) << "\n";
    std::cout << "Shapes of Matrix Shards:\n";
    // Every shard, this process's or not (JAX's sharding.devices_indices_map): under MPI,
    // addressable_shards() holds this rank's only.
    for (std::size_t p = 0; p < mesh_2x2::size; ++p)
      std::cout << devices.describe(mesh_2d.device_at(p)).to_string() << " "
                << ts::to_string(sharded_matrix.index(p)) << " "
                << ts::to_string(sharded_matrix.local_shape(p)) << "\n";
    check_array("P('x', 'y') of the 8192 x 8192 matrix", sharded_matrix, matrix,
                 {{{0}, {1}}, {{2}, {3}}}, /*round_trip=*/false);
  }

  section("seed 001, 2.4: sharding strategies");
  show<ts::spec<"x", "y">>("rows over x, columns over y", mesh_2d, matrix, {{{0}, {1}}, {{2}, {3}}});
  show<ts::spec<"y", "x">>("rows over y, columns over x", mesh_2d, matrix, {{{0}, {2}}, {{1}, {3}}});
  show<ts::spec<"x", ts::none>>("rows over x, columns replicated", mesh_2d, matrix,
                                {{{0, 1}}, {{2, 3}}});
  show<ts::spec<ts::none, "y">>("rows replicated, columns over y", mesh_2d, matrix,
                                {{{0, 2}, {1, 3}}});
  // Section 3's replicated results (cases 2 and 3), on its 4 x 4 matrices: a replicated
  // 8192 x 8192 copy would put 1 GB in the shards for the same picture.
  const ts::host_tensor<float, 2> small = ts::reshape<2>(ts::arange<float>(16), {4, 4});
  show<ts::spec<ts::none, ts::none>>("replicated", mesh_2d, small, {{{0, 1, 2, 3}}});

  // ---- seed 003, exercise 1: a 16 x 16 array on 8 devices -----------------------------------
  section("seed 003: a 16 x 16 array, sharded in every way exercise 1 asks for");
  ts::host_tensor<float, 2> a({16, 16});
  for (std::size_t i = 0; i < 16; ++i)
    for (std::size_t j = 0; j < 16; ++j) a(i, j) = static_cast<float>(i * 16 + j) * 0.5f - 7.0f;

  using mesh_8 = ts::mesh<ts::axis("x", 8)>;
  using mesh_4 = ts::mesh<ts::axis("x", 4)>;
  using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;
  using mesh_4x2 = ts::mesh<ts::axis("x", 4), ts::axis("y", 2)>;
  const ts::device_mesh<mesh_8> mesh{devices};                     // jax.make_mesh((8,), ('x'))
  const ts::device_mesh<mesh_4> half_mesh{devices, {0, 1, 2, 3}};  // devices=jax.devices()[:4]
  const ts::device_mesh<mesh_2x4> mesh2d{devices};
  const ts::device_mesh<mesh_2x2> mesh2d_partial{devices, {0, 2, 4, 6}};
  const ts::device_mesh<mesh_4x2> mysterious_mesh{devices, {0, 2, 4, 6, 1, 3, 5, 7}};

  show<ts::spec<"x">>("NamedSharding(mesh, P('x'))", mesh, a,
                      {{{0}}, {{1}}, {{2}}, {{3}}, {{4}}, {{5}}, {{6}}, {{7}}});
  show<ts::spec<"x">>("half mesh", half_mesh, a, {{{0}}, {{1}}, {{2}}, {{3}}});
  show<ts::spec<ts::none, "x">>("exercise 1.1, transposed sharding", mesh, a,
                                {{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}});
  show<ts::spec<"x", "y">>("exercise 1.2, 2D sharding", mesh2d, a,
                           {{{0}, {1}, {2}, {3}}, {{4}, {5}, {6}, {7}}});
  show<ts::spec<"y", "x">>("exercise 1.2, transposed 2D sharding", mesh2d, a,
                           {{{0}, {4}}, {{1}, {5}}, {{2}, {6}}, {{3}, {7}}});
  show<ts::spec<"x", "y">>("exercise 1.3, partial 2D mesh", mesh2d_partial, a,
                           {{{0}, {2}}, {{4}, {6}}});
  show<ts::spec<"x", "y">>("exercise 1.4, mysterious mesh and sharding", mysterious_mesh, a,
                           {{{0}, {2}}, {{4}, {6}}, {{1}, {3}}, {{5}, {7}}});

  // A 1-D array, which JAX draws as one row of boxes.
  show<ts::spec<"x">>("a vector over the half mesh", half_mesh, ts::arange<float>(16),
                      {{{0}, {1}, {2}, {3}}});

  if (mismatches != 0) {
    std::cerr << mismatches << " mismatch(es)\n";
    return 1;
  }
  std::cout << "\nall layouts match the seeds\n";
  return 0;
}
