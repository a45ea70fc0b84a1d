// The CUDA backend's per-shard GEMM (cuBLAS) against a serial reference: random shapes,
// single and batched, accumulating or not; full FP32 by default (error within float
// rounding of a k-term sum), TF32 when allowed (within TF32's rounding); and each of 8
// simulated devices multiplying its own shard at once inside a run.
#include <cmath>
#include <random>
#include <vector>

#include "check.hpp"

namespace ts = typeshard;

namespace {

// c (+)= a b, batch of row-major [m][k] x [k][n], accumulated in double.
std::vector<double> reference(const std::vector<float>& a, const std::vector<float>& b,
                              const std::vector<float>& c0, std::size_t m, std::size_t n,
                              std::size_t k, std::size_t batch, bool accumulate) {
  std::vector<double> c(batch * m * n);
  for (std::size_t q = 0; q < batch; ++q)
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        double s = accumulate ? c0[q * m * n + i * n + j] : 0.0;
        for (std::size_t p = 0; p < k; ++p)
          s += double(a[q * m * k + i * k + p]) * double(b[q * k * n + p * n + j]);
        c[q * m * n + i * n + j] = s;
      }
  return c;
}

std::vector<float> random_floats(std::mt19937& rng, std::size_t n) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// One product on device d of `gpu`; returns the largest error relative to sqrt(k) (the
// size of a sum of k products of values in [-1, 1]).
double product_error(ts::cuda_devices& gpu, ts::device_id d, std::mt19937& rng, std::size_t m,
                     std::size_t n, std::size_t k, std::size_t batch, bool accumulate) {
  const auto a = random_floats(rng, batch * m * k), b = random_floats(rng, batch * k * n);
  auto c = random_floats(rng, batch * m * n);
  const auto want = reference(a, b, c, m, n, k, batch, accumulate);
  auto put = [&](const std::vector<float>& h) {
    auto* p = static_cast<float*>(gpu.allocate(d, h.size() * sizeof(float)));
    gpu.to_device(d, p, h.data(), h.size() * sizeof(float));
    return p;
  };
  float *da = put(a), *db = put(b), *dc = put(c);
  gpu.gemm(d, da, db, dc, m, n, k, accumulate, batch);
  gpu.to_host(d, c.data(), dc, c.size() * sizeof(float));
  for (float* p : {da, db, dc}) gpu.deallocate(d, p);
  double worst = 0;
  for (std::size_t i = 0; i < c.size(); ++i)
    worst = std::max(worst, std::abs(double(c[i]) - want[i]) / std::sqrt(double(k) + 1));
  return worst;
}

}  // namespace

int main() {
  if (cuda_test::visible_gpus_or_report("cuda.gemm") == 0)
    return cuda_test::failures == 0 ? cuda_test::skip_code : 1;
  try {
    std::mt19937 rng{37};
    auto dim = [&](std::size_t hi) { return std::uniform_int_distribution<std::size_t>(1, hi)(rng); };
    ts::cuda_devices fp32{1};
    ts::cuda_devices tf32{1, {.nccl = true, .allow_tf32 = true, .max_gpus = 0}};
    for (int round = 0; round < 40; ++round) {
      const std::size_t m = dim(300), n = dim(300), k = dim(700), batch = round % 4 == 0 ? dim(5) : 1;
      const bool acc = round % 3 == 0;
      const double e = product_error(fp32, 0, rng, m, n, k, batch, acc);
      CHECK(e < 1e-5, "FP32 error " + std::to_string(e) + " at " + std::to_string(m) + "x" +
                          std::to_string(n) + "x" + std::to_string(k) + " batch " +
                          std::to_string(batch));
      const double et = product_error(tf32, 0, rng, m, n, k, batch, acc);
      CHECK(et < 1e-2, "TF32 error " + std::to_string(et));
    }
    // A large k, where TF32 shows: FP32 stays within float rounding, TF32 is visibly coarser.
    const double big32 = product_error(fp32, 0, rng, 64, 64, 4096, 1, false);
    const double bigtf = product_error(tf32, 0, rng, 64, 64, 4096, 1, false);
    CHECK(big32 < 1e-5, "FP32 error at k = 4096: " + std::to_string(big32));
    std::printf("k = 4096: FP32 error %.3g, TF32 error %.3g (relative to sqrt(k))\n", big32, bigtf);
    // 8 simulated devices, each its own shard at once.
    ts::cuda_devices eight{8, {.nccl = true, .allow_tf32 = false, .max_gpus = 1}};
    std::vector<double> errors(8);
    const ts::device_id devs[] = {0, 1, 2, 3, 4, 5, 6, 7};
    eight.run(devs, [&](std::size_t i) {
      std::mt19937 local{static_cast<unsigned>(i)};
      errors[i] = product_error(eight, devs[i], local, 128 + i, 96, 256 + 8 * i, 1 + i % 2, i % 2 == 1);
    });
    for (std::size_t i = 0; i < 8; ++i)
      CHECK(errors[i] < 1e-5, "device " + std::to_string(i) + " error " + std::to_string(errors[i]));
  } catch (const std::exception& e) {
    CHECK(false, std::string("threw: ") + e.what());
  }
  return cuda_test::result("cuda.gemm");
}
