// Moving an array to another device set (JAX's device_put onto other devices):
// ts::device_put(a, other_mesh) and ts::reshard<Spec>(a, other_mesh) across device sets,
// disjoint and overlapping, for several specs, even and uneven extents, each checked
// against the host data it came from (the serial reference) and for the devices it lands on.
#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace {

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

ts::host_tensor<float, 2> numbered(std::size_t rows, std::size_t cols) {
  ts::host_tensor<float, 2> t(ts::shape<2>{rows, cols});
  float v = 1;
  for (float& x : t.values()) x = v++;
  return t;
}

template <class From, class To>
void check_move(ts::cpu_devices& devices, const std::vector<ts::device_id>& from,
                const std::vector<ts::device_id>& to, std::size_t rows, std::size_t cols) {
  INFO("from " << From::to_string() << " to " << To::to_string() << ", " << rows << "x"
               << cols);
  const ts::device_mesh<mesh_2x2> source{devices, from}, target{devices, to};
  const auto host = numbered(rows, cols);
  const auto a = ts::device_put<From>(source, host);
  const auto moved = ts::reshard<To>(a, target);
  CHECK(moved.device_mesh() == target);
  const auto back = ts::to_host(moved);
  REQUIRE(back.extents() == host.extents());
  for (std::size_t i = 0; i < host.size(); ++i) REQUIRE(back.values()[i] == host.values()[i]);
  const auto same_spec = ts::device_put(a, target);
  CHECK(same_spec.device_mesh() == target);
  const auto back2 = ts::to_host(same_spec);
  for (std::size_t i = 0; i < host.size(); ++i) REQUIRE(back2.values()[i] == host.values()[i]);
}

}  // namespace

TEST_CASE("device_put and reshard move an array to another device set", "[reshard]") {
  ts::cpu_devices devices{8};
  const std::vector<ts::device_id> lower{0, 1, 2, 3}, upper{4, 5, 6, 7}, overlap{2, 3, 4, 5};
  using xy = ts::spec<"x", "y">;
  using yx = ts::spec<"y", "x">;
  using rows = ts::spec<"x", ts::none>;
  using cols = ts::spec<ts::none, "y">;
  using repl = ts::spec<>;
  for (auto [r, c] : {std::pair<std::size_t, std::size_t>{4, 6}, {5, 3}}) {  // even, uneven
    check_move<xy, xy>(devices, lower, upper, r, c);
    check_move<xy, yx>(devices, lower, upper, r, c);
    check_move<rows, repl>(devices, upper, lower, r, c);
    check_move<repl, cols>(devices, lower, overlap, r, c);
    check_move<cols, rows>(devices, overlap, upper, r, c);
  }
}
