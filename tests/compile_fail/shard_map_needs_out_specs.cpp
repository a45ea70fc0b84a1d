// expect: typeshard: shard_map: the out specs are missing
// shard_map with its in specs only (JAX infers nothing either): the twin names the out spec.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using rows = ts::spec<"x", ts::none>;
using X = ts::sharded_array<float, mesh, rows, ts::dextents<2>>;

float doubled(const X& x) {
#ifdef TYPESHARD_COMPILE_FAIL
  auto f = ts::shard_map<mesh, rows>([](const auto& b) { return b * 2.0f; });
#else
  auto f = ts::shard_map<mesh, rows, rows>([](const auto& b) { return b * 2.0f; });
#endif
  auto y = f(x);
  return ts::to_host(y).data()[0];
}
