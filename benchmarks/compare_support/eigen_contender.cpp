// benchmarks/compare_support/eigen_contender.cpp: Eigen 3.4 on the unsharded problem, its
// products parallel over all cores (built with -fopenmp, Eigen::setNbThreads(cores)).
// Row-major float matrices; products written with .noalias() into outputs allocated before
// timing. The training step is seed 002's MLP on the whole batch in Eigen expressions (the
// coefficient-wise parts are Eigen's single-threaded vectorised loops).
#include <Eigen/Dense>
#include <algorithm>
#include <thread>

#include "protocol.hpp"

namespace compare {
namespace {

using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using row_vector = Eigen::Matrix<float, 1, Eigen::Dynamic>;

matrix make_matrix(std::size_t rows, std::size_t cols, std::uint64_t seed, float scale = 1.0f) {
  matrix m(rows, cols);
  fill(m.data(), m.size(), seed, 0, scale);
  return m;
}

std::string eigen_info() {
  return std::string("gemm: Eigen's own GEBP kernel (") + Eigen::SimdInstructionSetsInUse() +
         "); Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." +
         std::to_string(EIGEN_MAJOR_VERSION) + "." + std::to_string(EIGEN_MINOR_VERSION) + ", " +
         std::to_string(Eigen::nbThreads()) + " threads, SIMD " + Eigen::SimdInstructionSetsInUse();
}

class product final : public instance {
 public:
  explicit product(const params& p)
      : a_(make_matrix(p.get("n"), p.get("n"), 1)),
        b_(make_matrix(p.get("n"), p.get("n"), 2)),
        c_(a_.rows(), b_.cols()) {}
  void run() override { c_.noalias() = a_ * b_; }
  std::vector<double> check() override { return sample(c_.data(), c_.size()); }
  std::string info() override { return eigen_info(); }

 private:
  matrix a_, b_, c_;
};

class batched final : public instance {
 public:
  explicit batched(const params& p) : n_(p.get("n")) {
    for (std::size_t t = 0; t < p.get("batch"); ++t) {
      x_.emplace_back(n_, n_);
      fill(x_.back().data(), n_ * n_, 1, t * n_ * n_);
      y_.emplace_back(n_, n_);
    }
  }
  void run() override {
    for (std::size_t t = 0; t < x_.size(); ++t) y_[t].noalias() = x_[t] * x_[t];
  }
  std::vector<double> check() override {
    std::vector<double> out;
    const std::size_t per = n_ * n_;
    for (std::size_t pos : sample_positions(x_.size() * per))
      out.push_back(y_[pos / per].data()[pos % per]);
    return out;
  }
  std::string info() override { return eigen_info(); }

 private:
  std::size_t n_;
  std::vector<matrix> x_, y_;
};

class megatron final : public instance {
 public:
  explicit megatron(const params& p)
      : x_(make_matrix(p.get("batch"), p.get("d"), 1)),
        w1_(make_matrix(p.get("d"), p.get("f"), 2, 1.0f / std::sqrt(float(p.get("d"))))),
        w2_(make_matrix(p.get("f"), p.get("d"), 3, 1.0f / std::sqrt(float(p.get("f"))))),
        temp_(x_.rows(), w1_.cols()),
        out_(x_.rows(), w2_.cols()) {}
  void run() override {
    temp_.noalias() = x_ * w1_;
    out_.noalias() = temp_ * w2_;
  }
  std::vector<double> check() override { return sample(out_.data(), out_.size()); }
  std::string info() override { return eigen_info(); }

 private:
  matrix x_, w1_, w2_, temp_, out_;
};

class training final : public instance {
 public:
  explicit training(const params& p) : s_(p) {
    const std::size_t L = s_.layers(), B = s_.batch;
    for (std::size_t l = 0; l < L; ++l) {
      w_.push_back(make_matrix(s_.sizes[l], s_.sizes[l + 1], 10 + l, s_.w_scale(l)));
      row_vector b(s_.sizes[l + 1]);
      fill(b.data(), b.size(), 20 + l);
      b_.push_back(b);
      z_.emplace_back(B, s_.sizes[l + 1]);
      a_.emplace_back(B, s_.sizes[l + 1]);
      dw_.emplace_back(s_.sizes[l], s_.sizes[l + 1]);
    }
    inputs_ = make_matrix(B, s_.sizes.front(), 1);
    targets_ = make_matrix(B, s_.sizes.back(), 2);
  }

  void run() override {
    const std::size_t L = s_.layers();
    const float step = s_.step;
    const matrix* in = &inputs_;
    for (std::size_t l = 0; l < L; ++l) {
      z_[l].rowwise() = b_[l];
      z_[l].noalias() += *in * w_[l];
      if (l + 1 < L) {
        a_[l] = z_[l].cwiseMax(0.0f);
        in = &a_[l];
      }
    }
    dz_ = (z_[L - 1] - targets_) * (2.0f / static_cast<float>(s_.batch));
    for (std::size_t l = L; l-- > 0;) {
      const matrix& a_in = l == 0 ? inputs_ : a_[l - 1];
      dw_[l].noalias() = a_in.transpose() * dz_;
      if (l > 0) da_.noalias() = dz_ * w_[l].transpose();
      w_[l] -= step * dw_[l];
      b_[l] -= step * dz_.colwise().sum();
      if (l > 0) dz_ = (z_[l - 1].array() > 0.0f).select(da_, 0.0f);
    }
  }

  std::vector<double> check() override {  // called after the warm-up: the first step's dW
    std::vector<double> out;
    for (std::size_t l : checked_layers)
      for (double v : sample(dw_[l].data(), dw_[l].size())) out.push_back(v);
    return out;
  }
  std::string info() override { return eigen_info(); }

 private:
  mlp_shape s_;
  std::vector<matrix> w_, z_, a_, dw_;
  std::vector<row_vector> b_;
  matrix inputs_, targets_, dz_, da_;
};

template <class T>
factory make_factory() {
  return [](const params& p) -> std::unique_ptr<instance> { return std::make_unique<T>(p); };
}

}  // namespace
}  // namespace compare

int main() {
  using namespace compare;
  Eigen::setNbThreads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  std::map<std::string, factory> r;
  for (const char* c : {"case1", "case2", "case3", "case4"}) r[c] = make_factory<product>();
  r["batched"] = make_factory<batched>();
  r["megatron"] = make_factory<megatron>();
  r["training"] = make_factory<training>();
  return serve(r);
}
