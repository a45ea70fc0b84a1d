// benchmarks/compare_support/typeshard_matmul.cpp: seed 001's four sharded-matmul cases on
// the 2 x 2 mesh ("x", "y") and seed 004's batched matmul (batch over 8 devices), each one
// ts::matmul in the global view with the seed's output sharding named.
//
//   case1  A[I_X, J] . B[J, K_Y] -> C[I_X, K_Y]       no collective (the seed's A @ B)
//   case2  A[I, J_X] . B[J, K]   -> C[I, K]           all_gather A over x (every device
//                                                    then multiplies the whole product)
//   case3  A[I, J_X] . B[J_X, K] -> C[I, K]           local products, psum over x
//   case4  A[I_X, J] . B[J, K_X] -> C[I_X, K]         all_gather B over x
//   batched  X[8_p, N, N] . X -> Y[8_p, N, N]       no collective (pmap(jnp.matmul))
#include <optional>

#include "typeshard_contender.hpp"

namespace compare {
namespace {

using ts::none;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_8 = ts::mesh<ts::axis("p", 8)>;

template <class LhsSpec, class RhsSpec, class Out>
class matmul_case final : public instance {
 public:
  explicit matmul_case(const params& p) : n_(p.get("n")) {
    ts::host_tensor<float, 2> a({n_, n_}), b({n_, n_});
    fill(a.data(), a.size(), 1);
    fill(b.data(), b.size(), 2);
    a_.emplace(ts::device_put<LhsSpec>(mesh_, a));
    b_.emplace(ts::device_put<RhsSpec>(mesh_, b));
  }
  void run() override {
    c_.reset();  // the previous result is freed outside the timed region
    c_.emplace(ts::matmul<Out>(*a_, *b_));
  }
  std::vector<double> check() override { return sample_array(*c_); }
  std::string info() override { return gemm_info() + "plan: " + plan::describe(); }

 private:
  using lhs_t = decltype(ts::device_put<LhsSpec>(std::declval<const ts::device_mesh<mesh_2x2>&>(),
                                                 std::declval<const ts::host_tensor<float, 2>&>()));
  using rhs_t = decltype(ts::device_put<RhsSpec>(std::declval<const ts::device_mesh<mesh_2x2>&>(),
                                                 std::declval<const ts::host_tensor<float, 2>&>()));
  using plan = ts::matmul_plan_for<lhs_t, rhs_t, Out>;
  using out_t =
      decltype(ts::matmul<Out>(std::declval<const lhs_t&>(), std::declval<const rhs_t&>()));

  std::size_t n_;
  ts::device_mesh<mesh_2x2> mesh_{devices()};
  std::optional<lhs_t> a_;
  std::optional<rhs_t> b_;
  std::optional<out_t> c_;
};

class batched final : public instance {
 public:
  explicit batched(const params& p) : batch_(p.get("batch")), n_(p.get("n")) {
    using P = ts::spec<"p">;
    // Each device makes its own block (device_put from a block function, as pmap would):
    // no host copy of the whole 8 x N x N array.
    x_.emplace(ts::device_put<P>(mesh_, ts::shape<3>{batch_, n_, n_}, [&](const auto& index) {
      ts::host_tensor<float, 3> t({index[0].size(), n_, n_});
      fill(t.data(), t.size(), 1, index[0].start * n_ * n_);
      return t;
    }));
  }
  void run() override {
    y_.reset();
    y_.emplace(ts::matmul(*x_, *x_));
  }
  std::vector<double> check() override { return sample_array(*y_); }
  std::string info() override { return gemm_info() + "plan: " + plan::describe(); }

 private:
  using x_t =
      decltype(ts::device_put<ts::spec<"p">>(std::declval<const ts::device_mesh<mesh_8>&>(),
                                             std::declval<const ts::host_tensor<float, 3>&>()));
  using plan = ts::matmul_plan_for<x_t, x_t>;
  using y_t = decltype(ts::matmul(std::declval<const x_t&>(), std::declval<const x_t&>()));

  std::size_t batch_, n_;
  ts::device_mesh<mesh_8> mesh_{devices()};
  std::optional<x_t> x_;
  std::optional<y_t> y_;
};

template <class T>
factory make() {
  return [](const params& p) -> std::unique_ptr<instance> { return std::make_unique<T>(p); };
}

}  // namespace

void add_matmul_workloads(registry& r) {
  using rows_x = ts::spec<"x", none>;
  using cols_x = ts::spec<none, "x">;
  using cols_y = ts::spec<none, "y">;
  using replicated = ts::spec<none, none>;
  r["case1"] = make<matmul_case<rows_x, cols_y, ts::auto_out>>();
  r["case2"] = make<matmul_case<cols_x, replicated, replicated>>();
  r["case3"] = make<matmul_case<cols_x, rows_x, replicated>>();
  r["case4"] = make<matmul_case<rows_x, cols_x, rows_x>>();
  r["batched"] = make<batched>();
}

}  // namespace compare
