// expect: typeshard: ts::take: the ids are sharded over a mesh axis the table is sharded over too
// The ids and the table's vocabulary both sharded over "x": a device would need rows another
// holds. The twin shards the ids over "y".
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using Table = ts::sharded_array<float, mesh, ts::spec<"x", ts::none>, ts::dextents<2>>;
#ifdef TYPESHARD_COMPILE_FAIL
using Ids = ts::sharded_array<int, mesh, ts::spec<"x">, ts::dextents<1>>;
#else
using Ids = ts::sharded_array<int, mesh, ts::spec<"y">, ts::dextents<1>>;
#endif

float embed(const Table& table, const Ids& ids) {
  auto e = ts::take(table, ids);
  return ts::to_host(ts::reshard<ts::spec<>>(e)).data()[0];
}
