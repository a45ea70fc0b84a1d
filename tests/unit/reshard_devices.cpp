// reshard beyond spec pairs: onto a reordering of the device mesh (seed 002's permuted
// devices), onto a different device set or another backend's (seed 002's mismatch, moved),
// static extents (the plan decided at compile time, uneven included), no-op reshards
// sharing the shards, the efficient paths matmul builds on (one collective, no copy), and the
// all-reduce of an array no one else holds written back into its own blocks.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

namespace {

using mesh_4x2 = ts::mesh<ts::axis("a", 4), ts::axis("b", 2)>;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

ts::host_tensor<int, 2> random_tensor(std::size_t r, std::size_t c, std::mt19937& rng) {
  ts::host_tensor<int, 2> t({r, c});
  std::uniform_int_distribution<int> v(-99, 99);
  for (int& x : t.values()) x = v(rng);
  return t;
}

unsigned seed() {
  static const unsigned s = std::random_device{}();
  return s;
}

}  // namespace

TEST_CASE("reshard onto a permutation of the devices (seed 002's [0, 1, 2, 3, 6, 7, 4, 5])",
          "[reshard][devices]") {
  INFO("seed " << seed());
  std::mt19937 rng(seed());
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_4x2> plain{devices};
  ts::device_mesh<mesh_4x2> permuted{devices, {0, 1, 2, 3, 6, 7, 4, 5}};
  for (bool even : {true, false}) {
    const auto host = even ? random_tensor(8, 4, rng) : random_tensor(7, 3, rng);
    const auto y = ts::device_put<ts::spec<"a", "b">>(plain, host);
    const auto z = ts::reshard<ts::spec<"a", "b">>(y, permuted);
    CHECK(z.device_mesh() == permuted);
    CHECK(ts::to_host(z) == host);
    // Each device holds the block of its position in the target mesh.
    for (const auto& s : z.addressable_shards())
      CHECK(s.device.id == permuted.devices()[s.mesh_position]);
    const auto w = ts::reshard<ts::spec<ts::none, "a">>(z, plain);
    CHECK(ts::to_host(w) == host);
    // Now the two can meet in one operation.
    CHECK(ts::to_host(ts::reshard<ts::spec<ts::none, "a">>(y) + w) ==
          ts::to_host(ts::map(w, [](int v) { return 2 * v; })));
  }
}

TEST_CASE("reshard onto a different device set, or another backend's devices, moves the array",
          "[reshard][devices]") {
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_2x2> first{devices, {0, 1, 2, 3}};
  ts::device_mesh<mesh_2x2> second{devices, {4, 5, 6, 7}};
  const ts::host_tensor<int, 2> host({2, 2}, {1, 2, 3, 4});
  const auto y = ts::device_put<ts::spec<"x", "y">>(first, host);
  // seed 002's mismatch, moved as jax.device_put moves it: the values, on the other devices.
  const auto moved = ts::reshard<ts::spec<ts::none, "x">>(y, second);
  CHECK(moved.device_mesh() == second);
  CHECK(ts::to_host(moved) == host);
  for (const auto& s : moved.addressable_shards()) CHECK(s.device.id >= 4);
  CHECK(ts::to_host(ts::device_put(y, second)) == host);

  // Devices of another backend (another pool of threads, in the same process): moved too.
  ts::cpu_devices other{4};
  ts::device_mesh<mesh_2x2> elsewhere{other};
  const auto there = ts::reshard<ts::spec<"x", "y">>(y, elsewhere);
  CHECK(there.device_mesh() == elsewhere);
  CHECK(ts::to_host(there) == host);
}

TEST_CASE("reshard with static extents: the plan is chosen at compile time", "[reshard]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  std::mt19937 rng(seed());
  const auto even = random_tensor(4, 6, rng);
  const auto a = ts::device_put<ts::spec<"x", "y">, ts::extents<4, 6>>(m, even);
  using plan = ts::reshard_plan_for<decltype(a), ts::spec<"y", "x">>;
  static_assert(plan::evenness == ts::shard_evenness::even);
  static_assert(plan::count<ts::step_kind::all_to_all> == 1);
  const auto b = ts::reshard<ts::spec<"y", "x">>(a);
  static_assert(std::is_same_v<decltype(b)::extents_type, ts::extents<4, 6>>);
  CHECK(ts::to_host(b) == even);

  const auto odd = random_tensor(5, 3, rng);
  const auto c = ts::device_put<ts::spec<"x", "y">, ts::extents<5, 3>>(m, odd);
  using uneven_plan = ts::reshard_plan_for<decltype(c), ts::spec<"y", "x">>;
  static_assert(uneven_plan::evenness == ts::shard_evenness::uneven);
  static_assert(uneven_plan::count<ts::step_kind::all_to_all> == 0);
  CHECK(ts::to_host(ts::reshard<ts::spec<"y", "x">>(c)) == odd);
}

TEST_CASE("reshard: nothing to do shares the shards; one step writes straight into the result",
          "[reshard]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  std::mt19937 rng(seed());
  const auto host = random_tensor(4, 4, rng);
  const auto a = ts::device_put<ts::spec<"x">>(m, host);  // the same sharding as spec<"x", none>
  const auto same = ts::reshard<ts::spec<"x", ts::none>>(a);
  for (std::size_t p = 0; p < 4; ++p) CHECK(same.local_data(p).data() == a.local_data(p).data());
  // Dropping the contracting dimension's axis (matmul's case 2) is one all_gather.
  using gather = ts::reshard_plan_for<decltype(a), ts::spec<ts::none, ts::none>>;
  static_assert(gather::steps.size() == 1 && gather::steps[0].kind == ts::step_kind::all_gather);
  // Replicated to sharded moves nothing.
  const auto r = ts::reshard<ts::spec<ts::none, ts::none>>(a);
  using slice = ts::reshard_plan_for<decltype(r), ts::spec<"y", "x">>;
  static_assert(ts::communication_free<slice>);
  CHECK(ts::to_host(ts::reshard<ts::spec<"y", "x">>(r)) == host);
}

TEST_CASE("reshard of an array no one else holds all-reduces into its own blocks", "[reshard]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  std::mt19937 rng(seed());
  const auto host = random_tensor(4, 6, rng);
  ts::host_tensor<int, 1> want({4});
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 6; ++j) want(i) += host(i, j);
  const auto a = ts::device_put<ts::spec<"x", "y">>(m, host);
  using out = ts::spec<"x">;
  const auto blocks = [](const auto& u) {
    std::vector<const int*> p;
    for (std::size_t i = 0; i < 4; ++i) p.push_back(u.local_data(i).data());
    return p;
  };
  // A temporary or a moved array held alone: the psum over "y" writes into its blocks.
  auto u = ts::sum<1>(a);  // spec<"x">, unreduced over "y"
  static_assert(decltype(u)::unreduced_type::size == 1);
  const auto before = blocks(u);
  const auto r = ts::reshard<out>(std::move(u));
  CHECK(blocks(r) == before);
  CHECK(ts::to_host(r) == want);
  CHECK(ts::to_host(ts::reshard<out>(ts::sum<1>(a))) == want);
  // Shared with another array, or named: new blocks, the input left as it was.
  auto shared = ts::sum<1>(a);
  const auto copy = shared;
  const auto r2 = ts::reshard<out>(std::move(shared));
  CHECK(blocks(r2) != blocks(copy));
  CHECK(ts::to_host(ts::reshard<out>(copy)) == want);  // copy still holds the partial sums
  const auto named = ts::sum<1>(a);
  CHECK(ts::to_host(ts::reshard<out>(named)) == want);
  CHECK(ts::to_host(ts::reshard<out>(named)) == want);
}

TEST_CASE("the gradient tape adds a contribution into a sum it holds alone", "[reshard][grad]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  std::mt19937 rng(seed());
  ts::host_tensor<float, 2> hs({4, 6}), hc({4, 6}), want({4, 6});
  std::uniform_real_distribution<float> v(-1, 1);
  for (std::size_t i = 0; i < hs.size(); ++i) {
    hs.values()[i] = v(rng);
    hc.values()[i] = v(rng);
    want.values()[i] = hs.values()[i] + hc.values()[i];  // the same rounding as the tape's
  }
  const auto c = ts::device_put<ts::spec<"x", "y">>(m, hc);
  auto sum = ts::device_put<ts::spec<"x", "y">>(m, hs);
  const auto data = [](const auto& a) {
    std::vector<const float*> p;
    for (std::size_t i = 0; i < 4; ++i) p.push_back(a.local_data(i).data());
    return p;
  };
  const auto before = data(sum);
  ts::detail::accumulate(sum, c);  // held alone: into its own blocks
  CHECK(data(sum) == before);
  CHECK(ts::to_host(sum) == want);
  auto shared = ts::device_put<ts::spec<"x", "y">>(m, hs);
  const auto other = shared;  // shares its blocks: a new sum, `other` left as it was
  ts::detail::accumulate(shared, c);
  CHECK(data(shared) != data(other));
  CHECK(ts::to_host(shared) == want);
  CHECK(ts::to_host(other) == hs);
}
