// benchmarks/compare_support/openblas_contender.cpp: OpenBLAS with all cores on the
// unsharded problem, the throughput limit of one machine. This executable links the pthread
// OpenBLAS (typeshard's devices use the serial one) and sets its thread count to the number
// of cores. No sharding, no communication: one GEMM per product (per batch element for seed
// 004), outputs allocated before timing.
//
// The training step is the serial program of seed 002's MLP on the whole batch: forward,
// backward (dW = a.T dz into a buffer, da = dz W.T), SGD update. The elementwise loops (bias,
// relu, its derivative, the bias gradients, the update) run on the calling thread.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "openblas_info.hpp"
#include "protocol.hpp"

extern "C" {
void openblas_set_num_threads(int);
int openblas_get_num_threads(void);
char* openblas_get_config(void);
int openblas_get_parallel(void);
}

namespace compare {
namespace {

using buf = std::vector<float>;

void gemm(std::size_t m, std::size_t n, std::size_t k, const float* a, std::size_t lda,
          const float* b, std::size_t ldb, float* c, std::size_t ldc, bool ta = false,
          bool tb = false, float alpha = 1.0f, float beta = 0.0f) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m),
              int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

std::string blas_info() {
  return openblas_gemm_info() + "; " + std::string(openblas_get_config()) + ", " +
         std::to_string(openblas_get_num_threads()) +
         " threads" + (openblas_get_parallel() == 1 ? " (pthreads)" : "");
}

// Every matmul case of seed 001 is the same unsharded product C = A B.
class product final : public instance {
 public:
  explicit product(const params& p)
      : n_(p.get("n")), a_(make(n_ * n_, 1)), b_(make(n_ * n_, 2)), c_(n_ * n_) {}
  void run() override { gemm(n_, n_, n_, a_.data(), n_, b_.data(), n_, c_.data(), n_); }
  std::vector<double> check() override { return sample(c_.data(), c_.size()); }
  std::string info() override { return blas_info(); }

 private:
  std::size_t n_;
  buf a_, b_, c_;
};

class batched final : public instance {
 public:
  explicit batched(const params& p)
      : batch_(p.get("batch")), n_(p.get("n")), x_(make(batch_ * n_ * n_, 1)), y_(x_.size()) {}
  void run() override {
    const std::size_t per = n_ * n_;
    for (std::size_t t = 0; t < batch_; ++t)
      gemm(n_, n_, n_, x_.data() + t * per, n_, x_.data() + t * per, n_, y_.data() + t * per, n_);
  }
  std::vector<double> check() override { return sample(y_.data(), y_.size()); }
  std::string info() override { return blas_info(); }

 private:
  std::size_t batch_, n_;
  buf x_, y_;
};

class megatron final : public instance {
 public:
  explicit megatron(const params& p)
      : b_(p.get("batch")),
        d_(p.get("d")),
        f_(p.get("f")),
        x_(make(b_ * d_, 1)),
        w1_(make(d_ * f_, 2, 1.0f / std::sqrt(float(d_)))),
        w2_(make(f_ * d_, 3, 1.0f / std::sqrt(float(f_)))),
        temp_(b_ * f_),
        out_(b_ * d_) {}
  void run() override {
    gemm(b_, f_, d_, x_.data(), d_, w1_.data(), f_, temp_.data(), f_);
    gemm(b_, d_, f_, temp_.data(), f_, w2_.data(), d_, out_.data(), d_);
  }
  std::vector<double> check() override { return sample(out_.data(), out_.size()); }
  std::string info() override { return blas_info(); }

 private:
  std::size_t b_, d_, f_;
  buf x_, w1_, w2_, temp_, out_;
};

class training final : public instance {
 public:
  explicit training(const params& p) : s_(p) {
    const std::size_t L = s_.layers(), B = s_.batch;
    for (std::size_t l = 0; l < L; ++l) {
      w_.push_back(make(s_.sizes[l] * s_.sizes[l + 1], 10 + l, s_.w_scale(l)));
      b_.push_back(make(s_.sizes[l + 1], 20 + l));
      z_.emplace_back(B * s_.sizes[l + 1]);
      a_.emplace_back(B * s_.sizes[l + 1]);
      dw_.emplace_back(s_.sizes[l] * s_.sizes[l + 1]);
    }
    inputs_ = make(B * s_.sizes.front(), 1);
    targets_ = make(B * s_.sizes.back(), 2);
    dz_ = buf(B * *std::max_element(s_.sizes.begin(), s_.sizes.end()));
    da_ = dz_;
  }

  void run() override {
    const std::size_t L = s_.layers(), B = s_.batch;
    const float* in = inputs_.data();
    for (std::size_t l = 0; l < L; ++l) {
      const std::size_t ni = s_.sizes[l], no = s_.sizes[l + 1];
      float* z = z_[l].data();
      for (std::size_t i = 0; i < B; ++i) std::memcpy(z + i * no, b_[l].data(), no * sizeof(float));
      gemm(B, no, ni, in, ni, w_[l].data(), no, z, no, false, false, 1.0f, 1.0f);
      if (l + 1 < L) {
        float* a = a_[l].data();
        for (std::size_t k = 0; k < B * no; ++k) a[k] = z[k] > 0.0f ? z[k] : 0.0f;
        in = a;
      }
    }
    const std::size_t out = s_.sizes[L];
    const float scale = 2.0f / static_cast<float>(B);
    for (std::size_t k = 0; k < B * out; ++k) dz_[k] = (z_[L - 1][k] - targets_[k]) * scale;
    for (std::size_t l = L; l-- > 0;) {
      const std::size_t ni = s_.sizes[l], no = s_.sizes[l + 1];
      const float* a_in = l == 0 ? inputs_.data() : a_[l - 1].data();
      std::vector<float> db(no, 0.0f);
      for (std::size_t i = 0; i < B; ++i)
        for (std::size_t j = 0; j < no; ++j) db[j] += dz_[i * no + j];
      gemm(ni, no, B, a_in, ni, dz_.data(), no, dw_[l].data(), no, true);  // dW = a.T dz
      if (l > 0) gemm(B, ni, no, dz_.data(), no, w_[l].data(), no, da_.data(), ni, false, true);
      float* w = w_[l].data();
      const float* dw = dw_[l].data();
      for (std::size_t k = 0; k < ni * no; ++k) w[k] -= s_.step * dw[k];
      for (std::size_t j = 0; j < no; ++j) b_[l][j] -= s_.step * db[j];
      if (l > 0) {
        const float* z = z_[l - 1].data();
        for (std::size_t k = 0; k < B * ni; ++k) dz_[k] = z[k] > 0.0f ? da_[k] : 0.0f;
      }
    }
  }

  std::vector<double> check() override {  // called after the warm-up: the first step's dW
    std::vector<double> out;
    for (std::size_t l : checked_layers)
      for (double v : sample(dw_[l].data(), dw_[l].size())) out.push_back(v);
    return out;
  }
  std::string info() override { return blas_info(); }

 private:
  mlp_shape s_;
  std::vector<buf> w_, b_, z_, a_, dw_;
  buf inputs_, targets_, dz_, da_;
};

template <class T>
factory make_factory() {
  return [](const params& p) -> std::unique_ptr<instance> { return std::make_unique<T>(p); };
}

}  // namespace
}  // namespace compare

int main() {
  using namespace compare;
  openblas_set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  std::map<std::string, factory> r;
  for (const char* c : {"case1", "case2", "case3", "case4"}) r[c] = make_factory<product>();
  r["batched"] = make_factory<batched>();
  r["megatron"] = make_factory<megatron>();
  r["training"] = make_factory<training>();
  return serve(r);
}
