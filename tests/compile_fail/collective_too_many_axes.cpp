// expect: typeshard: rule 4 \(shard_map\): a collective names more than 4 mesh axes
// psum over five axes at once: a collective names at most 4 (as a spec entry). The twin sums
// over four, then the fifth.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh5 = ts::mesh<ts::axis("a", 1), ts::axis("b", 1), ts::axis("c", 1), ts::axis("d", 1),
                       ts::axis("e", 1)>;
using none = ts::spec<ts::none>;

auto total(const ts::device_mesh<mesh5>& m) {
  const auto x = ts::device_put<none>(m, ts::host_tensor<float, 1>({4}));
  const auto f = ts::shard_map<mesh5, none, none>([](const auto& b) {
#ifdef TYPESHARD_COMPILE_FAIL
    return ts::psum<"a", "b", "c", "d", "e">(b);
#else
    return ts::psum<"e">(ts::psum<"a", "b", "c", "d">(b));
#endif
  });
  return ts::to_host(f(x));
}
