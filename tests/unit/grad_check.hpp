// tests/unit/grad_check.hpp: the gradient checks of the grad_* tests. A loss f (a generic
// lambda written with typeshard's ops, which also runs on plain arrays) is differentiated by
// ts::value_and_grad with its operands sharded by the specs under test, and each gradient
// (reduced to the replicated spec, the all-reduce of its unreduced axes) is compared with
//   - central finite differences in double of the same f on plain arrays (at most
//     `samples` elements per operand, chosen deterministically), and
//   - the serial reference: the gradient of the same f with every operand replicated
//     (spec none everywhere: every op runs locally, no collective, on each device).
//
// Not a test itself (CMake globs tests/unit/*.cpp only; this is a .hpp).
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include <typeshard/typeshard.hpp>

namespace grad_test {

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

// Every dimension unsharded (an array pads a spec with none to its rank).
template <std::size_t Rank>
using replicated = ts::spec<>;

// Deterministic data in [-1, 1] (offset keeps log/sqrt inputs positive when asked).
template <std::size_t Rank>
ts::host_tensor<double, Rank> random_tensor(const ts::shape<Rank>& s, unsigned seed,
                                            double offset = 0) {
  ts::host_tensor<double, Rank> t(s);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = u(gen) + offset;
  return t;
}

// The whole value of an array (or of a loss), reduced first.
template <class A>
auto host_of(const A& a) {
  return ts::to_host(ts::reshard<replicated<A::rank>>(a));
}

// f's loss at host operands (on plain arrays sharded by Specs).
template <class... Specs, class F, class Mesh, class... H>
double loss_at(const F& f, const ts::device_mesh<Mesh>& m, const H&... h) {
  return host_of(f(ts::device_put<Specs>(m, h)...)).data()[0];
}

inline bool close(double a, double b, double tol) {
  return std::abs(a - b) <= tol * (1 + std::abs(a) + std::abs(b));
}

// Checks ts::grad of f with respect to every operand, sharded by Specs, against finite
// differences and against the replicated run. `what` names the case in failures.
template <class... Specs, class F, class Mesh, class... H>
void check_gradients(const std::string& what, const F& f, const ts::device_mesh<Mesh>& m,
                     const H&... h) {
  INFO(what);
  constexpr std::size_t n = sizeof...(H);
  auto sharded = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return ts::value_and_grad<I...>(f)(ts::device_put<Specs>(m, h)...);
  }(std::make_index_sequence<n>{});
  auto serial = [&]<std::size_t... I>(std::index_sequence<I...>) {
    return ts::value_and_grad<I...>(f)(ts::device_put<replicated<H::rank>>(m, h)...);
  }(std::make_index_sequence<n>{});
  const double l = host_of(sharded.first).data()[0];
  const double ls = host_of(serial.first).data()[0];
  CHECK(close(l, ls, 1e-12));
  const std::tuple<const H&...> hosts(h...);
  auto one = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
    INFO("operand " << I);
    const auto g = [&] {
      if constexpr (n == 1) return host_of(sharded.second); else return host_of(std::get<I>(sharded.second));
    }();
    const auto gs = [&] {
      if constexpr (n == 1) return host_of(serial.second); else return host_of(std::get<I>(serial.second));
    }();
    const auto& x = std::get<I>(hosts);
    REQUIRE(g.extents() == x.extents());
    for (std::size_t k = 0; k < g.size(); ++k) {
      INFO("element " << k);
      CHECK(close(g.data()[k], gs.data()[k], 1e-12));
    }
    // finite differences at up to 6 elements, spread over the operand
    const std::size_t step = g.size() > 6 ? g.size() / 6 : 1;
    for (std::size_t k = 0; k < g.size(); k += step) {
      const double eps = 1e-6;
      auto at = [&](double d) {
        auto perturbed = std::tuple<H...>(h...);
        std::get<I>(perturbed).data()[k] += d;
        return std::apply([&](const auto&... p) { return loss_at<Specs...>(f, m, p...); },
                          perturbed);
      };
      const double fd = (at(eps) - at(-eps)) / (2 * eps);
      INFO("element " << k << ": grad " << g.data()[k] << ", finite differences " << fd);
      CHECK(close(g.data()[k], fd, 1e-6));
    }
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (one(std::integral_constant<std::size_t, I>{}), ...);
  }(std::make_index_sequence<n>{});
}

// The loss of one op's result y: the sum of sin(y) (a cotangent that varies per element),
// y reduced to its own spec first (an einsum or sum may leave it unreduced).
template <class Y>
auto sin_sum(const Y& y) {
  return ts::sum(ts::sin(ts::reshard<typename Y::spec>(y)));
}

}  // namespace grad_test
