// expect: typeshard: sharded arrays hold trivially copyable element types
// device_put of strings: shards are raw bytes moved by collectives (and MPI), so elements
// must be trivially copyable. The twin puts numbers.
#include <string>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
#ifdef TYPESHARD_COMPILE_FAIL
using element = std::string;
#else
using element = int;
#endif

auto put(const ts::device_mesh<mesh_2x2>& m) {
  return ts::device_put<ts::spec<"x">>(m, ts::host_tensor<element, 1>({4}));
}
