// expect: (logsumexp.* is not a member of|no member named .logsumexp. in namespace)
// A loss lambda whose body does not compile (a function typeshard does not have): its own error
// and nothing more (no "cannot decompose", no second rule-9 message about the loss's type).
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
using X = ts::sharded_array<float, mesh, ts::spec<"data", ts::none>, ts::dextents<2>>;
using W = ts::sharded_array<float, mesh, ts::spec<ts::none, ts::none>, ts::dextents<2>>;

float step(const W& w, const X& x) {
  auto loss = [](auto wt, auto xt) {
#ifdef TYPESHARD_COMPILE_FAIL
    return ts::mean(ts::logsumexp(ts::matmul(xt, wt)));
#else
    return ts::mean(ts::sigmoid(ts::matmul(xt, wt)));
#endif
  };
  auto [l, g] = ts::value_and_grad<0>(loss)(w, x);
  auto w2 = w - ts::reshard<ts::spec<ts::none, ts::none>>(g) * 0.1f;
  return ts::to_host(ts::reshard<ts::spec<>>(l)).data()[0] + ts::to_host(w2).data()[0];
}
