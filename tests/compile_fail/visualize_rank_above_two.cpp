// expect: typeshard: visualize: only 1-D and 2-D arrays can be drawn
// A 3-D array has no picture: jax.debug.visualize_array_sharding raises "only works for
// shapes with 1 and 2 dimensions"; typeshard refuses at compile time, with one error whose
// note names 'typeshard::diagnostic::visualize_needs_rank_1_or_2<3>'.
#include <sstream>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

#ifdef TYPESHARD_COMPILE_FAIL
constexpr std::size_t rank = 3;
#else
constexpr std::size_t rank = 2;
#endif

std::string picture(const ts::device_mesh<mesh_2x2>& m, const ts::host_tensor<float, rank>& host) {
  auto a = ts::device_put<ts::spec<"x", "y">>(m, host);
  std::ostringstream os;
  ts::visualize(os, a);
  ts::visualize_sharding<ts::spec<"x", "y">>(os, m, host.extents());
  return os.str();
}
