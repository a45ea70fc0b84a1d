// expect: typeshard: rule 2 \(matmul\): ts::matmul of blocks needs blocks of the same mesh
// Blocks of two meshes (one made by hand on another mesh type) cannot be multiplied: they
// belong to different shard_maps. The twin multiplies blocks of the same mesh.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_4 = ts::mesh<ts::axis("x", 4)>;

#ifdef TYPESHARD_COMPILE_FAIL
using other_mesh = mesh_4;
#else
using other_mesh = mesh_2x2;
#endif

template <class A, class B>
auto product(const A& a, const B& b) {
  return ts::matmul(a, b);
}

using block_a = ts::block<float, 2, mesh_2x2>;
using block_b = ts::block<float, 2, other_mesh>;
using product_type = decltype(product(std::declval<const block_a&>(), std::declval<const block_b&>()));
static_assert(ts::block_like<product_type>);
