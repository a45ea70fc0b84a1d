// expect: typeshard: rule 9 \(gradients\): ts::map and ts::zip of a traced value apply a user function
// A user function on a traced value cannot be differentiated (the twin uses ts::exp).
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
using X = ts::sharded_array<float, mesh, ts::spec<"data", ts::none>, ts::dextents<2>>;
using W = ts::sharded_array<float, mesh, ts::spec<ts::none, ts::none>, ts::dextents<2>>;

void step(const W& w, const X& x) {
  auto f = [](auto wt, auto xt) {
#ifdef TYPESHARD_COMPILE_FAIL
    auto e = ts::map(wt, [](float v) { return v * v; });
#else
    auto e = ts::exp(wt);
#endif
    return ts::mean(ts::matmul(xt, e));
  };
  auto r = ts::grad<0>(f)(w, x);
  (void)r;
}
