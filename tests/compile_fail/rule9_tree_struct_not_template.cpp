// expect: typeshard: rule 9 \(gradients\): a parameter struct must be a class template over its members' types
// A parameter struct with fixed member types: its gradient (unreduced over "data") and the
// traced values inside the loss have other types, so the struct cannot hold them.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
using X = ts::sharded_array<float, mesh, ts::spec<"data", ts::none>, ts::dextents<2>>;
using W = ts::sharded_array<float, mesh, ts::spec<ts::none, ts::none>, ts::dextents<2>>;

struct fixed_params {
  BOOST_HANA_DEFINE_STRUCT(fixed_params, (W, w));
};

template <class A>
struct params {
  BOOST_HANA_DEFINE_STRUCT(params, (A, w));
};

void step(const W& w, const X& x) {
  auto f = [](const auto& p, const auto& xt) { return ts::mean(ts::matmul(xt, p.w)); };
#ifdef TYPESHARD_COMPILE_FAIL
  auto r = ts::grad(f)(fixed_params{w}, x);
#else
  auto r = ts::grad(f)(params<W>{w}, x);
#endif
  (void)r;
}
