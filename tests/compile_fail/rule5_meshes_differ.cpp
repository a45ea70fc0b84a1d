// expect: typeshard: rule 5 \(elementwise\): the operands live on different mesh types. fix: put both arrays on the same mesh
// An array on a 2x2 mesh times an array on a 4-device 1-d mesh.
//
// Full output (clang++ 14), one error: the note names
//   'typeshard::diagnostic::elementwise_meshes_differ<typeshard::mesh<...>, typeshard::mesh<...>>'
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
#ifdef TYPESHARD_COMPILE_FAIL
using other_mesh = ts::mesh<ts::axis("x", 4)>;
#else
using other_mesh = mesh_2x2;
#endif

ts::host_tensor<float, 2> product(ts::cpu_devices& devices, const ts::host_tensor<float, 2>& host) {
  ts::device_mesh<mesh_2x2> m{devices};
  ts::device_mesh<other_mesh> n{devices};
  auto a = ts::device_put<ts::spec<"x", ts::none>>(m, host);
  auto b = ts::device_put<ts::spec<"x", ts::none>>(n, host);
  auto c = a * b;
  return ts::to_host(c);
}
