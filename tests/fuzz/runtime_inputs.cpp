// tests/fuzz/runtime_inputs.cpp: a libFuzzer target over typeshard's run-time entry points
// that take user data: device counts and device lists, extents (small, uneven, zero, huge,
// overflowing), host buffers of any length, per-device callbacks returning blocks of any
// shape, specs and output specs from a fixed menu, collective arguments (dimensions, ppermute
// pairs, shift offsets) and blocks made with arbitrary extents.
//
// Built and run only by scripts/fuzz (clang++ -fsanitize=fuzzer,address,undefined), never by
// the normal build. An input passes when every call either returns the serial computation's
// result (checked here; a wrong result aborts) or throws a typeshard::error. Anything else
// fails: another exception type, a crash, undefined behaviour, a leak, a hang (-timeout).
//
// Sizes: an input may ask for extents whose element count overflows size_t (typeshard must
// refuse them before allocating), but data the harness itself would have to allocate is kept
// below max_elements, so the fuzzer's memory limit never trips on a legitimate request.
#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

namespace {

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_3 = ts::mesh<ts::axis("i", 3)>;
constexpr auto none = ts::none;

template <class... S>
struct menu {
  static constexpr std::size_t size = sizeof...(S);
};
using specs_2x2 = menu<ts::spec<none, none>, ts::spec<"x", none>, ts::spec<none, "y">, ts::spec<"x", "y">,
                       ts::spec<ts::axes("x", "y"), none>, ts::spec<"y", "x">>;
using specs_3 = menu<ts::spec<none, none>, ts::spec<"i", none>, ts::spec<none, "i">>;

constexpr std::size_t max_elements = 1 << 12;

[[noreturn]] void wrong(const char* what) {
  std::fprintf(stderr, "runtime_inputs: wrong result: %s\n", what);
  std::abort();
}

ts::cpu_devices& pool() {
  static ts::cpu_devices devices{8};
  return devices;
}

template <template <class...> class L, class... X, class F>
void with_index(L<X...>*, std::size_t j, F& f) {
  std::size_t k = 0;
  ((k++ == j ? (f.template operator()<X>(), void()) : void()), ...);
}
template <class List, class F>
void with_index(std::size_t j, F&& f) {
  with_index(static_cast<List*>(nullptr), j % List::size, f);
}

// An extent: usually small, sometimes anything at all.
std::size_t extent(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0: return in.ConsumeIntegral<std::size_t>();
    case 1: return std::size_t{1} << in.ConsumeIntegralInRange<int>(20, 63);
    default: return in.ConsumeIntegralInRange<std::size_t>(0, 9);
  }
}

template <std::size_t R>
ts::shape<R> shape_of(FuzzedDataProvider& in) {
  ts::shape<R> s{};
  for (auto& e : s) e = extent(in);
  return s;
}

// The element count, or 0 with `ok` false when it is too large for the harness to allocate
// (or overflows).
template <std::size_t R>
std::size_t affordable(const ts::shape<R>& s, bool& ok) {
  std::size_t n = 1;
  ok = true;
  for (std::size_t e : s) {
    if (e != 0 && n > max_elements / e) {
      ok = false;
      for (std::size_t z : s) ok = ok || z == 0;  // a zero extent makes it empty after all
      if (!ok) return 0;
    }
    n *= e;
  }
  ok = n <= max_elements;
  return ok ? n : 0;
}

template <std::size_t R>
ts::host_tensor<double, R> data(const ts::shape<R>& s, FuzzedDataProvider& in) {
  ts::host_tensor<double, R> t(s);
  for (double& v : t.values()) v = static_cast<double>(in.ConsumeIntegralInRange<int>(-3, 3));
  return t;
}

ts::host_tensor<double, 2> serial_matmul(const ts::host_tensor<double, 2>& a, const ts::host_tensor<double, 2>& b) {
  ts::host_tensor<double, 2> c({a.extent(0), b.extent(1)});
  for (std::size_t i = 0; i < a.extent(0); ++i)
    for (std::size_t k = 0; k < b.extent(1); ++k)
      for (std::size_t j = 0; j < a.extent(1); ++j) c(i, k) += a(i, j) * b(j, k);
  return c;
}

template <class Mesh>
std::vector<ts::device_id> device_list(FuzzedDataProvider& in) {
  std::vector<ts::device_id> ids;
  const std::size_t n = in.ConsumeBool() ? Mesh::size : in.ConsumeIntegralInRange<std::size_t>(0, 6);
  for (std::size_t i = 0; i < n; ++i)
    ids.push_back(in.ConsumeBool() ? in.ConsumeIntegralInRange<std::size_t>(0, 9) : in.ConsumeIntegral<std::size_t>());
  return ids;
}

template <class Mesh>
ts::device_mesh<Mesh> some_mesh(FuzzedDataProvider& in) {
  if (in.ConsumeBool()) return ts::device_mesh<Mesh>{pool()};
  return ts::device_mesh<Mesh>{pool(), device_list<Mesh>(in)};  // may throw device_mesh_error
}

// ---- the entry points ------------------------------------------------------------------------

void fuzz_pool(FuzzedDataProvider& in) {
  ts::cpu_devices d{in.ConsumeIntegralInRange<std::size_t>(0, 3)};
  ts::device_mesh<ts::mesh<ts::axis("x", 1)>> m{d};
  const auto h = ts::host_tensor<double, 2>({2, 3}, 1.5);
  if (!(ts::to_host(ts::device_put<ts::spec<"x", none>>(m, h)) == h)) wrong("pool round trip");
}

template <class Mesh, class Specs>
void fuzz_put_reshard(FuzzedDataProvider& in) {
  const auto m = some_mesh<Mesh>(in);
  const auto s = shape_of<2>(in);
  bool ok = false;
  affordable(s, ok);
  if (!ok) {
    // host_tensor must refuse (overflow) or the extents are too large to try.
    std::size_t n = 1;
    bool overflow = false;
    for (std::size_t e : s) overflow = overflow || __builtin_mul_overflow(n, e, &n);
    if (overflow) {
      ts::host_tensor<double, 2> refused(s);  // must throw shape_error
      wrong("host_tensor accepted extents whose element count overflows size_t");
    }
    return;
  }
  const auto h = data(s, in);
  with_index<Specs>(in.ConsumeIntegral<std::size_t>(), [&]<class From>() {
    const auto a = in.ConsumeBool() ? ts::device_put<From>(m, h)
                                    : ts::device_put<From>(m, s, [&](const ts::index_slices<2>& ix) {
                                        return ts::host_tensor<double, 2>(
                                            {ix[0].size(), ix[1].size()},
                                            [&] {
                                              std::vector<double> v;
                                              if (ix[1].size() == 0) return v;  // rows may be huge
                                              for (std::size_t i = ix[0].start; i < ix[0].stop; ++i)
                                                for (std::size_t j = ix[1].start; j < ix[1].stop; ++j)
                                                  v.push_back(h(i, j));
                                              return v;
                                            }());
                                      });
    if (!(ts::to_host(a) == h)) wrong("device_put / to_host");
    with_index<Specs>(in.ConsumeIntegral<std::size_t>(), [&]<class To>() {
      if (in.ConsumeBool()) {
        if (!(ts::to_host(ts::reshard<To>(a)) == h)) wrong("reshard");
      } else {
        const auto target = some_mesh<Mesh>(in);  // same devices reordered, or not: may throw
        if (!(ts::to_host(ts::reshard<To>(a, target)) == h)) wrong("reshard onto a device mesh");
      }
    });
  });
}

// device_put with static extents and with blocks of whatever shape the callback returns.
void fuzz_put_shapes(FuzzedDataProvider& in) {
  ts::device_mesh<mesh_2x2> m{pool()};
  const auto s = shape_of<2>(in);
  bool ok = false;
  affordable(s, ok);
  if (in.ConsumeBool()) {
    if (!ok) return;
    const auto h = data(s, in);
    const auto a = ts::device_put<ts::spec<"x", "y">, ts::extents<4, ts::dyn>>(m, h);  // 4 rows or shape_error
    if (!(ts::to_host(a) == h)) wrong("device_put with static extents");
    return;
  }
  // The callback returns a block of a fuzzed shape (right or wrong) for each device.
  std::vector<ts::shape<2>> block_shapes;
  for (int i = 0; i < 4; ++i) block_shapes.push_back({extent(in) % 9, extent(in) % 9});
  const bool honest = in.ConsumeBool();
  const auto a = ts::device_put<ts::spec<ts::axes("x", "y"), none>>(m, s, [&](const ts::index_slices<2>& ix) {
    if (honest) {
      const ts::shape<2> local{ix[0].size(), ix[1].size()};
      bool fits = false;
      affordable(local, fits);
      if (!fits) return ts::host_tensor<double, 2>();  // wrong shape: device_put refuses it
      return ts::host_tensor<double, 2>(local, 1.0);
    }
    return ts::host_tensor<double, 2>(block_shapes[ix[0].start % 4], 1.0);
  });
  // The four blocks (of at most max_elements each) partition the array: an array typeshard
  // accepted cannot be larger.
  if (a.size() > 4 * max_elements) wrong("device_put accepted blocks that cannot hold the array");
  if (!(ts::to_host(a) == ts::host_tensor<double, 2>(s, 1.0))) wrong("device_put(make_block)");
}

template <class Specs>
void fuzz_elementwise_matmul(FuzzedDataProvider& in) {
  const auto m = some_mesh<mesh_2x2>(in);
  const ts::shape<2> sa{extent(in) % 10, extent(in) % 10}, sb{extent(in) % 10, extent(in) % 10};
  const auto ha = data(sa, in), hb = data(sb, in);
  with_index<Specs>(in.ConsumeIntegral<std::size_t>(), [&]<class SA>() {
    with_index<Specs>(in.ConsumeIntegral<std::size_t>(), [&]<class SB>() {
      const auto a = ts::device_put<SA>(m, ha);
      const auto b = ts::device_put<SB>(m, hb);
      switch (in.ConsumeIntegralInRange<int>(0, 2)) {
        case 0: {  // elementwise: needs equal specs (a compile-time rule), so reshard b first
          // NumPy's broadcasting: extents equal or one of them 1 (shape_error otherwise, and
          // also where a dimension to broadcast is sharded).
          const auto sum = a + ts::reshard<SA>(b);
          ts::shape<2> so{};
          for (std::size_t d = 0; d < 2; ++d) {
            if (sa[d] != sb[d] && sa[d] != 1 && sb[d] != 1)
              wrong("a + b of extents that do not broadcast was accepted");
            so[d] = sa[d] == 1 ? sb[d] : sa[d];
          }
          ts::host_tensor<double, 2> want(so);
          for (std::size_t i = 0; i < so[0]; ++i)
            for (std::size_t j = 0; j < so[1]; ++j)
              want(i, j) = ha(sa[0] == 1 ? 0 : i, sa[1] == 1 ? 0 : j) +
                           hb(sb[0] == 1 ? 0 : i, sb[1] == 1 ? 0 : j);
          if (!(ts::to_host(sum) == want)) wrong("a + b (broadcast)");
          break;
        }
        case 1: {
          const auto c = ts::matmul<SA>(a, b);  // shape_error unless sa[1] == sb[0]
          if (!(ts::to_host(c) == serial_matmul(ha, hb))) wrong("matmul<lhs spec>");
          break;
        }
        default: {
          const auto c = ts::matmul<ts::spec<none, none>>(a, b);
          if (!(ts::to_host(c) == serial_matmul(ha, hb))) wrong("matmul<replicated>");
        }
      }
    });
  });
}

// shard_map over fuzzed extents (uneven: shape_error), with collectives on fuzzed arguments.
void fuzz_shard_map(FuzzedDataProvider& in) {
  ts::device_mesh<mesh_2x2> m{pool()};
  const ts::shape<2> s{extent(in) % 10, extent(in) % 10};
  const auto h = data(s, in);
  const auto a = ts::device_put<ts::spec<"x", "y">>(m, h);
  const std::size_t dim = in.ConsumeIntegralInRange<std::size_t>(0, 2);  // 2: out of range
  const std::size_t dim2 = in.ConsumeIntegralInRange<std::size_t>(0, 2);
  const std::ptrdiff_t offset = in.ConsumeIntegralInRange<std::ptrdiff_t>(-5, 5);
  std::vector<std::pair<std::size_t, std::size_t>> pairs;
  const std::size_t npairs = in.ConsumeIntegralInRange<std::size_t>(0, 3);
  for (std::size_t i = 0; i < npairs; ++i)
    pairs.emplace_back(in.ConsumeIntegralInRange<std::size_t>(0, 2), in.ConsumeIntegralInRange<std::size_t>(0, 2));
  const ts::shape<2> made{extent(in), extent(in)};
  const int which = in.ConsumeIntegralInRange<int>(0, 6);
  using out = ts::spec<"x", "y">;
  auto run = [&](auto f) { return ts::shard_map<mesh_2x2, ts::spec<"x", "y">, out>(f)(a); };
  switch (which) {
    case 0: {
      const auto r = run([](const auto& b) { return ts::psum<"x", "y">(b); });
      (void)r;
      break;
    }
    case 1: (void)run([&](const auto& b) { return ts::all_gather<"y">(b, dim); }); break;
    case 2: (void)run([&](const auto& b) { return ts::psum_scatter<"x">(b, dim); }); break;
    case 3: (void)run([&](const auto& b) { return ts::all_to_all<"x", "y">(b, dim, dim2); }); break;
    case 4: {
      const auto r = run([&](const auto& b) { return ts::shift<"y">(ts::shift<"y">(b, offset), -offset); });
      if (!(ts::to_host(r) == h)) wrong("shift there and back");
      break;
    }
    case 5: (void)run([&](const auto& b) { return ts::ppermute<"x">(b, pairs); }); break;
    default: {  // a block of arbitrary extents, made on every device
      // Extents whose element count or byte count overflows size_t must be refused; other
      // large ones would be legitimate allocations, which the harness does not attempt.
      std::size_t n = 1;
      bool overflow = false;
      for (std::size_t e : made) overflow = overflow || __builtin_mul_overflow(n, e, &n);
      const bool bytes_overflow = !overflow && n > std::numeric_limits<std::size_t>::max() / sizeof(double);
      bool fits = false;
      affordable(made, fits);
      if (!overflow && !bytes_overflow && !fits) return;
      (void)run([&](const ts::block<double, 2, mesh_2x2, ts::vary<mesh_2x2, "x", "y">>& b) {
        return ts::block<double, 2, mesh_2x2, ts::vary<mesh_2x2, "x", "y">>(b.context(), made, 2.0);
      });
      if (overflow || bytes_overflow) wrong("a block of extents that overflow size_t was made");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  FuzzedDataProvider in(bytes, size);
  try {
    switch (in.ConsumeIntegralInRange<int>(0, 6)) {
      case 0: fuzz_pool(in); break;
      case 1: fuzz_put_reshard<mesh_2x2, specs_2x2>(in); break;
      case 2: fuzz_put_reshard<mesh_3, specs_3>(in); break;
      case 3: fuzz_put_shapes(in); break;
      case 4: fuzz_elementwise_matmul<specs_2x2>(in); break;
      case 5: fuzz_shard_map(in); break;
      default: {  // host data of any length for given extents
        const auto s = shape_of<2>(in);
        const std::size_t n = in.ConsumeIntegralInRange<std::size_t>(0, max_elements);
        ts::host_tensor<double, 2> t(s, std::vector<double>(n, 1.0));  // shape_error unless n fits s
        if (t.size() != n) wrong("host_tensor size");
      }
    }
  } catch (const ts::error&) {
    // An expected outcome: typeshard refused the input.
  }
  // Any other exception escapes: libFuzzer reports it as a crash (an uncaught exception).
  return 0;
}
