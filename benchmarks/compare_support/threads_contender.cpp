// benchmarks/compare_support/threads_contender.cpp: two contenders of benchmarks/compare.
//
//   compare_threads threads   the typeshard programs written by hand: the same simulated
//                             devices (one std::thread each, started per run, as a user
//                             would), the same blocks (each device's own copy, made before
//                             the timed run), the collectives as memcpy and summing loops
//                             between the devices' buffers (std::barrier where a device reads
//                             what another wrote), the same OpenBLAS as typeshard's devices,
//                             run with one thread (each device is already a thread). The
//                             outputs and scratch buffers are allocated once, before timing:
//                             this is the careful hand-written program, the one typeshard's
//                             overhead is measured against.
//   compare_threads memcpy    for the collectives: a memcpy of n x S bytes (the bytes every
//                             collective here must read or write) by one thread per core,
//                             between buffers allocated and first touched before timing.
//
// Mesh positions are row-major (position p = x * 2 + y on a 2 x 2 mesh), as in typeshard.
#include <cblas.h>

#include <algorithm>
#include <barrier>
#include <cstring>
#include <thread>

#include "openblas_info.hpp"
#include "protocol.hpp"

namespace compare {
namespace {

using buf = std::vector<float>;

// Runs f(p) for p in [0, n) on n fresh threads and joins them.
template <class F>
void spmd(std::size_t n, F&& f) {
  std::vector<std::thread> t;
  t.reserve(n);
  for (std::size_t p = 0; p < n; ++p) t.emplace_back([&f, p] { f(p); });
  for (auto& th : t) th.join();
}

// C[m x n] = alpha op(A) op(B) + beta C, row-major.
void gemm(std::size_t m, std::size_t n, std::size_t k, const float* a, std::size_t lda,
          const float* b, std::size_t ldb, float* c, std::size_t ldc, bool ta = false,
          bool tb = false, float alpha = 1.0f, float beta = 0.0f) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m),
              int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

// The block [r0, r0 + rows) x [c0, c0 + cols) of a row-major matrix with `ld` columns.
buf block_of(const buf& g, std::size_t ld, std::size_t r0, std::size_t rows, std::size_t c0,
             std::size_t cols) {
  buf out(rows * cols);
  for (std::size_t i = 0; i < rows; ++i)
    std::memcpy(out.data() + i * cols, g.data() + (r0 + i) * ld + c0, cols * sizeof(float));
  return out;
}

// Writes a block back into a global row-major matrix (for the checks).
void put_block(buf& g, std::size_t ld, std::size_t r0, std::size_t rows, std::size_t c0,
               std::size_t cols, const float* blk) {
  for (std::size_t i = 0; i < rows; ++i)
    std::memcpy(g.data() + (r0 + i) * ld + c0, blk + i * cols, cols * sizeof(float));
}

// Copies `src` (rows x cols) into columns [c0, c0 + cols) of `dst` (rows x ld).
void copy_cols(float* dst, std::size_t ld, std::size_t c0, const float* src, std::size_t rows,
               std::size_t cols) {
  for (std::size_t i = 0; i < rows; ++i)
    std::memcpy(dst + i * ld + c0, src + i * cols, cols * sizeof(float));
}

// ---- seed 001's matmul cases on the 2 x 2 mesh ------------------------------------------------

class matmul_case final : public instance {
 public:
  matmul_case(const params& p, int which) : n_(p.get("n")), which_(which) {
    const std::size_t n = n_, h = n / 2;
    const buf a = make(n * n, 1), b = make(n * n, 2);
    a_.resize(4);
    b_.resize(4);
    c_.resize(4);
    tmp_.resize(4);
    for (std::size_t p = 0; p < 4; ++p) {
      const std::size_t x = p / 2, y = p % 2;
      switch (which_) {
        case 1:  // A[I_X, J], B[J, K_Y] -> C[I_X, K_Y]
          a_[p] = block_of(a, n, x * h, h, 0, n);
          b_[p] = block_of(b, n, 0, n, y * h, h);
          c_[p].resize(h * h);
          break;
        case 2:  // A[I, J_X], B replicated -> C replicated; gathers A over x
          a_[p] = block_of(a, n, 0, n, x * h, h);
          b_[p] = b;
          tmp_[p].resize(n * n);
          c_[p].resize(n * n);
          break;
        case 3:  // A[I, J_X], B[J_X, K] -> partial sums, psum over x
          a_[p] = block_of(a, n, 0, n, x * h, h);
          b_[p] = block_of(b, n, x * h, h, 0, n);
          tmp_[p].resize(n * n);
          c_[p].resize(n * n);
          break;
        default:  // 4: A[I_X, J], B[J, K_X] -> C[I_X, K]; gathers B over x
          a_[p] = block_of(a, n, x * h, h, 0, n);
          b_[p] = block_of(b, n, 0, n, x * h, h);
          tmp_[p].resize(n * n);
          c_[p].resize(h * n);
          break;
      }
    }
  }

  void run() override {
    const std::size_t n = n_, h = n / 2;
    std::barrier sync(4);
    spmd(4, [&](std::size_t p) {
      const std::size_t x = p / 2, y = p % 2;
      switch (which_) {
        case 1:
          gemm(h, h, n, a_[p].data(), n, b_[p].data(), h, c_[p].data(), h);
          break;
        case 2:
          for (std::size_t xs = 0; xs < 2; ++xs)  // all_gather A over x: from (xs, y)
            copy_cols(tmp_[p].data(), n, xs * h, a_[xs * 2 + y].data(), n, h);
          gemm(n, n, n, tmp_[p].data(), n, b_[p].data(), n, c_[p].data(), n);
          break;
        case 3: {
          gemm(n, n, h, a_[p].data(), h, b_[p].data(), n, tmp_[p].data(), n);
          sync.arrive_and_wait();  // every partial product is written
          // psum over x: this device sums rows [x h, x h + h) of its group's partials and
          // writes them into both members' outputs.
          const float* p0 = tmp_[0 * 2 + y].data();
          const float* p1 = tmp_[1 * 2 + y].data();
          float* o0 = c_[0 * 2 + y].data();
          float* o1 = c_[1 * 2 + y].data();
          for (std::size_t k = x * h * n; k < (x + 1) * h * n; ++k) o0[k] = o1[k] = p0[k] + p1[k];
          break;
        }
        default:
          for (std::size_t xs = 0; xs < 2; ++xs)  // all_gather B over x: from (xs, y)
            copy_cols(tmp_[p].data(), n, xs * h, b_[xs * 2 + y].data(), n, h);
          gemm(h, n, n, a_[p].data(), n, tmp_[p].data(), n, c_[p].data(), n);
          break;
      }
    });
  }

  std::string info() override { return openblas_gemm_info(); }
  std::vector<double> check() override {
    const std::size_t n = n_, h = n / 2;
    buf g(n * n);
    switch (which_) {
      case 1:
        for (std::size_t p = 0; p < 4; ++p)
          put_block(g, n, (p / 2) * h, h, (p % 2) * h, h, c_[p].data());
        break;
      case 2:
      case 3:
        g = c_[3];  // replicated: any device's copy
        break;
      default:
        for (std::size_t x = 0; x < 2; ++x) put_block(g, n, x * h, h, 0, n, c_[x * 2 + 1].data());
        break;
    }
    return sample(g.data(), g.size());
  }

 private:
  std::size_t n_;
  int which_;
  std::vector<buf> a_, b_, c_, tmp_;
};

// ---- seed 004: batch over 8 devices -------------------------------------------------------------

class batched final : public instance {
 public:
  explicit batched(const params& p)
      : batch_(p.get("batch")), n_(p.get("n")), x_(batch_), y_(batch_) {
    spmd(batch_, [&](std::size_t d) {  // each device makes its own block
      x_[d].resize(n_ * n_);
      fill(x_[d].data(), n_ * n_, 1, d * n_ * n_);
      y_[d].resize(n_ * n_);
    });
  }
  void run() override {
    spmd(batch_, [&](std::size_t d) {
      gemm(n_, n_, n_, x_[d].data(), n_, x_[d].data(), n_, y_[d].data(), n_);
    });
  }
  std::string info() override { return openblas_gemm_info(); }
  std::vector<double> check() override {
    std::vector<double> out;
    const std::size_t per = n_ * n_;
    for (std::size_t pos : sample_positions(batch_ * per)) out.push_back(y_[pos / per][pos % per]);
    return out;
  }

 private:
  std::size_t batch_, n_;
  std::vector<buf> x_, y_;
};

// ---- seed 000: Megatron MLP on the 2 x 2 mesh ("data", "model") -------------------------------

class megatron final : public instance {
 public:
  explicit megatron(const params& p) : b_(p.get("batch")), d_(p.get("d")), f_(p.get("f")) {
    const buf x = make(b_ * d_, 1), w1 = make(d_ * f_, 2, 1.0f / std::sqrt(float(d_))),
              w2 = make(f_ * d_, 3, 1.0f / std::sqrt(float(f_)));
    const std::size_t dh = d_ / 2, fh = f_ / 2;
    for (std::size_t p = 0; p < 4; ++p) {
      const std::size_t m = p % 2;  // the "model" coordinate; "data" is not used by the specs
      x_.push_back(block_of(x, d_, 0, b_, m * dh, dh));
      w1_.push_back(block_of(w1, f_, 0, d_, m * fh, fh));
      w2_.push_back(block_of(w2, d_, m * fh, fh, 0, d_));
      xfull_.emplace_back(b_ * d_);
      temp_.emplace_back(b_ * fh);
      partial_.emplace_back(b_ * d_);
      out_.emplace_back(b_ * dh);
    }
  }
  void run() override {
    const std::size_t dh = d_ / 2, fh = f_ / 2;
    std::barrier sync(4);
    spmd(4, [&](std::size_t p) {
      const std::size_t data = p / 2, m = p % 2;
      for (std::size_t ms = 0; ms < 2; ++ms)  // all_gather x over model
        copy_cols(xfull_[p].data(), d_, ms * dh, x_[data * 2 + ms].data(), b_, dh);
      gemm(b_, fh, d_, xfull_[p].data(), d_, w1_[p].data(), fh, temp_[p].data(), fh);
      gemm(b_, d_, fh, temp_[p].data(), fh, w2_[p].data(), d_, partial_[p].data(), d_);
      sync.arrive_and_wait();
      // psum_scatter over model along columns: this device keeps columns [m dh, m dh + dh).
      const float* p0 = partial_[data * 2 + 0].data();
      const float* p1 = partial_[data * 2 + 1].data();
      float* o = out_[p].data();
      for (std::size_t i = 0; i < b_; ++i)
        for (std::size_t j = 0; j < dh; ++j)
          o[i * dh + j] = p0[i * d_ + m * dh + j] + p1[i * d_ + m * dh + j];
    });
  }
  std::string info() override { return openblas_gemm_info(); }
  std::vector<double> check() override {
    buf g(b_ * d_);
    for (std::size_t m = 0; m < 2; ++m)
      put_block(g, d_, 0, b_, m * (d_ / 2), d_ / 2, out_[m].data());
    return sample(g.data(), g.size());
  }

 private:
  std::size_t b_, d_, f_;
  std::vector<buf> x_, w1_, w2_, xfull_, temp_, partial_, out_;
};

// ---- seed 002: one training step, batch over 8 devices ------------------------------------------

// The parameters live once, shared read-only by the devices; each device computes the
// gradients of its batch rows; after a barrier device r sums slice r of every gradient over
// the devices and applies the SGD update to that slice (a reduce-scatter fused with the
// update: no replicated copies to keep in step).
class training final : public instance {
 public:
  static constexpr std::size_t devices = 8;
  explicit training(const params& p) : s_(p), rows_(s_.batch / devices) {
    const std::size_t L = s_.layers();
    for (std::size_t l = 0; l < L; ++l) {
      w_.push_back(make(s_.sizes[l] * s_.sizes[l + 1], 10 + l, s_.w_scale(l)));
      b_.push_back(make(s_.sizes[l + 1], 20 + l));
    }
    inputs_ = make(s_.batch * s_.sizes.front(), 1);
    targets_ = make(s_.batch * s_.sizes.back(), 2);
    dev_.resize(devices);
    for (auto& d : dev_) {
      for (std::size_t l = 0; l < L; ++l) {
        d.z.emplace_back(rows_ * s_.sizes[l + 1]);
        d.a.emplace_back(rows_ * s_.sizes[l + 1]);
        d.dw.emplace_back(s_.sizes[l] * s_.sizes[l + 1]);
        d.db.emplace_back(s_.sizes[l + 1]);
      }
      d.dz = buf(rows_ * *std::max_element(s_.sizes.begin(), s_.sizes.end()));
      d.da = d.dz;
    }
  }

  void run() override {
    const std::size_t L = s_.layers();
    std::barrier sync(devices);
    spmd(devices, [&](std::size_t r) {
      device& d = dev_[r];
      // forward
      const float* in = inputs_.data() + r * rows_ * s_.sizes[0];
      for (std::size_t l = 0; l < L; ++l) {
        const std::size_t ni = s_.sizes[l], no = s_.sizes[l + 1];
        float* z = d.z[l].data();
        for (std::size_t i = 0; i < rows_; ++i)
          std::memcpy(z + i * no, b_[l].data(), no * sizeof(float));
        gemm(rows_, no, ni, in, ni, w_[l].data(), no, z, no, false, false, 1.0f, 1.0f);
        if (l + 1 < L) {
          float* a = d.a[l].data();
          for (std::size_t k = 0; k < rows_ * no; ++k) a[k] = z[k] > 0.0f ? z[k] : 0.0f;
          in = a;
        }
      }
      // backward
      const std::size_t out = s_.sizes[L];
      const float* t = targets_.data() + r * rows_ * out;
      const float scale = 2.0f / static_cast<float>(s_.batch);
      for (std::size_t k = 0; k < rows_ * out; ++k) d.dz[k] = (d.z[L - 1][k] - t[k]) * scale;
      for (std::size_t l = L; l-- > 0;) {
        const std::size_t ni = s_.sizes[l], no = s_.sizes[l + 1];
        const float* a_in = l == 0 ? inputs_.data() + r * rows_ * ni : d.a[l - 1].data();
        gemm(ni, no, rows_, a_in, ni, d.dz.data(), no, d.dw[l].data(), no, true);  // a.T dz
        float* db = d.db[l].data();
        std::fill_n(db, no, 0.0f);
        for (std::size_t i = 0; i < rows_; ++i)
          for (std::size_t j = 0; j < no; ++j) db[j] += d.dz[i * no + j];
        if (l > 0) {
          gemm(rows_, ni, no, d.dz.data(), no, w_[l].data(), no, d.da.data(), ni, false, true);
          const float* z = d.z[l - 1].data();
          for (std::size_t k = 0; k < rows_ * ni; ++k) d.dz[k] = z[k] > 0.0f ? d.da[k] : 0.0f;
        }
      }
      sync.arrive_and_wait();  // every device's gradients are written; W is read no more
      for (std::size_t l = 0; l < L; ++l) {
        update_slice(
            w_[l], [&](std::size_t j) { return dev_[j].dw[l].data(); }, r);
        update_slice(
            b_[l], [&](std::size_t j) { return dev_[j].db[l].data(); }, r);
      }
    });
  }

  std::string info() override { return openblas_gemm_info(); }
  std::vector<double> check() override {  // called after the warm-up: the first step's dW
    std::vector<double> out;
    for (std::size_t l : checked_layers)
      for (std::size_t pos : sample_positions(w_[l].size())) {
        float g = 0;  // summed in device order, as the update does
        for (std::size_t j = 0; j < devices; ++j) g += dev_[j].dw[l][pos];
        out.push_back(g);
      }
    return out;
  }

 private:
  struct device {
    std::vector<buf> z, a, dw, db;
    buf dz, da;
  };

  // Slice r of `param` -= step * (sum over devices of the gradient's slice r).
  template <class Grad>
  void update_slice(buf& param, Grad grad, std::size_t r) {
    const std::size_t n = param.size(), per = (n + devices - 1) / devices;
    const std::size_t lo = std::min(n, r * per), hi = std::min(n, lo + per);
    for (std::size_t k = lo; k < hi; ++k) {
      float g = 0;
      for (std::size_t j = 0; j < devices; ++j) g += grad(j)[k];
      param[k] -= s_.step * g;
    }
  }

  mlp_shape s_;
  std::size_t rows_;
  std::vector<buf> w_, b_;
  buf inputs_, targets_;
  std::vector<device> dev_;
};

// ---- memcpy: the collectives' floor
// ----------------------------------------------------------------

class copy_floor final : public instance {
 public:
  explicit copy_floor(const params& p)
      : threads_(std::max(1u, std::thread::hardware_concurrency())),
        per_thread_(p.get("devices") * p.get("mib") * (std::size_t{1} << 20) / threads_),
        src_(threads_),
        dst_(threads_) {
    spmd(threads_, [&](std::size_t t) {  // allocated and first touched by the copying thread
      src_[t].reset(new char[per_thread_]);
      dst_[t].reset(new char[per_thread_]);
      std::memset(src_[t].get(), 1, per_thread_);
      std::memset(dst_[t].get(), 0, per_thread_);
    });
  }
  void run() override {
    spmd(threads_, [&](std::size_t t) { std::memcpy(dst_[t].get(), src_[t].get(), per_thread_); });
  }
  std::vector<double> check() override { return {}; }
  std::string info() override { return std::to_string(threads_) + " threads"; }

 private:
  std::size_t threads_, per_thread_;
  std::vector<std::unique_ptr<char[]>> src_, dst_;
};

template <class T, class... Extra>
factory make(Extra... extra) {
  return [=](const params& p) -> std::unique_ptr<instance> {
    return std::make_unique<T>(p, extra...);
  };
}

}  // namespace
}  // namespace compare

int main(int argc, char** argv) {
  using namespace compare;
#if defined(TYPESHARD_HAVE_OPENBLAS)
  openblas_set_num_threads(1);  // as typeshard does: the devices are the parallelism
#endif
  const std::string which = argc > 1 ? argv[1] : "threads";
  std::map<std::string, factory> r;
  if (which == "memcpy") {
    r["all_gather"] = r["psum"] = r["psum_scatter"] = make<copy_floor>();
  } else {
    for (int c = 1; c <= 4; ++c) r["case" + std::to_string(c)] = make<matmul_case>(c);
    r["batched"] = make<batched>();
    r["megatron"] = make<megatron>();
    r["training"] = make<training>();
  }
  return serve(r);
}
