// device_put<Spec>(mesh, shape, make_block) on the thread pool: each device asks for its own
// slices once (replicas included), the array equals the one device_put makes from the whole
// host data, and a block of the wrong shape is a device_error that names both shapes.
// (tests/mpi/spmd_api.cpp checks the same call on MPI, where each rank asks only for its own.)
#include <catch2/catch.hpp>

#include <atomic>
#include <random>
#include <string>

#include <typeshard/typeshard.hpp>

namespace {

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

ts::host_tensor<int, 2> block_of(const ts::host_tensor<int, 2>& host, const ts::index_slices<2>& ix) {
  ts::host_tensor<int, 2> out({ix[0].size(), ix[1].size()});
  for (std::size_t i = 0; i < ix[0].size(); ++i)
    for (std::size_t j = 0; j < ix[1].size(); ++j) out(i, j) = host(ix[0].start + i, ix[1].start + j);
  return out;
}

template <class Spec>
void check_spec(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<int, 2>& host) {
  INFO(Spec::to_string() << " extents " << ts::to_string(host.extents()));
  std::atomic<int> calls{0};
  const auto a = ts::device_put<Spec>(m, host.extents(), [&](const ts::index_slices<2>& ix) {
    ++calls;
    return block_of(host, ix);
  });
  CHECK(calls == 4);  // one per device, replicas included
  const auto b = ts::device_put<Spec>(m, host);
  REQUIRE(ts::to_host(a) == host);
  const auto sa = a.addressable_shards(), sb = b.addressable_shards();
  REQUIRE(sa.size() == sb.size());
  for (std::size_t i = 0; i < sa.size(); ++i) {
    REQUIRE(sa[i].index == sb[i].index);
    REQUIRE(sa[i].to_host() == sb[i].to_host());
  }
}

}  // namespace

TEST_CASE("device_put from a block function equals device_put from the host data",
          "[sharded_array][device_put]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const unsigned seed = std::random_device{}();
  INFO("seed " << seed);  // the values are random: a failure names the seed that replays it
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> value(-50, 50);
  for (const ts::shape<2> e : {ts::shape<2>{8, 4}, ts::shape<2>{5, 3}, ts::shape<2>{1, 0}}) {
    ts::host_tensor<int, 2> host(e);
    for (int& v : host.values()) v = value(rng);
    check_spec<ts::spec<"x", "y">>(m, host);
    check_spec<ts::spec<ts::axes("y", "x"), ts::none>>(m, host);
    check_spec<ts::spec<ts::none, "x">>(m, host);
    check_spec<ts::spec<>>(m, host);
  }
}

TEST_CASE("device_put from a block function: a block of the wrong shape names both shapes",
          "[sharded_array][device_put]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  try {
    (void)ts::device_put<ts::spec<"x", "y">>(m, ts::shape<2>{4, 4}, [](const ts::index_slices<2>&) {
      return ts::host_tensor<int, 2>({3, 2});
    });
    FAIL("a block of the wrong shape was accepted");
  } catch (const ts::device_error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("typeshard: ") == 0);
    CHECK(what.find("shape (3, 2)") != std::string::npos);
    CHECK(what.find("which have shape (2, 2)") != std::string::npos);
  }
}
