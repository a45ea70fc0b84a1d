// Randomised programs (the differential harness for gradients): random chains of ops on a
// traced [B, H] activation with random shardings on the (2,2) mesh; the gradients of the
// parameter W and of the input X equal the serial gradients (the same chain with every
// operand replicated: no collective anywhere) and central finite differences (double).
// The chain is drawn at run time (TYPESHARD_TEST_SEED reproduces it); every op returns the
// activation's own type (reshards and moves go there and back), so one instantiation per
// spec serves every chain: the ops are einsum with a plain matrix (a gather of the
// contracting dimension, the product resharded back), tanh, sin, a scaled square, a
// reshard round trip, softmax and log_softmax along the sharded columns, a row sum broadcast
// back, a transpose pair, a sum over rows and mean.
#include "grad_check.hpp"
#include "support/foundation.hpp"

namespace {

using namespace grad_test;
using ts::none;

constexpr int op_count = 9;

template <class V, class M>
V apply(int op, const V& v, const M& mix) {
  using S = typename V::spec;
  switch (op) {
    case 0: return ts::reshard<S>(ts::einsum<"bh,hk->bk">(v, mix));
    case 1: return ts::tanh(v);
    case 2: return ts::sin(v) + v * 0.5;
    case 3: return ts::reshard<S>(ts::reshard<ts::spec<none, "x">>(v)) * v * 0.5;
    case 4: return ts::softmax(v) * 4.0 - 1.0;
    case 5: return ts::log_softmax<1>(v) * 0.25;
    case 6: {
      auto s = ts::sum<1>(v, ts::keep_dims);
      return v - ts::reshard<typename decltype(s)::spec>(s) * 0.25;
    }
    case 7: return ts::permute<1, 0>(ts::permute<1, 0>(v) * 1.5);
    default: {
      auto s = ts::mean<0>(v, ts::keep_dims);
      return v * 0.5 + ts::reshard<typename decltype(s)::spec>(s);
    }
  }
}

// A chain on the activation tanh(X W): X [B, D] and W [D, H] differentiated, `mix` a plain
// [H, H] matrix.
template <class M>
auto chain_loss(const std::vector<int>& ops, const M& mix) {
  return [ops, mix](auto w, auto x) {
    auto v = ts::tanh(ts::matmul(x, w));
    for (int op : ops) v = apply(op, v, mix);
    return sin_sum(ts::sum<0>(v * v));
  };
}

template <class SX, class SW>
void random_chains(const ts::device_mesh<mesh_2x2>& m, std::mt19937_64& gen, int count) {
  std::uniform_int_distribution<int> pick(0, op_count - 1), length(1, 5);
  std::uniform_int_distribution<std::size_t> extent(2, 6);
  for (int c = 0; c < count; ++c) {
    std::vector<int> ops(static_cast<std::size_t>(length(gen)));
    for (int& op : ops) op = pick(gen);
    const std::size_t B = extent(gen), D = extent(gen), H = extent(gen);
    const auto x = random_tensor(ts::shape<2>{B, D}, static_cast<unsigned>(gen()));
    const auto w = random_tensor(ts::shape<2>{D, H}, static_cast<unsigned>(gen()));
    const auto mix = ts::device_put<ts::spec<>>(m, random_tensor(ts::shape<2>{H, H}, 3));
    // appended piece by piece: g++ 12 -O3 warns falsely on chains of std::string + (-Wrestrict,
    // -Wstringop-overflow)
    std::string what = "X ";
    what.append(SX::to_string()).append(", W ").append(SW::to_string()).append(", B D H");
    for (std::size_t e : {B, D, H}) what.append(" ").append(std::to_string(e));
    what.append(", ops");
    for (int op : ops) what.append(" ").append(std::to_string(op));
    check_gradients<SW, SX>(what, chain_loss(ops, mix), m, w, x);
  }
}

TEST_CASE("grad: random chains with random shardings equal the serial gradients", "[grad]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 gen(ts_test::seed());
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  // activation specs: rows over x, columns over y; rows over both; columns over x
  random_chains<ts::spec<"x", none>, ts::spec<none, "y">>(m, gen, 6);
  random_chains<ts::spec<ts::axes("x", "y"), none>, ts::spec<none, none>>(m, gen, 6);
  random_chains<ts::spec<none, none>, ts::spec<none, "x">>(m, gen, 6);
}

}  // namespace
