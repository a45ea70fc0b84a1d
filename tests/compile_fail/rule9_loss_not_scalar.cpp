// expect: typeshard: rule 9 \(gradients\): the differentiated function must return a one-element array
// The loss is the whole [B, H] activation, not one element: ts::value_and_grad needs a
// scalar loss (the twin reduces it with ts::mean).
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
using X = ts::sharded_array<float, mesh, ts::spec<"data", ts::none>, ts::dextents<2>>;
using W = ts::sharded_array<float, mesh, ts::spec<ts::none, ts::none>, ts::dextents<2>>;

void step(const W& w, const X& x) {
  auto f = [](auto wt, auto xt) {
#ifdef TYPESHARD_COMPILE_FAIL
    return ts::tanh(ts::matmul(xt, wt));
#else
    return ts::mean(ts::tanh(ts::matmul(xt, wt)));
#endif
  };
  auto r = ts::value_and_grad<0>(f)(w, x);
  (void)r;
}
