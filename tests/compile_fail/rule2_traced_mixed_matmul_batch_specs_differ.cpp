// expect: typeshard: rule 2 \(matmul\): a batch \(leading\) dimension is sharded differently in the two operands
// ts::matmul with a preferred_element on traced values (mixed precision under ts::grad)
// accepts and refuses what ts::matmul on the arrays does: batch dimensions over different
// axes in the two operands are refused even with an output spec (the einsum of the same
// equation would move them). The twin: the batch sharded in one operand only, which both
// accept (no communication).
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using W = ts::sharded_array<float, mesh, ts::spec<"x", ts::none, ts::none>, ts::dextents<3>>;
#ifdef TYPESHARD_COMPILE_FAIL
using X = ts::sharded_array<ts::bfloat16, mesh, ts::spec<"y", ts::none, ts::none>,
                            ts::dextents<3>>;
#else
using X = ts::sharded_array<ts::bfloat16, mesh, ts::spec<ts::none, ts::none, ts::none>,
                            ts::dextents<3>>;
#endif

void step(const W& w, const X& x) {
  auto f = [](auto wt, auto xt) {
    auto wb = ts::astype<ts::bfloat16>(wt);
    return ts::mean(ts::matmul<ts::spec<"x", ts::none, ts::none>>(xt, wb,
                                                                  ts::preferred_element<float>));
  };
  auto r = ts::grad<0>(f)(w, x);
  (void)r;
}
