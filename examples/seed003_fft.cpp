// examples/seed003_fft.cpp: seed 003 (Cophy2024) bonus exercise 4, a distributed 3-D FFT of a
// 16 x 16 x 16 volume, built on all_to_all.
//
// The notebook shows that jnp.fft.fftn on a sharded array all-gathers the volume and computes
// the whole FFT on every device (a replicated output), and that jaxdecomp's pfft3d does it
// without an all-gather. This program writes the distributed FFT with ts::shard_map: every
// device transforms the dimension it holds whole, then an all_to_all makes the next dimension
// whole, and so on:
//   - pencils on the 4 x 2 mesh ('x', 'y'), input P('x', 'y'): FFT along z; all_to_all over
//     y (z is split, y joined): P('x', None, 'y'), FFT along y; all_to_all over x (y split, x
//     joined): P(None, 'x', 'y'), FFT along x. Two all_to_alls, no all_gather;
//   - slabs on the 1 x 8 mesh, input P(None, 'y'): FFT along x and z; all_to_all over y (z
//     split, y joined): P(None, None, 'y'), FFT along y. One all_to_all.
// The output keeps the natural index order (k_x, k_y, k_z) and comes out sharded differently
// from the input (jaxdecomp returns the same values transposed, (1, 2, 0), instead). The
// per-device FFT is a radix-2 Cooley-Tukey written below; the serial reference is the plain
// DFT (a sum of N terms per output, in double) along each dimension in turn, a different
// algorithm, so the check covers the kernel as well as the distribution.
//
// The all-gather route is shown for comparison: its reshard plan, and the bytes each device
// receives in it and in the two all_to_alls (computed from the sizes).
//
// Data: std::normal_distribution<float> over std::mt19937 seeded 0 (the notebook's
// PRNGKey(0)), other values than JAX's. The seed's 16 x 16 x 16 is the default; --large runs
// 64 x 64 x 64.
#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstddef>
#include <iostream>
#include <numbers>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <typeshard/typeshard.hpp>

#include "support/print.hpp"

namespace ts = typeshard;
using examples::section;
using cfloat = std::complex<float>;

namespace {

examples::checker check;

// In-place forward FFT of n points spaced `stride` apart (n a power of two): iterative radix-2
// Cooley-Tukey, bit-reversal permutation first. The twiddles are computed in double, so the
// only float rounding is in the butterflies, as in a library FFT.
void fft1d(cfloat* x, std::size_t n, std::size_t stride) {
  if (n == 0 || (n & (n - 1)) != 0)
    throw std::invalid_argument("fft1d: the length " + std::to_string(n) +
                                " is not a power of two");
  for (std::size_t i = 1, j = 0; i < n; ++i) {
    std::size_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(x[i * stride], x[j * stride]);
  }
  for (std::size_t len = 2; len <= n; len <<= 1) {
    for (std::size_t k = 0; k < len / 2; ++k) {
      const cfloat w(std::polar(1.0, -2.0 * std::numbers::pi * double(k) / double(len)));
      for (std::size_t start = 0; start < n; start += len) {
        cfloat& a = x[(start + k) * stride];
        cfloat& b = x[(start + k + len / 2) * stride];
        const cfloat t = w * b;
        b = a - t;
        a = a + t;
      }
    }
  }
}

// The FFT along dimension `dim` of a row-major 3-D block: one fft1d per line along it.
void fft_along(cfloat* data, const ts::shape<3>& s, std::size_t dim) {
  const std::array<std::size_t, 3> strides{s[1] * s[2], s[2], 1};
  const std::size_t d1 = (dim + 1) % 3, d2 = (dim + 2) % 3;
  for (std::size_t i = 0; i < s[d1]; ++i)
    for (std::size_t j = 0; j < s[d2]; ++j)
      fft1d(data + i * strides[d1] + j * strides[d2], s[dim], strides[dim]);
}

// The serial reference: the 3-D DFT as three passes of the plain 1-D DFT,
// X[k] = sum_n x[n] exp(-2 pi i k n / N), in double.
ts::host_tensor<std::complex<double>, 3> serial_dft3(const ts::host_tensor<float, 3>& in) {
  const ts::shape<3> s = in.extents();
  ts::host_tensor<std::complex<double>, 3> a(s);
  for (std::size_t i = 0; i < in.size(); ++i) a.data()[i] = in.data()[i];
  for (std::size_t dim = 0; dim < 3; ++dim) {
    const std::size_t n = s[dim];
    std::vector<std::complex<double>> line(n), out(n);
    std::array<std::size_t, 3> idx{};
    const std::size_t d1 = (dim + 1) % 3, d2 = (dim + 2) % 3;
    for (idx[d1] = 0; idx[d1] < s[d1]; ++idx[d1])
      for (idx[d2] = 0; idx[d2] < s[d2]; ++idx[d2]) {
        for (idx[dim] = 0; idx[dim] < n; ++idx[dim]) line[idx[dim]] = a(idx[0], idx[1], idx[2]);
        for (std::size_t k = 0; k < n; ++k) {
          std::complex<double> acc = 0;
          for (std::size_t m = 0; m < n; ++m)
            acc += line[m] *
                   std::polar(1.0, -2.0 * std::numbers::pi * double((k * m) % n) / double(n));
          out[k] = acc;
        }
        for (idx[dim] = 0; idx[dim] < n; ++idx[dim]) a(idx[0], idx[1], idx[2]) = out[idx[dim]];
      }
  }
  return a;
}

// max |got - want| / max |want| over the volume.
double scaled_error(const ts::host_tensor<cfloat, 3>& got,
                    const ts::host_tensor<std::complex<double>, 3>& want) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::abs(std::complex<double>(got.data()[i]) - want.data()[i]));
    scale = std::max(scale, std::abs(want.data()[i]));
  }
  return diff / scale;
}

// Every shard's device and index, this process's or not (JAX's
// sharding.devices_indices_map): under MPI, addressable_shards() holds this rank's only.
template <class Array>
void print_shards(const Array& a) {
  const auto& m = a.device_mesh();
  for (std::size_t p = 0; p < Array::mesh_type::size; ++p)
    std::cout << "  " << m.get_backend().describe(m.device_at(p)).to_string() << " "
              << ts::to_string(a.index(p)) << "\n";
}

template <class Array>
void verify(const std::string& what, const Array& result,
            const ts::host_tensor<std::complex<double>, 3>& serial) {
  const double err = scaled_error(ts::to_host(result), serial);
  const bool ok = err <= 1e-5;
  std::cout << what << ": " << (ok ? "allclose" : "DIFFERS FROM")
            << " the serial DFT (max |error| / max |X| = " << err << ")\n";
  check(ok, what);
}

}  // namespace

int main(int argc, char** argv) {
  const examples::options opts = examples::parse_options(
      argc, argv, "a 64 x 64 x 64 volume (default: the seed's 16 x 16 x 16)");
  if (opts.exit >= 0) return opts.exit;
  const std::size_t n = opts.large ? 64 : 16;

  ts::cpu_devices devices{8};
  ts::host_tensor<float, 3> volume({n, n, n});
  {
    std::mt19937 rng(0);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : volume.values()) v = normal(rng);
  }
  ts::host_tensor<cfloat, 3> volume_c(volume.extents());
  std::transform(volume.values().begin(), volume.values().end(), volume_c.data(),
                 [](float v) { return cfloat(v); });
  const auto serial = serial_dft3(volume);

  section("4", "Distributed FFT: pencils on a 4 x 2 mesh, two all_to_alls");
  using mesh_4x2 = ts::mesh<ts::axis("x", 4), ts::axis("y", 2)>;
  const ts::device_mesh<mesh_4x2> mesh{devices};
  using P_in = ts::spec<"x", "y", ts::none>;  // NamedSharding(mesh, P('x', 'y'))
  using P_out = ts::spec<ts::none, "x", "y">;
  const auto A_sharded = ts::device_put<P_in>(mesh, volume_c);
  std::cout << "A_sharded[..., 0]: " << A_sharded.sharding_string() << "\n";
  ts::visualize_sharding<ts::spec<"x", "y">>(std::cout, mesh, ts::shape<2>{n, n});

  // doc-snippet: pfft3d
  const auto pfft3d = ts::shard_map<mesh_4x2, P_in, P_out>([](const auto& a) {
    auto z_whole = a;  // [X/4, Y/2, Z]: z is whole here
    fft_along(z_whole.data(), z_whole.extents(), 2);
    auto y_whole = ts::all_to_all<"y">(z_whole, 2, 1);  // [X/4, Y, Z/2]: P('x', None, 'y')
    fft_along(y_whole.data(), y_whole.extents(), 1);
    auto x_whole = ts::all_to_all<"x">(y_whole, 1, 0);  // [X, Y/4, Z/2]: P(None, 'x', 'y')
    fft_along(x_whole.data(), x_whole.extents(), 0);
    return x_whole;
  });
  const auto global_fft = pfft3d(A_sharded);
  // doc-snippet-end
  static_assert(std::is_same_v<decltype(global_fft)::spec, P_out>);
  std::cout << "pfft3d(A_sharded): " << global_fft.sharding_string() << ", shards:\n";
  print_shards(global_fft);
  verify("pencil FFT", global_fft, serial);

  // What jnp.fft.fftn does with a sharded input: gather the whole volume on every device.
  {
    using gather_plan = ts::reshard_plan_for<decltype(A_sharded), ts::spec<>>;
    static_assert(gather_plan::count<ts::step_kind::all_gather> > 0);
    std::cout << "\nthe all-gather route (jnp.fft.fftn on a sharded array): "
              << gather_plan::describe();
    const double block = double(n * n * n) / 8 * sizeof(cfloat);
    std::cout << "bytes received per device: all-gather " << 7 * block << "; pencils "
              << block * (1.0 / 2 + 3.0 / 4) << " (all_to_all over y: half of the block, over x: "
              << "three quarters); and every device then computes the whole FFT, not an eighth\n";
  }

  section("4", "Distributed FFT: slabs on a 1 x 8 mesh, one all_to_all");
  using mesh_1x8 = ts::mesh<ts::axis("x", 1), ts::axis("y", 8)>;
  const ts::device_mesh<mesh_1x8> mesh_slab{devices};
  using P_slab_in = ts::spec<ts::none, "y", ts::none>;  // NamedSharding(mesh, P(None, 'y'))
  using P_slab_out = ts::spec<ts::none, ts::none, "y">;
  const auto A_slab = ts::device_put<P_slab_in>(mesh_slab, volume_c);
  const auto slab_fft = ts::shard_map<mesh_1x8, P_slab_in, P_slab_out>([](const auto& a) {
    auto xz_whole = a;  // [X, Y/8, Z]
    fft_along(xz_whole.data(), xz_whole.extents(), 0);
    fft_along(xz_whole.data(), xz_whole.extents(), 2);
    auto y_whole = ts::all_to_all<"y">(xz_whole, 2, 1);  // [X, Y, Z/8]: P(None, None, 'y')
    fft_along(y_whole.data(), y_whole.extents(), 1);
    return y_whole;
  });
  const auto slab_result = slab_fft(A_slab);
  std::cout << "slab_fft(A_slab): " << slab_result.sharding_string() << "\n";
  verify("slab FFT", slab_result, serial);

  return check.exit_code("seed003_fft");
}
