// The CUDA backend's collectives against the thread pool's: every collective (all_gather,
// reduce_scatter, all_reduce sum/max/min in and out of place, all_to_all between strided
// layouts, permute with and without sources) over random sizes, groups (blocks and strides
// of the devices) and element types (float, double, int32, int8, uint64, complex<float>,
// bfloat16), on 8 simulated devices of one GPU and on one device per GPU through NCCL (1
// device; 2 where there are 2 GPUs). The same calls run on ts::cpu_devices on host buffers; results must be equal
// bitwise (both sum in group-rank order with the same per-element arithmetic).
#include <algorithm>
#include <complex>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include <typeshard/backend/threads.hpp>

#include "check.hpp"

namespace ts = typeshard;
using bytes = std::vector<unsigned char>;

namespace {

template <class T>
inline constexpr bool is_complex = false;
template <class F>
inline constexpr bool is_complex<std::complex<F>> = true;

// A device's buffers in one collective: host vectors on the thread pool, device copies on
// CUDA (filled from and read back into the same host vectors).
struct io {
  ts::cuda_devices* gpu = nullptr;
  ts::device_id dev = 0;
  std::vector<std::pair<void*, bytes*>> outs;
  std::vector<void*> owned;

  void* put(bytes& h) {
    if (gpu == nullptr) return h.data();
    void* p = gpu->allocate(dev, h.size());
    gpu->to_device(dev, p, h.data(), h.size());
    owned.push_back(p);
    return p;
  }
  const void* in(bytes& h) { return put(h); }
  void* out(bytes& h) {
    void* p = put(h);
    outs.emplace_back(p, &h);
    return p;
  }
  void finish() {
    if (gpu == nullptr) return;
    for (auto& [p, h] : outs) gpu->to_host(dev, h->data(), p, h->size());
    for (void* p : owned) gpu->deallocate(dev, p);
  }
};

using body_fn = std::function<void(ts::backend&, io&, std::size_t device, bytes& in,
                                   bytes& out)>;

// Runs body on every device of `b` with copies of the inputs and outputs; returns the outputs.
std::vector<bytes> run_on(ts::backend& b, ts::cuda_devices* gpu, std::vector<bytes> in,
                          std::vector<bytes> out, const body_fn& body) {
  std::vector<ts::device_id> devs(in.size());
  for (std::size_t i = 0; i < devs.size(); ++i) devs[i] = i;
  b.run(devs, [&](std::size_t i) {
    io x{gpu, devs[i], {}, {}};
    body(b, x, i, in[i], out[i]);
    x.finish();
  });
  return out;
}

struct group_of {
  std::vector<std::vector<std::size_t>> groups;  // members, in rank order
  std::vector<std::size_t> which, rank;          // per device
  ts::collective_group of(std::size_t i) const {
    return {groups[which[i]], rank[i]};
  }
};

// n devices in groups of `size`: consecutive blocks, or strided (i % (n / size)).
group_of make_groups(std::size_t n, std::size_t size, bool strided) {
  group_of g;
  const std::size_t count = n / size;
  g.groups.resize(count);
  g.which.resize(n);
  g.rank.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t k = strided ? i % count : i / size;
    g.which[i] = k;
    g.rank[i] = g.groups[k].size();
    g.groups[k].push_back(i);
  }
  return g;
}

template <class T>
bytes random_bytes(std::mt19937& rng, std::size_t elements) {
  std::vector<T> v(elements);
  std::uniform_int_distribution<int> d(-50, 50);
  for (T& x : v) {
    if constexpr (std::is_same_v<T, ts::bfloat16>) x = T(static_cast<float>(d(rng)) / 8.0f);
    else if constexpr (is_complex<T>)
      x = T(static_cast<float>(d(rng)) / 7.0f, static_cast<float>(d(rng)) / 3.0f);
    else if constexpr (std::is_floating_point_v<T>) x = static_cast<T>(d(rng)) / T(7);
    else x = static_cast<T>(d(rng));
  }
  bytes b(elements * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

struct tester {
  ts::cpu_devices& cpu;
  ts::cuda_devices& gpu;
  std::mt19937 rng{20261128};
  std::size_t cases = 0;

  std::size_t pick(std::size_t lo, std::size_t hi) {
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
  }

  void compare(const char* what, std::vector<bytes> in, std::vector<bytes> out,
               const body_fn& body) {
    const std::vector<bytes> want = run_on(cpu, nullptr, in, out, body);
    const std::vector<bytes> got = run_on(gpu, &gpu, in, out, body);
    for (std::size_t i = 0; i < want.size(); ++i)
      CHECK(want[i] == got[i], std::string(what) + ": device " + std::to_string(i) +
                                   " differs from the thread pool's (case " +
                                   std::to_string(cases) + ")");
    ++cases;
  }

  template <class T>
  void one_case(std::size_t n) {
    const ts::element_type t = ts::element_type_of<T>;
    const std::size_t sz = sizeof(T);
    std::size_t size = 1;
    while (size < n && pick(0, 2) != 0) size *= 2;
    if (n % size != 0) size = 1;
    const group_of groups = make_groups(n, size, pick(0, 1) == 1);
    const std::size_t rows = pick(1, 4);
    std::vector<std::size_t> counts(size);
    for (auto& c : counts) c = pick(0, 37);
    std::size_t total = 0;
    for (std::size_t c : counts) total += c;
    const ts::reduce_op op =
        is_complex<T> ? ts::reduce_op::sum : static_cast<ts::reduce_op>(pick(0, 2));
    auto inputs = [&](std::size_t elements) {
      std::vector<bytes> v(n);
      for (auto& b : v) b = random_bytes<T>(rng, elements);
      return v;
    };
    auto outputs = [&](std::size_t elements) { return std::vector<bytes>(n, bytes(elements * sz, 0xab)); };

    // all_gather: [rows][counts[rank]] -> [rows][total]
    {
      std::vector<bytes> in(n);
      for (std::size_t i = 0; i < n; ++i) in[i] = random_bytes<T>(rng, rows * counts[groups.rank[i]]);
      compare("all_gather", in, outputs(rows * total),
              [&](ts::backend& b, io& x, std::size_t i, bytes& s, bytes& r) {
                b.all_gather(groups.of(i), t, x.in(s), x.out(r), rows, counts);
              });
    }
    // reduce_scatter: [rows][total] -> [rows][counts[rank]]
    {
      std::vector<bytes> out(n);
      for (std::size_t i = 0; i < n; ++i) out[i] = bytes(rows * counts[groups.rank[i]] * sz, 0xab);
      compare("reduce_scatter", inputs(rows * total), out,
              [&](ts::backend& b, io& x, std::size_t i, bytes& s, bytes& r) {
                b.reduce_scatter(groups.of(i), t, op, x.in(s), x.out(r), rows, counts);
              });
    }
    // all_reduce, out of place and in place
    {
      const std::size_t count = pick(0, 300);
      compare("all_reduce", inputs(count), outputs(count),
              [&](ts::backend& b, io& x, std::size_t i, bytes& s, bytes& r) {
                b.all_reduce(groups.of(i), t, op, x.in(s), x.out(r), count);
              });
      std::vector<bytes> both = inputs(count);
      compare("all_reduce in place", both, both,
              [&](ts::backend& b, io& x, std::size_t i, bytes&, bytes& r) {
                void* p = x.out(r);
                b.all_reduce(groups.of(i), t, op, p, p, count);
              });
    }
    // all_to_all: pieces as column blocks [prow][size * prun] or contiguous runs
    {
      const std::size_t prow = pick(1, 3), prun = pick(0, 9), e = prow * prun;
      const ts::strided_pieces columns{prow, prun, size * prun, prun};
      const ts::strided_pieces runs{1, e, e, e};
      const ts::strided_pieces sp = pick(0, 1) ? columns : runs;
      const ts::strided_pieces rp = pick(0, 1) ? columns : runs;
      compare("all_to_all", inputs(size * e), outputs(size * e),
              [&](ts::backend& b, io& x, std::size_t i, bytes& s, bytes& r) {
                b.all_to_all(groups.of(i), t, x.in(s), x.out(r), sp, rp);
              });
    }
    // permute: a random permutation of each group, one edge dropped (sender to nobody,
    // receiver zero-filled) half of the time
    {
      const std::size_t count = pick(0, 50);
      std::vector<std::size_t> to(size);
      for (std::size_t j = 0; j < size; ++j) to[j] = j;
      std::shuffle(to.begin(), to.end(), rng);
      std::vector<std::size_t> from(size);
      for (std::size_t j = 0; j < size; ++j) from[to[j]] = j;
      if (pick(0, 1) == 1) {
        const std::size_t j = pick(0, size - 1);
        from[to[j]] = ts::no_peer;
        to[j] = ts::no_peer;
      }
      compare("permute", inputs(count), outputs(count),
              [&](ts::backend& b, io& x, std::size_t i, bytes& s, bytes& r) {
                const std::size_t k = groups.rank[i];
                b.permute(groups.of(i), t, x.in(s), count, to[k], x.out(r), count, from[k]);
              });
    }
  }

  void cases_on(std::size_t n, std::size_t rounds) {
    for (std::size_t k = 0; k < rounds; ++k) {
      switch (pick(0, 6)) {
        case 0: one_case<float>(n); break;
        case 1: one_case<double>(n); break;
        case 2: one_case<std::int32_t>(n); break;
        case 3: one_case<std::int8_t>(n); break;    // sums wrap
        case 4: one_case<std::uint64_t>(n); break;
        case 5: one_case<std::complex<float>>(n); break;  // sum only
        default: one_case<ts::bfloat16>(n); break;
      }
    }
  }
};

// 64 bytes of a device's memory, given back however the body ends.
struct scratch {
  ts::cuda_devices& gpu;
  ts::device_id d;
  void* p = gpu.allocate(d, 64);
  scratch(ts::cuda_devices& g, ts::device_id dev) : gpu(g), d(dev) {}
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
  ~scratch() { gpu.deallocate(d, p); }
};

// A collective outside a run, and members that call different collectives: the checks
// every backend shares, and this backend's signature comparison.
void misuse(ts::cuda_devices& gpu) {
  const std::size_t members[] = {0, 1};
  bool threw = false;
  try {
    float x = 0;
    gpu.all_reduce({members, 0}, ts::element_type_of<float>, ts::reduce_op::sum, &x, &x, 1);
  } catch (const ts::usage_error&) {
    threw = true;
  }
  CHECK(threw, "a collective outside a run must throw usage_error");
  if (gpu.device_count() < 2) return;
  threw = false;
  const ts::device_id devs[] = {0, 1};
  try {
    gpu.run(devs, [&](std::size_t i) {
      const scratch p{gpu, devs[i]};
      gpu.all_reduce({members, i}, ts::element_type_of<float>, ts::reduce_op::sum, p.p, p.p,
                     i == 0 ? 4 : 8);  // different counts
    });
  } catch (const ts::device_error& e) {
    threw = std::string(e.what()).find("called different collectives") != std::string::npos;
  }
  CHECK(threw, "members calling different collectives must fail with a device_error");
  // Both members send to member 0: not a permutation. Every member sees it (no member is
  // left waiting for a peer, inside NCCL or not), and the run fails with the pool's message.
  threw = false;
  try {
    gpu.run(devs, [&](std::size_t i) {
      const scratch p{gpu, devs[i]};
      gpu.permute({members, i}, ts::element_type_of<float>, p.p, 4, 0, p.p, 4, i == 0 ? 1 : 0);
    });
  } catch (const ts::device_error& e) {
    threw = std::string(e.what()).find("ppermute: member") != std::string::npos;
  }
  CHECK(threw, "a permute that is not a permutation must fail with a device_error");
  // The backend still works after the failures.
  const std::size_t solo[] = {0};
  const ts::device_id one[] = {0};
  float host = 2.5f, back = 0;
  gpu.run(one, [&](std::size_t) {
    void* p = gpu.allocate(0, sizeof(float));
    gpu.to_device(0, p, &host, sizeof(float));
    gpu.all_reduce({solo, 0}, ts::element_type_of<float>, ts::reduce_op::sum, p, p, 1);
    gpu.to_host(0, &back, p, sizeof(float));
    gpu.deallocate(0, p);
  });
  CHECK(back == 2.5f, "a collective after the failures");
}

}  // namespace

int main() {
  const int gpus = cuda_test::visible_gpus_or_report("cuda.collectives");
  if (gpus == 0) return cuda_test::failures == 0 ? cuda_test::skip_code : 1;
  try {
    {  // 8 simulated devices on one GPU: typeshard's own collectives
      ts::cpu_devices cpu{8};
      ts::cuda_devices gpu{8, {.nccl = true, .allow_tf32 = false, .max_gpus = 1}};
      CHECK(!gpu.uses_nccl(), "8 devices on one GPU must not use NCCL");
      tester t{cpu, gpu};
      t.cases_on(8, 60);
      misuse(gpu);
      std::printf("8 simulated devices on %s: %zu cases\n", gpu.gpu_name(0).c_str(), t.cases);
    }
    for (std::size_t n = 1; n <= std::min<std::size_t>(2, static_cast<std::size_t>(gpus)); ++n) {
      ts::cpu_devices cpu{n};
      ts::cuda_devices gpu{n};  // one device per GPU: NCCL
      CHECK(gpu.uses_nccl(), "one device per GPU must use NCCL");
      tester t{cpu, gpu};
      t.cases_on(n, 30);
      misuse(gpu);
      std::printf("%zu device(s) through NCCL: %zu cases\n", n, t.cases);
    }
  } catch (const std::exception& e) {
    CHECK(false, std::string("threw: ") + e.what());
  }
  return cuda_test::result("cuda.collectives");
}
