// expect: typeshard: rule 9 \(gradients\): ts::max, ts::min, ts::maximum and ts::minimum of a traced value are not differentiable
// A max-pooled loss: the gradient of a max picks one element per tie (the twin sums).
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
using X = ts::sharded_array<float, mesh, ts::spec<"data", ts::none>, ts::dextents<2>>;
using W = ts::sharded_array<float, mesh, ts::spec<ts::none, ts::none>, ts::dextents<2>>;

void step(const W& w, const X& x) {
  auto f = [](auto wt, auto xt) {
    auto h = ts::matmul(xt, wt);
#ifdef TYPESHARD_COMPILE_FAIL
    return ts::mean(ts::max<1>(h, ts::keep_dims));
#else
    return ts::mean(ts::sum<1>(h, ts::keep_dims));
#endif
  };
  auto r = ts::grad<0>(f)(w, x);
  (void)r;
}
