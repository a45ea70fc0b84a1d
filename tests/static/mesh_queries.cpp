// mesh<axis...>: sizes, axis queries, and the row-major coordinates <-> position round trip,
// all at compile time.
#include <array>
#include <cstddef>

#include <typeshard/core/mesh.hpp>

namespace ts = typeshard;

namespace {

using mesh_8 = ts::mesh<ts::axis("x", 8)>;
using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;
using mesh_dm = ts::mesh<ts::axis("data", 3), ts::axis("model", 1), ts::axis("pipe", 2)>;

// ---- size, rank, shape ----
static_assert(mesh_8::rank == 1 && mesh_8::size == 8);
static_assert(mesh_2x4::rank == 2 && mesh_2x4::size == 8);
static_assert(mesh_dm::rank == 3 && mesh_dm::size == 6);
static_assert(mesh_2x4::shape == std::array<std::size_t, 2>{2, 4});
static_assert(mesh_dm::shape == std::array<std::size_t, 3>{3, 1, 2});
static_assert(ts::mesh<>::rank == 0 && ts::mesh<>::size == 1);  // the empty product
static_assert(ts::mesh<ts::axis("x", 1)>::size == 1);

// ---- checked queries ----
static_assert(mesh_2x4::axis_size<"x"> == 2 && mesh_2x4::axis_size<"y"> == 4);
static_assert(mesh_2x4::axis_index<"x"> == 0 && mesh_2x4::axis_index<"y"> == 1);
static_assert(mesh_dm::axis_index<"pipe"> == 2 && mesh_dm::axis_size<"pipe"> == 2);
static_assert(mesh_dm::axis_size<"model"> == 1);

// ---- total queries for generic code ----
static_assert(mesh_2x4::contains("y") && !mesh_2x4::contains("z"));
static_assert(!mesh_2x4::contains("xy") && !mesh_dm::contains("dat"));  // whole names only
static_assert(mesh_2x4::index_of("z") == mesh_2x4::rank);
static_assert(mesh_2x4::size_of("z") == 1);
static_assert(mesh_dm::index_of("model") == 1 && mesh_dm::size_of("data") == 3);

// ---- axes keep their declaration order and names ----
static_assert(mesh_dm::axes[0].name.view() == "data" && mesh_dm::axes[2].name.view() == "pipe");
static_assert(mesh_dm::axes[1].size == 1);

// ---- row-major coordinates: the last axis varies fastest ----
static_assert(mesh_2x4::coordinates(0) == std::array<std::size_t, 2>{0, 0});
static_assert(mesh_2x4::coordinates(1) == std::array<std::size_t, 2>{0, 1});
static_assert(mesh_2x4::coordinates(4) == std::array<std::size_t, 2>{1, 0});
static_assert(mesh_2x4::coordinates(7) == std::array<std::size_t, 2>{1, 3});
static_assert(mesh_dm::coordinates(5) == std::array<std::size_t, 3>{2, 0, 1});
static_assert(mesh_2x4::position({1, 2}) == 6);
static_assert(mesh_dm::position({1, 0, 1}) == 3);

// Every position round-trips, and the coordinates are in range and in row-major order.
template <class Mesh>
constexpr bool round_trips() {
  for (std::size_t p = 0; p < Mesh::size; ++p) {
    const auto c = Mesh::coordinates(p);
    if (Mesh::position(c) != p) return false;
    std::size_t flat = 0;
    for (std::size_t i = 0; i < Mesh::rank; ++i) {
      if (c[i] >= Mesh::shape[i]) return false;
      flat = flat * Mesh::shape[i] + c[i];
    }
    if (flat != p) return false;
  }
  return true;
}
static_assert(round_trips<mesh_8>());
static_assert(round_trips<mesh_2x4>());
static_assert(round_trips<mesh_dm>());
static_assert(round_trips<ts::mesh<ts::axis("a", 2), ts::axis("b", 3), ts::axis("c", 5), ts::axis("d", 1)>>());

// ---- the mesh concept ----
static_assert(ts::mesh_like<mesh_2x4> && ts::is_mesh_v<mesh_dm>);
static_assert(!ts::mesh_like<int> && !ts::mesh_like<ts::axis>);

// ---- axis names: up to 31 characters, compared by content ----
static_assert(ts::axis("abcdefghijklmnopqrstuvwxyz01234", 2).name.length == 31);
static_assert(ts::axis_name("x") == ts::axis_name("x") && !(ts::axis_name("x") == ts::axis_name("y")));

// Meshes differ by names, sizes and order of axes.
template <class A, class B>
constexpr bool same = false;
template <class A>
constexpr bool same<A, A> = true;
static_assert(same<mesh_2x4, ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>>);
static_assert(!same<mesh_2x4, ts::mesh<ts::axis("y", 4), ts::axis("x", 2)>>);
static_assert(!same<mesh_2x4, ts::mesh<ts::axis("x", 4), ts::axis("y", 2)>>);
static_assert(!same<mesh_2x4, ts::mesh<ts::axis("x", 2), ts::axis("z", 4)>>);

}  // namespace
