// expect: typeshard: ts::take: the table must have rank 2
// A rank-3 table: take looks rows of a [V, D] table up. The twin merges it to rank 2 first.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using Table = ts::sharded_array<float, mesh, ts::spec<"x", ts::none, ts::none>, ts::dextents<3>>;
using Ids = ts::sharded_array<int, mesh, ts::spec<"y">, ts::dextents<1>>;

float embed(const Table& table, const Ids& ids) {
#ifdef TYPESHARD_COMPILE_FAIL
  auto e = ts::take(table, ids);
#else
  auto e = ts::take(ts::merge_dims<1>(table), ids);
#endif
  return ts::to_host(ts::reshard<ts::spec<>>(e)).data()[0];
}
