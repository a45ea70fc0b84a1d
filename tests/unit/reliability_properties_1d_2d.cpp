// Reliability, properties (reliability_properties.hpp) on the 1- and 2-axis meshes: 'i' (3)
// and 'x' (2) x 'y' (2); plus the check that the comparison itself catches a wrong shard.
#include "reliability_properties.hpp"

TEST_CASE("properties: random programs on 1- and 2-axis meshes equal the serial reference",
          "[reliability][properties]") {
  prop::property_test<prop::mesh_list<prop::mesh_1, prop::mesh_2>>("unit_reliability_properties_1d_2d");
}

TEST_CASE("properties: the comparison catches a wrong element in any shard, replicas included",
          "[reliability][properties]") {
  using mesh = prop::mesh_2;
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh> m{devices};
  prop::host<2> ref({4, 6});
  for (std::size_t i = 0; i < ref.size(); ++i) ref.data()[i] = static_cast<double>(i);
  // spec<x, none>: positions 0 and 1 are replicas over "y" of the same rows, as 2 and 3.
  const auto a = ts::device_put<ts::spec<"x", ts::none>>(m, ref);
  CHECK(prop::mismatch(a, ref).empty());
  for (std::size_t p = 0; p < mesh::size; ++p) {
    // A copy of a's shards with one element of position p's block changed.
    std::vector<ts::detail::buffer<double>> blocks(mesh::size);
    for (std::size_t q = 0; q < mesh::size; ++q) {
      blocks[q] = ts::detail::buffer<double>(a.local_data(q).size());
      std::copy_n(a.local_data(q).data(), blocks[q].size(), blocks[q].data());
    }
    blocks[p].data()[blocks[p].size() - 1] += 1;
    const ts::sharded_array<double, mesh, ts::spec<"x", ts::none>, ts::dextents<2>> wrong(
        ts::adopt_shards, m, a.extents(), std::move(blocks));
    INFO("changed an element at mesh position " << p);
    CHECK_FALSE(prop::mismatch(wrong, ref).empty());
  }
  prop::host<2> other = ref;
  other.data()[0] = -1;
  CHECK_FALSE(prop::mismatch(a, other).empty());
  CHECK_FALSE(prop::mismatch(a, prop::host<2>({4, 5})).empty());
}
