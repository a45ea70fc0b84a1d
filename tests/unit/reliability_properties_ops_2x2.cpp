// Reliability, properties of issue 15's ops (reliability_properties_ops.hpp) on the 'x' (2) x
// 'y' (2) mesh.
#include "reliability_properties_ops.hpp"

TEST_CASE("properties: random programs of einsum, reductions, broadcasting, softmax and moves on a 2x2 mesh "
          "equal the serial reference",
          "[reliability][properties]") {
  prop_ops::property_test<ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>>("unit_reliability_properties_ops_2x2");
}

TEST_CASE("properties: the ops harness's comparison catches a wrong element in any shard, replicas included",
          "[reliability][properties]") {
  using mesh = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
  using S = ts::spec<"x", ts::none>;
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh> m{devices};
  ts::host_tensor<double, 2> host({4, 6});
  for (std::size_t i = 0; i < host.size(); ++i) host.data()[i] = static_cast<double>(i) / 3;
  const prop_ops::dyn ref = prop_ops::to_dyn(host);
  const auto a = ts::device_put<S>(m, host);
  CHECK(prop_ops::mismatch(a, ref).empty());
  for (std::size_t p = 0; p < mesh::size; ++p) {
    // A copy of a's shards with one element of position p's block off by a relative 1e-8
    // (the tolerance is 1e-10 of the element's magnitude).
    std::vector<ts::detail::buffer<double>> blocks(mesh::size);
    for (std::size_t q = 0; q < mesh::size; ++q) {
      blocks[q] = ts::detail::buffer<double>(a.local_data(q).size());
      std::copy_n(a.local_data(q).data(), blocks[q].size(), blocks[q].data());
    }
    blocks[p].data()[blocks[p].size() - 1] *= 1 + 1e-8;
    const ts::sharded_array<double, mesh, S, ts::dextents<2>> wrong(ts::adopt_shards, m, a.extents(),
                                                                     std::move(blocks));
    INFO("changed an element at mesh position " << p);
    CHECK_FALSE(prop_ops::mismatch(wrong, ref).empty());
  }
  prop_ops::dyn other = ref;
  other.shape = {4, 5};
  CHECK_FALSE(prop_ops::mismatch(a, other).empty());
}
