// Reliability, hangs and crashes an adversarial user can provoke on the thread pool: each
// case ends in a correct result or a typeshard error within a bound far below CI's (a
// watchdog turns a hang into a failure after 20 s; the bounds checked here are 2 s).
// - softmax and log_softmax of empty arrays whatever their other extents (2^62 included):
//   at once, without allocating per-row statistics; uneven shards with empty blocks give the
//   serial result (the devices with an empty block still take part in the collectives). The
//   other per-device kernels (reductions, elementwise, transpose, reshard, matmul,
//   collectives) on the same arrays: at once, a result or a typeshard::error.
// - max and min over an empty dimension give the reduction's identity (-inf / +inf, as
//   jnp.max(x, initial=-inf)): the documented choice, not NumPy's ValueError.
// - a pool whose threads cannot all be started (detail::thread_start_hook, and a child
//   process under RLIMIT_AS): a typeshard::error, no thread left behind, the process alive.
// - a device mesh or array used after its cpu_devices is destroyed: a usage_error naming the
//   mesh, not a use after free; the array can still be destroyed.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include <typeshard/typeshard.hpp>

#include "reliability_support.hpp"

namespace ts = typeshard;
using namespace reliability;

namespace {

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_4 = ts::mesh<ts::axis("x", 4)>;
constexpr auto none = ts::none;
constexpr std::size_t huge = std::size_t{1} << 62;

// Seconds since `start`.
double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <class A>
void expect_empty_like(const A& result, const ts::shape<2>& extents) {
  CHECK(result.extents() == extents);
  CHECK(result.size() == 0);
  CHECK(ts::to_host(result).size() == 0);
}

}  // namespace

TEST_CASE("softmax of an empty array returns at once, whatever its other extents",
          "[reliability][fault]") {
  watchdog dog("softmax of empty arrays", std::chrono::seconds(20));
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const long peak_before = proc_status("VmHWM");
  for (const ts::shape<2> s : {ts::shape<2>{huge, 0}, ts::shape<2>{0, huge},
                               ts::shape<2>{std::size_t{1} << 28, 0}, ts::shape<2>{0, 0}}) {
    CAPTURE(s[0], s[1]);
    const auto start = std::chrono::steady_clock::now();
    const auto a = ts::device_put<ts::spec<"x", "y">>(m, ts::host_tensor<double, 2>(s));
    const auto b = ts::device_put<ts::spec<none, none>>(m, ts::host_tensor<float, 2>(s));
    expect_empty_like(ts::softmax<0>(a), s);
    expect_empty_like(ts::softmax<-1>(a), s);
    expect_empty_like(ts::log_softmax<0>(a), s);
    expect_empty_like(ts::log_softmax<1>(a), s);
    expect_empty_like(ts::softmax<-1>(b), s);
    expect_empty_like(ts::log_softmax<0>(b), s);
    CHECK(since(start) < 2.0);
  }
  // No per-row statistics for an empty result: [2^28, 0] once needed 4 GB.
  CHECK(proc_status("VmHWM") - peak_before < 64 * 1024);
}

TEST_CASE("every other op on an empty array with a huge extent returns at once",
          "[reliability][fault]") {
  // Results that stay empty (reducing or contracting the huge extent, elementwise, moves,
  // collectives): each within 2 s, never a loop over the huge extent. (Results that are not
  // empty, such as sum<1> of [2^62, 0], are allocations too large to make: not tried here.)
  watchdog dog("ops on empty arrays", std::chrono::seconds(20));
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto bounded = [&](const char* what, auto op) {
    CAPTURE(what);
    const auto start = std::chrono::steady_clock::now();
    CHECK(ts::to_host(op()).size() == 0);
    CHECK(since(start) < 2.0);
  };
  const auto both = [&](const auto& a) {
    bounded("exp(a + a)", [&] { return ts::exp(a + a); });
    bounded("transpose", [&] { return ts::transpose(a); });
    bounded("reshard", [&] { return ts::reshard<ts::spec<"y", "x">>(a); });
    bounded("all_gather", [&] {
      return ts::shard_map<mesh_2x2, ts::spec<"x", "y">, ts::spec<"x", none>>(
          [](const auto& b) { return ts::all_gather<"y">(b, 1); })(a);
    });
    bounded("psum", [&] {
      return ts::shard_map<mesh_2x2, ts::spec<"x", "y">, ts::spec<"x", "y">>(
          [](const auto& b) { return ts::psum<"x">(b); })(a);
    });
  };
  {  // [2^62, 0]: reduce and contract dimension 0
    const auto a = ts::device_put<ts::spec<"x", "y">>(m, ts::host_tensor<float, 2>({huge, 0}));
    both(a);
    bounded("sum<0>", [&] { return ts::reshard<ts::spec<"y">>(ts::sum<0>(a)); });
    bounded("max<0>", [&] { return ts::max<0>(a); });
    bounded("matmul over 2^62", [&] {
      return ts::reshard<ts::spec<none, "y">>(ts::matmul<ts::spec<none, "y">>(ts::transpose(a), a));
    });
  }
  {  // [0, 2^62]: reduce and contract dimension 1
    const auto a = ts::device_put<ts::spec<"x", "y">>(m, ts::host_tensor<float, 2>({0, huge}));
    both(a);
    bounded("sum<1>", [&] { return ts::reshard<ts::spec<"x">>(ts::sum<1>(a)); });
    bounded("min<1>", [&] { return ts::min<1>(a); });
    bounded("matmul over 2^62",
            [&] { return ts::matmul<ts::spec<"x", none>>(a, ts::transpose(a)); });
  }
}

TEST_CASE("softmax with empty blocks beside full ones matches the serial loop",
          "[reliability][fault]") {
  watchdog dog("softmax with empty blocks", std::chrono::seconds(20));
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_4> m{devices};
  // The dimension has fewer elements than shards: devices 2 and 3 hold no element of it,
  // yet a peer's rows need their (identity) statistics.
  for (const ts::shape<2> s : {ts::shape<2>{3, 2}, ts::shape<2>{1, 1}, ts::shape<2>{5, 3}}) {
    CAPTURE(s[0], s[1]);
    ts::host_tensor<double, 2> h(s);
    for (std::size_t i = 0; i < h.size(); ++i) h.data()[i] = static_cast<double>(i % 7) - 3.0;
    const auto a = ts::device_put<ts::spec<none, "x">>(m, h);
    const auto p = ts::to_host(ts::softmax<-1>(a));
    const auto l = ts::to_host(ts::log_softmax<-1>(a));
    for (std::size_t r = 0; r < s[0]; ++r) {
      double mx = -std::numeric_limits<double>::infinity(), z = 0;
      for (std::size_t c = 0; c < s[1]; ++c) mx = std::max(mx, h(r, c));
      for (std::size_t c = 0; c < s[1]; ++c) z += std::exp(h(r, c) - mx);
      for (std::size_t c = 0; c < s[1]; ++c) {
        CHECK(p(r, c) == Approx(std::exp(h(r, c) - mx) / z).epsilon(1e-12));
        CHECK(l(r, c) == Approx((h(r, c) - mx) - std::log(z)).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("max and min over an empty dimension give the identities -inf and +inf",
          "[reliability][fault]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto a = ts::device_put<ts::spec<"x", "y">>(m, ts::host_tensor<double, 2>({3, 0}));
  const auto mx = ts::to_host(ts::max<1>(a));
  const auto mn = ts::to_host(ts::min<1>(a));
  REQUIRE(mx.size() == 3);
  REQUIRE(mn.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(mx.data()[i] == -std::numeric_limits<double>::infinity());
    CHECK(mn.data()[i] == std::numeric_limits<double>::infinity());
  }
}

namespace {
std::size_t fail_at = 0;
void fail_thread_start(std::size_t device) {
  if (device == fail_at)
    throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                            "injected");
}
}  // namespace

TEST_CASE("a pool whose threads cannot all start throws and leaves no thread behind",
          "[reliability][fault]") {
  watchdog dog("a pool that cannot start", std::chrono::seconds(20));
  const long before = settled_thread_count();
  for (std::size_t k : {std::size_t{0}, std::size_t{1}, std::size_t{7}}) {
    CAPTURE(k);
    fail_at = k;
    ts::detail::thread_start_hook = &fail_thread_start;
    try {
      ts::cpu_devices devices{8};
      ts::detail::thread_start_hook = nullptr;
      FAIL("cpu_devices started although a thread could not");
    } catch (const ts::error& e) {
      ts::detail::thread_start_hook = nullptr;
      CHECK(starts_with_typeshard(e.what()));
      CHECK(contains(e.what(), "could not start the thread of device " + std::to_string(k)));
    }
    CHECK(threads_return_to(before));
  }
  // The pool works afterwards.
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_2x2> m{devices};
  const ts::host_tensor<double, 2> h({2, 2}, 1.0);
  CHECK(ts::to_host(ts::device_put<ts::spec<"x", "y">>(m, h)) == h);
}

#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RELIABILITY_NO_RLIMIT_AS
#endif
#endif
#else
#define RELIABILITY_NO_RLIMIT_AS
#endif

TEST_CASE("cpu_devices{1000} under an address-space limit throws, not std::terminate",
          "[reliability][fault]") {
#if defined(RELIABILITY_NO_RLIMIT_AS)
  SUCCEED("RLIMIT_AS is not usable here (a sanitizer reserves the address space)");
#else
  watchdog dog("cpu_devices under RLIMIT_AS", std::chrono::seconds(20));
  // A child process (the limit is per process): room for ~64 MB more, while 1000 threads
  // need 1000 stacks of 8 MB. Exit status 0: a typeshard::error; 2: it started; 3: another
  // exception; a signal (134: std::terminate's abort): the defect.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const long size_kib = proc_status("VmSize");
    const rlim_t limit = static_cast<rlim_t>(size_kib + 64 * 1024) * 1024;
    const rlimit lim{limit, limit};
    if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(4);
    try {
      ts::cpu_devices devices{1000};
      _exit(2);
    } catch (const ts::error&) {
      _exit(0);
    } catch (...) {
      _exit(3);
    }
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CAPTURE(status);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
#endif
}

TEST_CASE("a device mesh or array used after its backend is destroyed is a usage_error",
          "[reliability][fault]") {
  watchdog dog("use after the backend", std::chrono::seconds(20));
  std::optional<ts::cpu_devices> devices;
  devices.emplace(4);
  std::optional<ts::device_mesh<mesh_2x2>> m;
  m.emplace(*devices);
  const ts::host_tensor<double, 2> h({4, 4}, 2.0);
  auto a = ts::device_put<ts::spec<"x", "y">>(*m, h);
  CHECK(ts::to_host(a + a) == ts::host_tensor<double, 2>({4, 4}, 4.0));
  const auto copy = *m;
  devices.reset();
  const auto is_lifetime_error = [](const ts::usage_error& e) {
    return starts_with_typeshard(e.what()) && contains(e.what(), "after its backend") &&
           contains(e.what(), "Mesh(");
  };
  using Catch::Matchers::Predicate;
  CHECK_THROWS_MATCHES(m->get_backend(), ts::usage_error,
                       Predicate<ts::usage_error>(is_lifetime_error));
  CHECK_THROWS_MATCHES(copy.get_backend(), ts::usage_error,
                       Predicate<ts::usage_error>(is_lifetime_error));
  CHECK_THROWS_AS(ts::to_host(a), ts::usage_error);
  CHECK_THROWS_AS(a + a, ts::usage_error);
  CHECK_THROWS_AS(ts::softmax<-1>(a), ts::usage_error);
  CHECK_THROWS_AS((ts::reshard<ts::spec<none, none>>(a)), ts::usage_error);
  CHECK_THROWS_AS((ts::device_put<ts::spec<"x", "y">>(*m, h)), ts::usage_error);
  // Destroying the array and the mesh needs no backend.
  { const auto gone = std::move(a); }
  m.reset();
  // A new backend (maybe at the same address) is not reachable through the old mesh.
  devices.emplace(4);
  CHECK_THROWS_AS(copy.get_backend(), ts::usage_error);
}
