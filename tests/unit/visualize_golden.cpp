// Golden pictures: ts::visualize against jax.debug.visualize_array_sharding, byte for byte,
// for every layout of seed 001 section 2 (and its matmul cases) and seed 003 exercise 1.
//
// How the goldens were made. JAX is never a dependency of typeshard: it ran once, in a
// throwaway venv (`python3 -m venv /tmp/jaxvenv && /tmp/jaxvenv/bin/pip install jax rich
// matplotlib`: jax 0.10.2, rich 15.0.0, matplotlib 3.11.2), with
//   XLA_FLAGS=--xla_force_host_platform_device_count=8 JAX_PLATFORMS=cpu
// and for each case
//   mesh = Mesh(np.array([jax.devices()[i] for i in order]).reshape(mesh_shape), names)
//   jax.debug.visualize_sharding(shape, NamedSharding(mesh, P(...)), use_color=...)
// (what visualize_array_sharding calls), stdout captured. Uncoloured: stdout is not a
// terminal, so rich draws SQUARE boxes; those pictures are the raw strings below. Coloured:
// the same run with FORCE_COLOR=1 COLORTERM=truecolor (rich then writes 24-bit colours; with
// COLORTERM unset and TERM=xterm-256color, the 256-colour palette), saved as
// tests/unit/golden/visualize_<case>.ansi; `cat` one on a terminal to see the picture. The
// seed 003 notebook shows the same colours in its HTML (e.g. exercise 1.2: #393b79,
// #d6616b, #8ca252, #de9ed6, #e7cb94, #6b6ecf, #a55194, #8c6d31). The seeds ran on TPUs and
// print "TPU 0"; on CPU devices JAX and typeshard print "CPU 0".
//
// The same comparison was run on 3,000 random cases (meshes of 1 to 8 devices with 1 to 3
// axes, every valid spec, random device orders, shapes with aspect ratios up to 4096, scale,
// min_width and max_width, both palettes): all identical. visualize_properties.cpp checks
// what JAX cannot show (uneven shards) by properties instead.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

namespace {

using mesh_1 = ts::mesh<ts::axis("x", 1)>;
using mesh_4 = ts::mesh<ts::axis("x", 4)>;
using mesh_8 = ts::mesh<ts::axis("x", 8)>;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;
using mesh_4x2 = ts::mesh<ts::axis("x", 4), ts::axis("y", 2)>;

ts::visualize_options boxes() { return {.use_color = false}; }
ts::visualize_options truecolor() {
  return {.use_color = true, .colors = ts::color_system::truecolor};
}

// visualize_sharding's picture as a string (the layout alone, no data).
template <class Spec, class Mesh, std::size_t Rank>
std::string picture(const ts::device_mesh<Mesh>& m, const ts::shape<Rank>& shape,
                    const ts::visualize_options& o) {
  std::ostringstream os;
  ts::visualize_sharding<Spec>(os, m, shape, o);
  return os.str();
}

// ts::visualize of a real array of that shape and spec (data 0, 1, 2, ...).
template <class Spec, class Mesh, std::size_t Rank>
std::string array_picture(const ts::device_mesh<Mesh>& m, const ts::shape<Rank>& shape,
                          const ts::visualize_options& o) {
  ts::host_tensor<float, Rank> host(shape);
  for (std::size_t i = 0; i < host.size(); ++i) host.data()[i] = static_cast<float>(i);
  const auto a = ts::device_put<Spec>(m, host);
  std::ostringstream os;
  ts::visualize(os, a, o);
  return os.str();
}

std::string golden_file(const std::string& name) {
  const std::filesystem::path path =
      std::filesystem::path(__FILE__).parent_path() / "golden" / ("visualize_" + name);
  std::ifstream in(path, std::ios::binary);
  INFO("golden file " << path.string());
  REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

// ---- seed 001, section 2: an 8192 x 8192 matrix on Mesh('x': 2, 'y': 2) ------------------

TEST_CASE("visualize: seed 001 P('x', 'y') on a 2x2 mesh", "[visualize][golden]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const std::string expected = R"(┌──────────┬──────────┐
│          │          │
│  CPU 0   │  CPU 1   │
│          │          │
│          │          │
├──────────┼──────────┤
│          │          │
│  CPU 2   │  CPU 3   │
│          │          │
│          │          │
└──────────┴──────────┘
)";
  CHECK(picture<ts::spec<"x", "y">>(m, ts::shape<2>{8192, 8192}, boxes()) == expected);
  CHECK(array_picture<ts::spec<"x", "y">>(m, ts::shape<2>{4, 4}, boxes()) == expected);
  CHECK(picture<ts::spec<"x", "y">>(m, ts::shape<2>{8192, 8192}, truecolor()) ==
        golden_file("p_x_y_8192.ansi"));
}

TEST_CASE("visualize: seed 001 P('y', 'x') on a 2x2 mesh", "[visualize][golden]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  CHECK(picture<ts::spec<"y", "x">>(m, ts::shape<2>{8192, 8192}, boxes()) == R"(┌──────────┬──────────┐
│          │          │
│  CPU 0   │  CPU 2   │
│          │          │
│          │          │
├──────────┼──────────┤
│          │          │
│  CPU 1   │  CPU 3   │
│          │          │
│          │          │
└──────────┴──────────┘
)");
}

TEST_CASE("visualize: seed 001 P('x', None), also matmul cases 1, 3, 4", "[visualize][golden]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const std::string expected = R"(┌───────────────────────┐
│                       │
│        CPU 0,1        │
│                       │
│                       │
├───────────────────────┤
│                       │
│        CPU 2,3        │
│                       │
│                       │
└───────────────────────┘
)";
  CHECK(picture<ts::spec<"x", ts::none>>(m, ts::shape<2>{8192, 8192}, boxes()) == expected);
  // Case 1's A, case 3's B, case 4's A and result: 4 x 4 matrices, the same picture.
  CHECK(array_picture<ts::spec<"x", ts::none>>(m, ts::shape<2>{4, 4}, boxes()) == expected);
}

TEST_CASE("visualize: seed 001 P(None, 'y'), also matmul case 1's B", "[visualize][golden]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const std::string expected = R"(┌──────────┬──────────┐
│          │          │
│          │          │
│          │          │
│          │          │
│ CPU 0,2  │ CPU 1,3  │
│          │          │
│          │          │
│          │          │
│          │          │
└──────────┴──────────┘
)";
  CHECK(picture<ts::spec<ts::none, "y">>(m, ts::shape<2>{8192, 8192}, boxes()) == expected);
  CHECK(array_picture<ts::spec<ts::none, "y">>(m, ts::shape<2>{4, 4}, boxes()) == expected);
}

TEST_CASE("visualize: seed 001 matmul cases 2-4, P(None, 'x')", "[visualize][golden]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  CHECK(array_picture<ts::spec<ts::none, "x">>(m, ts::shape<2>{4, 4}, boxes()) ==
        R"(┌──────────┬──────────┐
│          │          │
│          │          │
│          │          │
│          │          │
│ CPU 0,1  │ CPU 2,3  │
│          │          │
│          │          │
│          │          │
│          │          │
└──────────┴──────────┘
)");
}

TEST_CASE("visualize: seed 001 replicated result of cases 2 and 3", "[visualize][golden]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const std::string expected = R"(┌───────────────────────┐
│                       │
│                       │
│                       │
│                       │
│      CPU 0,1,2,3      │
│                       │
│                       │
│                       │
│                       │
└───────────────────────┘
)";
  CHECK(array_picture<ts::spec<ts::none, ts::none>>(m, ts::shape<2>{4, 4}, boxes()) == expected);
  CHECK(array_picture<ts::spec<>>(m, ts::shape<2>{4, 4}, boxes()) == expected);
}

TEST_CASE("visualize: seed 001 case 2's unsharded B, one device", "[visualize][golden]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_1> one{devices, {0}};
  CHECK(array_picture<ts::spec<>>(one, ts::shape<2>{4, 4}, boxes()) == R"(┌───────────────────────┐
│                       │
│                       │
│                       │
│                       │
│         CPU 0         │
│                       │
│                       │
│                       │
│                       │
└───────────────────────┘
)");
}

// ---- seed 003, exercise 1: a 16 x 16 array on 8 devices ------------------------------------

TEST_CASE("visualize: seed 003 P('x') on a 1-D mesh of 8", "[visualize][golden]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_8> m{devices};
  CHECK(array_picture<ts::spec<"x">>(m, ts::shape<2>{16, 16}, boxes()) == R"(┌───────────────────────┐
│         CPU 0         │
├───────────────────────┤
│         CPU 1         │
├───────────────────────┤
│         CPU 2         │
├───────────────────────┤
│         CPU 3         │
├───────────────────────┤
│         CPU 4         │
├───────────────────────┤
│         CPU 5         │
├───────────────────────┤
│         CPU 6         │
├───────────────────────┤
│         CPU 7         │
└───────────────────────┘
)");
  CHECK(picture<ts::spec<"x">>(m, ts::shape<2>{16, 16}, truecolor()) ==
        golden_file("mesh8_rows_16x16.ansi"));
}

TEST_CASE("visualize: seed 003 half mesh, devices 0-3", "[visualize][golden]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_4> half{devices, {0, 1, 2, 3}};
  CHECK(array_picture<ts::spec<"x">>(half, ts::shape<2>{16, 16}, boxes()) ==
        R"(┌───────────────────────┐
│         CPU 0         │
├───────────────────────┤
│         CPU 1         │
├───────────────────────┤
│         CPU 2         │
├───────────────────────┤
│         CPU 3         │
└───────────────────────┘
)");
  CHECK(picture<ts::spec<"x">>(half, ts::shape<2>{16, 16}, truecolor()) ==
        golden_file("half_mesh_rows_16x16.ansi"));
}

TEST_CASE("visualize: seed 003 exercise 1.1, transposed P(None, 'x')", "[visualize][golden]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_8> m{devices};
  CHECK(array_picture<ts::spec<ts::none, "x">>(m, ts::shape<2>{16, 16}, boxes()) ==
        R"(┌───────┬───────┬───────┬───────┬───────┬───────┬───────┬───────┐
│       │       │       │       │       │       │       │       │
│       │       │       │       │       │       │       │       │
│       │       │       │       │       │       │       │       │
│       │       │       │       │       │       │       │       │
│ CPU 0 │ CPU 1 │ CPU 2 │ CPU 3 │ CPU 4 │ CPU 5 │ CPU 6 │ CPU 7 │
│       │       │       │       │       │       │       │       │
│       │       │       │       │       │       │       │       │
│       │       │       │       │       │       │       │       │
│       │       │       │       │       │       │       │       │
└───────┴───────┴───────┴───────┴───────┴───────┴───────┴───────┘
)");
  CHECK(picture<ts::spec<ts::none, "x">>(m, ts::shape<2>{16, 16}, truecolor()) ==
        golden_file("ex11_transposed_16x16.ansi"));
}

TEST_CASE("visualize: seed 003 exercise 1.2, 2-D P('x', 'y') on 2x4", "[visualize][golden]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m{devices};
  CHECK(array_picture<ts::spec<"x", "y">>(m, ts::shape<2>{16, 16}, boxes()) ==
        R"(┌───────┬───────┬───────┬───────┐
│       │       │       │       │
│ CPU 0 │ CPU 1 │ CPU 2 │ CPU 3 │
│       │       │       │       │
│       │       │       │       │
├───────┼───────┼───────┼───────┤
│       │       │       │       │
│ CPU 4 │ CPU 5 │ CPU 6 │ CPU 7 │
│       │       │       │       │
│       │       │       │       │
└───────┴───────┴───────┴───────┘
)");
  CHECK(picture<ts::spec<"x", "y">>(m, ts::shape<2>{16, 16}, truecolor()) ==
        golden_file("ex12_2d_16x16.ansi"));
}

TEST_CASE("visualize: seed 003 exercise 1.2, transposed 2-D P('y', 'x')", "[visualize][golden]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m{devices};
  CHECK(array_picture<ts::spec<"y", "x">>(m, ts::shape<2>{16, 16}, boxes()) ==
        R"(┌──────────┬──────────┐
│  CPU 0   │  CPU 4   │
├──────────┼──────────┤
│  CPU 1   │  CPU 5   │
├──────────┼──────────┤
│  CPU 2   │  CPU 6   │
├──────────┼──────────┤
│  CPU 3   │  CPU 7   │
└──────────┴──────────┘
)");
  CHECK(picture<ts::spec<"y", "x">>(m, ts::shape<2>{16, 16}, truecolor()) ==
        golden_file("ex12_transposed_2d_16x16.ansi"));
}

TEST_CASE("visualize: seed 003 exercise 1.3, partial 2-D mesh of devices 0, 2, 4, 6",
          "[visualize][golden]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x2> partial{devices, {0, 2, 4, 6}};
  CHECK(array_picture<ts::spec<"x", "y">>(partial, ts::shape<2>{16, 16}, boxes()) ==
        R"(┌──────────┬──────────┐
│          │          │
│  CPU 0   │  CPU 2   │
│          │          │
│          │          │
├──────────┼──────────┤
│          │          │
│  CPU 4   │  CPU 6   │
│          │          │
│          │          │
└──────────┴──────────┘
)");
  CHECK(picture<ts::spec<"x", "y">>(partial, ts::shape<2>{16, 16}, truecolor()) ==
        golden_file("ex13_partial_2d_16x16.ansi"));
}

TEST_CASE("visualize: seed 003 exercise 1.4, the mysterious device order", "[visualize][golden]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_4x2> mysterious{devices, {0, 2, 4, 6, 1, 3, 5, 7}};
  CHECK(array_picture<ts::spec<"x", "y">>(mysterious, ts::shape<2>{16, 16}, boxes()) ==
        R"(┌──────────┬──────────┐
│  CPU 0   │  CPU 2   │
├──────────┼──────────┤
│  CPU 4   │  CPU 6   │
├──────────┼──────────┤
│  CPU 1   │  CPU 3   │
├──────────┼──────────┤
│  CPU 5   │  CPU 7   │
└──────────┴──────────┘
)");
  CHECK(picture<ts::spec<"x", "y">>(mysterious, ts::shape<2>{16, 16}, truecolor()) ==
        golden_file("ex14_mysterious_16x16.ansi"));
  const ts::visualize_options eight_bit{.use_color = true, .colors = ts::color_system::eight_bit};
  CHECK(picture<ts::spec<"x", "y">>(mysterious, ts::shape<2>{16, 16}, eight_bit) ==
        golden_file("ex14_mysterious_16x16.256.ansi"));
}

// ---- 1-D arrays: one row of boxes, one line tall ------------------------------------------

TEST_CASE("visualize: a vector over 4 devices, and replicated", "[visualize][golden]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_4> m{devices};
  CHECK(array_picture<ts::spec<"x">>(m, ts::shape<1>{16}, boxes()) == R"(┌───────┬───────┬───────┬───────┐
│ CPU 0 │ CPU 1 │ CPU 2 │ CPU 3 │
└───────┴───────┴───────┴───────┘
)");
  CHECK(picture<ts::spec<"x">>(m, ts::shape<1>{16}, truecolor()) ==
        golden_file("vector_over_4_16.ansi"));
  CHECK(array_picture<ts::spec<ts::none>>(m, ts::shape<1>{8}, boxes()) ==
        R"(┌───────────┐
│CPU 0,1,2,3│
└───────────┘
)");
}
