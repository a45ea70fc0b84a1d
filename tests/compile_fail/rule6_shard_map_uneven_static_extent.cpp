// expect: typeshard: rule 6 \(extents\): a static extent is not divisible by the number of shards
// shard_map needs even blocks (as JAX does). With static extents that is checked at
// compile time: 10 rows over the 4 devices of ("x", "y") do not divide. The twin has 12.
//
// The note names the numbers: 'static_extent_not_divisible<0, 10, 4>' (dimension, extent,
// shards).
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using rows = ts::spec<ts::axes("x", "y"), ts::none>;
#ifdef TYPESHARD_COMPILE_FAIL
constexpr std::size_t row_count = 10;
#else
constexpr std::size_t row_count = 12;
#endif

auto twice(const ts::device_mesh<mesh_2x2>& m) {
  const auto a = ts::device_put<rows, ts::extents<row_count, 3>>(
      m, ts::host_tensor<float, 2>({row_count, 3}));
  const auto f = ts::shard_map<mesh_2x2, rows, rows>([](const auto& b) { return b * 2.0f; });
  return f(a);
}
