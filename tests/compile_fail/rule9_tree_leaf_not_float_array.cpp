// expect: typeshard: rule 9 \(gradients\): every leaf of a differentiated parameter tree must be a fully reduced ts::sharded_array of float or double
// A parameter tuple holding the token ids (an integer array) beside the weights.
#include <typeshard/typeshard.hpp>

#include <tuple>

namespace ts = typeshard;

using mesh = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
using X = ts::sharded_array<float, mesh, ts::spec<"data", ts::none>, ts::dextents<2>>;
using W = ts::sharded_array<float, mesh, ts::spec<ts::none, ts::none>, ts::dextents<2>>;
using I = ts::sharded_array<int, mesh, ts::spec<ts::none, ts::none>, ts::dextents<2>>;

void step(const W& w, const I& ids, const X& x) {
  auto f = [](const auto& p, const auto& xt) { return ts::mean(ts::matmul(xt, std::get<0>(p))); };
#ifdef TYPESHARD_COMPILE_FAIL
  auto r = ts::grad(f)(std::tuple<W, I>{w, ids}, x);
#else
  (void)ids;
  auto r = ts::grad(f)(std::tuple<W, W>{w, w}, x);
#endif
  (void)r;
}
