// expect: typeshard: rule 3 \(unreduced\): adding values that are unreduced over different mesh axes
// A data-parallel gradient is typed unreduced<"data"> (each device holds its batch shard's
// partial sum): an SGD update with it, unreduced, would use one device's part only. The twin
// all-reduces it first (ts::reshard to the parameter's spec: DDP).
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
using X = ts::sharded_array<float, mesh, ts::spec<"data", ts::none>, ts::dextents<2>>;
using W = ts::sharded_array<float, mesh, ts::spec<ts::none, ts::none>, ts::dextents<2>>;

W step(const W& w, const X& x) {
  auto f = [](auto wt, auto xt) { return ts::mean(ts::tanh(ts::matmul(xt, wt))); };
  auto g = ts::grad<0>(f)(w, x);
#ifdef TYPESHARD_COMPILE_FAIL
  return w - g * 0.1f;
#else
  return w - ts::reshard<W::spec>(g) * 0.1f;
#endif
}
