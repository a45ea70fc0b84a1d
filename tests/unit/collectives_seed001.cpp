// Seed 001, section 3: the four collective demos on a 1-D mesh of 4, with the numbers the
// notebook prints (BEFORE and AFTER on each device, and the FINAL RESULT).
#include <catch2/catch.hpp>

#include <vector>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

namespace {

using mesh1d = ts::mesh<ts::axis("i", 4)>;  // Mesh(jax.devices()[:4], ('i',))

const ts::host_tensor<int, 1> sixteen({16}, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 1, 2});

// Runs `op` under shard_map<mesh1d, P('i'), OutSpec>; records each device's block before
// and after.
template <class OutSpec, class Op>
auto demo(const ts::device_mesh<mesh1d>& m, const ts::host_tensor<int, 1>& x, Op op,
          std::vector<std::vector<int>>& before, std::vector<std::vector<int>>& after) {
  before.assign(4, {});
  after.assign(4, {});
  const auto f = ts::shard_map<mesh1d, ts::spec<"i">, OutSpec>(
      [&](const ts::shard_context<mesh1d>& c, const auto& x_block) {
        before[c.position()].assign(x_block.values().begin(), x_block.values().end());
        auto y_block = op(x_block);
        after[c.position()].assign(y_block.values().begin(), y_block.values().end());
        return y_block;
      });
  return ts::to_host(f(ts::device_put<ts::spec<"i">>(m, x)));
}

std::vector<int> values(const ts::host_tensor<int, 1>& t) { return {t.values().begin(), t.values().end()}; }

}  // namespace

TEST_CASE("seed 001: all_gather of [3 9 5 2]", "[collectives][seed]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh1d> m{devices};
  std::vector<std::vector<int>> before, after;
  const auto y = demo<ts::spec<"i">>(
      m, ts::host_tensor<int, 1>({4}, {3, 9, 5, 2}),
      [](const auto& b) { return ts::all_gather<"i">(b); }, before, after);
  CHECK(before == std::vector<std::vector<int>>{{3}, {9}, {5}, {2}});
  for (const auto& a : after) CHECK(a == std::vector<int>{3, 9, 5, 2});
  CHECK(values(y) == std::vector<int>{3, 9, 5, 2, 3, 9, 5, 2, 3, 9, 5, 2, 3, 9, 5, 2});
}

TEST_CASE("seed 001: psum gives [22 20 12 17]", "[collectives][seed]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh1d> m{devices};
  std::vector<std::vector<int>> before, after;
  const auto y = demo<ts::spec<ts::none>>(
      m, sixteen, [](const auto& b) { return ts::psum<"i">(b); }, before, after);
  CHECK(before ==
        std::vector<std::vector<int>>{{3, 1, 4, 1}, {5, 9, 2, 6}, {5, 3, 5, 8}, {9, 7, 1, 2}});
  for (const auto& a : after) CHECK(a == std::vector<int>{22, 20, 12, 17});
  CHECK(values(y) == std::vector<int>{22, 20, 12, 17});
}

TEST_CASE("seed 001: psum_scatter gives [22] [20] [12] [17]", "[collectives][seed]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh1d> m{devices};
  std::vector<std::vector<int>> before, after;
  const auto y = demo<ts::spec<"i">>(
      m, sixteen, [](const auto& b) { return ts::psum_scatter<"i">(b); }, before, after);
  CHECK(after == std::vector<std::vector<int>>{{22}, {20}, {12}, {17}});
  CHECK(values(y) == std::vector<int>{22, 20, 12, 17});
}

TEST_CASE("seed 001: the all_to_all table", "[collectives][seed]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh1d> m{devices};
  std::vector<std::vector<int>> before, after;
  const auto y = demo<ts::spec<"i">>(
      m, sixteen, [](const auto& b) { return ts::all_to_all<"i">(b, 0, 0); }, before, after);
  CHECK(after ==
        std::vector<std::vector<int>>{{3, 5, 5, 9}, {1, 9, 3, 7}, {4, 2, 5, 1}, {1, 6, 8, 2}});
  CHECK(values(y) == std::vector<int>{3, 5, 5, 9, 1, 9, 3, 7, 4, 2, 5, 1, 1, 6, 8, 2});
}
