// expect: typeshard: rule 5 \(elementwise\): the operands shard different dimensions of the \(broadcast\) result over the same mesh axis
// A vector sharded over x plus a matrix whose rows are sharded over x: broadcast, the vector
// lines up with the columns, so x would shard both dimensions of the result. P('x', None) +
// P(None, 'x') gives the same message. The twin shards the matrix's columns instead.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2 = ts::mesh<ts::axis("x", 2)>;

#ifdef TYPESHARD_COMPILE_FAIL
using matrix_spec = ts::spec<"x", ts::none>;
#else
using matrix_spec = ts::spec<ts::none, "x">;
#endif

ts::host_tensor<float, 2> add_rows(const ts::device_mesh<mesh_2>& m,
                                   const ts::host_tensor<float, 1>& v,
                                   const ts::host_tensor<float, 2>& a) {
  auto x = ts::device_put<ts::spec<"x">>(m, v);
  auto y = ts::device_put<matrix_spec>(m, a);
  return ts::to_host(y + x);
}
