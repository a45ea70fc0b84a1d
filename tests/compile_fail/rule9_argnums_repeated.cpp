// expect: typeshard: rule 9 \(gradients\): argnums must be distinct
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
using X = ts::sharded_array<float, mesh, ts::spec<"data", ts::none>, ts::dextents<2>>;
using W = ts::sharded_array<float, mesh, ts::spec<ts::none, ts::none>, ts::dextents<2>>;

void step(const W& w, const X& x) {
  auto f = [](auto wt, auto xt) { return ts::mean(ts::matmul(xt, wt)); };
#ifdef TYPESHARD_COMPILE_FAIL
  auto r = ts::value_and_grad<0, 0>(f)(w, x);
#else
  auto r = ts::value_and_grad<0, 1>(f)(w, x);
#endif
  (void)r;
}
