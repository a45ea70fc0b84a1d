// expect: typeshard: rule 9 \(gradients\): ts::shard_map bodies are not differentiated
// A traced parameter handed to a shard_map: its body works on blocks, which are not traced
// (the twin calls the shard_map on the plain input instead).
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
using X = ts::sharded_array<float, mesh, ts::spec<"data", ts::none>, ts::dextents<2>>;
using W = ts::sharded_array<float, mesh, ts::spec<ts::none, ts::none>, ts::dextents<2>>;

void step(const W& w, const X& x) {
  auto f = [](auto wt, auto xt) {
    auto twice = ts::shard_map<mesh, ts::spec<ts::none, ts::none>, ts::spec<ts::none, ts::none>>(
        [](auto b) { return b * 2.0f; });
#ifdef TYPESHARD_COMPILE_FAIL
    (void)twice(wt);
#else
    (void)twice(xt);
#endif
    return ts::mean(ts::matmul(xt, wt));
  };
  auto r = ts::grad<0>(f)(w, x);
  (void)r;
}
