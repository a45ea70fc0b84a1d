// ts::value_and_grad through the elementwise ops (+ - * / with broadcasting and scalars,
// unary -, exp log tanh relu sin cos sqrt) on the (2,2) mesh: for every spec of a sample
// list per rank (1 to 3; the unary ops 2 and 3; replicated, one axis, two axes, both axes on
// one dimension), even and uneven extents, the gradient equals central finite differences
// (double) and the replicated (serial) run's. Binary ops: both operands with the same spec,
// one replicated (sharded in one operand only: no communication forward, the cotangent
// resharded back), a bias of lower rank and a static extent-1 dimension that stretches.
#include "grad_check.hpp"

namespace {

using namespace grad_test;

template <class... S>
struct specs {};

// A deterministic sample of the specs (compile time is budgeted: each spec instantiates the
// whole loss and its backward): one axis, two axes on two dimensions, both axes on one; the
// replicated spec is the serial reference of every case.
using rank1 = specs<ts::spec<ts::axes("x", "y")>>;
using rank2 = specs<ts::spec<ts::none, "x">, ts::spec<"y", "x">>;
using rank3 = specs<ts::spec<ts::none, "y", "x">>;

// Every unary op and the scalar forms in one loss (x > 0: log, sqrt, s / x; relu's kink at
// 0 is avoided by the shift).
const auto unary = [](auto x) {
  return sin_sum(ts::exp(x) * 0.5 + ts::tanh(x) - ts::relu(x - 2.0) / 3.0 +
                 ts::sin(x) * ts::cos(x) + (2.0 - x) * (x + 1.0) + (-x) * 1.5 + 3.0 * x +
                 (0.5 + x) + ts::log(x) + ts::sqrt(x) - 2.0 / x);
};
const auto binary = [](auto a, auto b) { return sin_sum(a * b + a / b - (a + b) + (b - a)); };

template <std::size_t Rank, class... S>
void unary_cases(specs<S...>, const std::vector<ts::shape<Rank>>& shapes,
                 const ts::device_mesh<mesh_2x2>& m) {
  unsigned seed = 1;
  for (const auto& s : shapes) {
    const auto x = random_tensor(s, seed++, 2.0);
    (check_gradients<S>("unary " + S::to_string() + " " + ts::to_string(s), unary, m, x), ...);
  }
}

template <std::size_t Rank, class... S>
void binary_cases(specs<S...>, const std::vector<ts::shape<Rank>>& shapes,
                  const ts::device_mesh<mesh_2x2>& m) {
  unsigned seed = 100;
  for (const auto& s : shapes) {
    const auto a = random_tensor(s, seed++);
    const auto b = random_tensor(s, seed++, 2.0);
    (check_gradients<S, S>("same " + S::to_string() + " " + ts::to_string(s), binary, m, a, b), ...);
    (check_gradients<S, ts::spec<>>("lhs only " + S::to_string(), binary, m, a, b), ...);
  }
}

// The unary ops' backward is local (the same for every rank); ranks 2 and 3 (one spec: the
// transformer's LayerNorm and GELU use them on rank 3) keep the compile time in budget, rank
// 1 goes through the binary ops below.
TEST_CASE("grad: unary elementwise ops, ranks 2 and 3", "[grad]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  unary_cases<2>(rank2{}, {{4, 4}, {3, 5}}, m);
  unary_cases<3>(rank3{}, {{2, 4, 4}, {3, 2, 5}}, m);
}

TEST_CASE("grad: binary elementwise ops, ranks 1 to 3", "[grad]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  binary_cases<1>(rank1{}, {{4}, {5}}, m);
  binary_cases<2>(rank2{}, {{4, 4}, {3, 5}}, m);
  binary_cases<3>(rank3{}, {{2, 4, 4}, {3, 2, 5}}, m);
  // the replicated operand on the left
  const auto a = random_tensor(ts::shape<2>{3, 5}, 5);
  const auto b = random_tensor(ts::shape<2>{3, 5}, 6, 2.0);
  check_gradients<ts::spec<>, ts::spec<"y", "x">>("rhs only", binary, m, a, b);
}

TEST_CASE("grad: broadcasting: a bias of lower rank, a static extent-1 dimension", "[grad]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  for (const ts::shape<2> s : {ts::shape<2>{4, 4}, ts::shape<2>{5, 3}}) {
    const auto a = random_tensor(s, 7);
    const auto bias = random_tensor(ts::shape<1>{s[1]}, 8, 2.0);
    check_gradients<ts::spec<"x", "y">, ts::spec<"y">>("bias sharded alike", binary, m, a, bias);
    check_gradients<ts::spec<"x", "y">, ts::spec<>>("bias replicated", binary, m, a, bias);
    // a row vector of static extent 1 stretching over the rows, sharded over x and y
    const auto row = random_tensor(ts::shape<2>{1, s[1]}, 9, 2.0);
    auto f = [](auto x, auto r) { return binary(x, r); };
    auto run = [&]<class SA, class SR>() {
      INFO("stretch " << SA::to_string());
      auto A = ts::device_put<SA>(m, a);
      auto R = ts::device_put<SR, ts::extents<1, ts::dyn>>(m, row);
      auto [l, g] = ts::value_and_grad<0, 1>(f)(A, R);
      auto Ar = ts::device_put<ts::spec<>>(m, a);
      auto Rr = ts::device_put<ts::spec<>, ts::extents<1, ts::dyn>>(m, row);
      auto [lr, gr] = ts::value_and_grad<0, 1>(f)(Ar, Rr);
      CHECK(close(host_of(l).data()[0], host_of(lr).data()[0], 1e-12));
      const auto g1 = host_of(std::get<1>(g));
      const auto g1r = host_of(std::get<1>(gr));
      for (std::size_t k = 0; k < g1.size(); ++k) CHECK(close(g1.data()[k], g1r.data()[k], 1e-12));
      // finite differences on the row
      for (std::size_t k = 0; k < row.size(); ++k) {
        auto at = [&](double d) {
          auto r2 = row;
          r2.data()[k] += d;
          return host_of(f(ts::device_put<SA>(m, a), ts::device_put<SR, ts::extents<1, ts::dyn>>(m, r2)))
              .data()[0];
        };
        CHECK(close(g1.data()[k], (at(1e-6) - at(-1e-6)) / 2e-6, 1e-6));
      }
    };
    run.template operator()<ts::spec<"x", "y">, ts::spec<ts::none, "y">>();
  }
}

}  // namespace
