// expect: typeshard: rule 5 \(elementwise\): elementwise operations on blocks need blocks of the same mesh and rank
// Inside shard_map, a matrix block plus a vector block: blocks do not broadcast (the global
// view does: add the arrays outside shard_map). The twin adds two matrix blocks.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using rows = ts::spec<"x", ts::none>;

#ifdef TYPESHARD_COMPILE_FAIL
using second = ts::spec<"x">;
constexpr std::size_t second_rank = 1;
#else
using second = rows;
constexpr std::size_t second_rank = 2;
#endif

auto add(const ts::device_mesh<mesh_2x2>& m) {
  const auto a = ts::device_put<rows>(m, ts::host_tensor<float, 2>({4, 4}));
  ts::shape<second_rank> s{};
  s.fill(4);
  const auto b = ts::device_put<second>(m, ts::host_tensor<float, second_rank>(s));
  const auto f = ts::shard_map<mesh_2x2, ts::specs<rows, second>, rows>(
      [](const auto& a_shard, const auto& b_shard) { return a_shard + b_shard; });
  return f(a, b);
}
