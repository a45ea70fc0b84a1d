// expect: typeshard: rule 3 \(unreduced\): saving a checkpoint of a value that is still a partial sum
// A checkpoint holds values: a partial sum over "y" would save one of its terms per box.
// Reduce it first (the twin reshards, then saves).
#include <typeshard/ops/checkpoint.hpp>
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

void save_row_sums(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<float, 2>& host) {
  const auto a = ts::device_put<ts::spec<"x", "y">>(m, host);
  const auto rows = ts::sum<1>(a);  // unreduced over "y"
#ifdef TYPESHARD_COMPILE_FAIL
  ts::checkpoint::save("ckpt", 1, {{"rows", rows}});
#else
  const auto reduced = ts::reshard<ts::spec<"x">>(rows);
  ts::checkpoint::save("ckpt", 1, {{"rows", reduced}});
#endif
}
