// expect: typeshard: rule 9 \(gradients\): a traced einsum operand has a letter that is in neither the other operand nor the output
// "ij,jk->i" sums k in the traced rhs only: its gradient would broadcast over k (the twin
// keeps k in the output).
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
using X = ts::sharded_array<float, mesh, ts::spec<"data", ts::none>, ts::dextents<2>>;
using W = ts::sharded_array<float, mesh, ts::spec<ts::none, ts::none>, ts::dextents<2>>;

void step(const W& w, const X& x) {
  auto f = [](auto wt, auto xt) {
#ifdef TYPESHARD_COMPILE_FAIL
    return ts::mean(ts::einsum<"ij,jk->i">(xt, wt));
#else
    return ts::mean(ts::einsum<"ij,jk->ik">(xt, wt));
#endif
  };
  auto r = ts::grad<0>(f)(w, x);
  (void)r;
}
