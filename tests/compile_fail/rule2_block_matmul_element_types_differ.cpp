// expect: typeshard: rule 2 \(matmul\): ts::matmul of blocks needs equal element types
// Inside shard_map, a local product of a float block and a double block: typeshard does not
// convert silently (which precision?). The twin multiplies two float blocks.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using rows = ts::spec<"x", ts::none>;
using replicated = ts::spec<ts::none, ts::none>;

#ifdef TYPESHARD_COMPILE_FAIL
using weight_element = double;
#else
using weight_element = float;
#endif

auto forward(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<float, 2>& x,
             const ts::host_tensor<weight_element, 2>& w) {
  const auto X = ts::device_put<rows>(m, x);
  const auto W = ts::device_put<replicated>(m, w);
  const auto f = ts::shard_map<mesh_2x2, ts::specs<rows, replicated>, rows>(
      [](const auto& xb, const auto& wb) { return ts::matmul(xb, wb); });
  return f(X, W);
}
