// expect: typeshard: rule 9 \(gradients\): a differentiated argument must be a fully reduced ts::sharded_array of float or double
// Differentiating with respect to a plain float (the learning rate) instead of an array.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
using X = ts::sharded_array<float, mesh, ts::spec<"data", ts::none>, ts::dextents<2>>;
using W = ts::sharded_array<float, mesh, ts::spec<ts::none, ts::none>, ts::dextents<2>>;

void step(const W& w, const X& x) {
  auto f = [](auto wt, auto xt, float scale) { return ts::mean(ts::matmul(xt, wt) * scale); };
#ifdef TYPESHARD_COMPILE_FAIL
  auto r = ts::grad<2>(f)(w, x, 0.5f);
#else
  auto r = ts::grad<0>(f)(w, x, 0.5f);
#endif
  (void)r;
}
