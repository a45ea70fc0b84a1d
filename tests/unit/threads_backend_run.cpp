// The thread-pool backend (cpu_devices): run() executes each device's body on that device's
// own persistent thread, all of them at once even with more devices than cores; a failure
// in one device reaches the caller as a device_error (the first by position, the original
// nested), releases the devices waiting for it in a collective, and leaves the pool usable;
// misuse (nested runs, devices listed twice or unknown, an empty pool) is a clear error.
//
// Every multi-device call runs under ts_test::within (support/watchdog.hpp), so a deadlock
// fails the test instead of hanging it; the bodies that must run concurrently meet at a
// ts_test::rendezvous, which the bodies could not all reach if they ran one after another.
// Kernel slots (backend::kernel_slot) bound how many heavy kernels run at once, pin only the
// long ones to a core, and a collective between two slots never deadlocks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>
#if defined(__linux__)
#include <sched.h>
#endif

#include <typeshard/typeshard.hpp>

#include "support/watchdog.hpp"

namespace {

namespace ts = typeshard;
using namespace std::chrono_literals;

constexpr auto limit = std::chrono::seconds(120);  // generous: sanitizers, 2 loaded cores

std::vector<ts::device_id> iota_devices(std::size_t n) {
  std::vector<ts::device_id> d(n);
  std::iota(d.begin(), d.end(), ts::device_id{0});
  return d;
}

// What one run() observed, gathered on the devices and checked on the test's thread.
struct observed {
  std::vector<std::thread::id> thread;  // [position]: the thread that ran body(position)
  std::vector<int> calls;               // [position]: how many times body(position) ran
  std::vector<int> met;  // [position]: reached the rendezvous with all others (int, not the
                         // bit-packed vector<bool>: devices write their entries concurrently)
};

// Runs one body per listed device; each records its thread and meets all the others.
observed run_and_meet(ts::cpu_devices& pool, const std::vector<ts::device_id>& devices) {
  observed o;
  o.thread.resize(devices.size());
  o.calls.assign(devices.size(), 0);
  o.met.assign(devices.size(), 0);
  ts_test::rendezvous all(devices.size(), 60s);
  pool.run(devices, [&](std::size_t i) {
    o.thread[i] = std::this_thread::get_id();
    ++o.calls[i];
    o.met[i] = all.arrive_and_wait() ? 1 : 0;
  });
  return o;
}

// The outcome of a run() that is expected to throw a device_error.
struct failure {
  bool threw_device_error = false;
  ts::device_id device = 0;
  std::string what;
  std::string original_what;    // what() of the nested original, if a std::exception
  int original_int = 0;         // the nested original, if an int
  bool original_is_usage_error = false;
  bool original_ptr_matches = false;  // original() rethrows the same as the nested exception
  std::string other;            // anything else thrown
};

template <class F>
failure expect_device_error(F&& f) {
  failure out;
  try {
    f();
  } catch (const ts::device_error& e) {
    out.threw_device_error = true;
    out.device = e.device();
    out.what = e.what();
    std::string via_original, via_nested;
    try {
      std::rethrow_exception(e.original());
    } catch (const std::exception& inner) {
      via_original = inner.what();
    } catch (...) {
      via_original = "(non-std)";
    }
    try {
      std::rethrow_if_nested(e);
      out.other = "device_error carries no nested exception";
    } catch (const ts::usage_error& inner) {
      out.original_is_usage_error = true;
      out.original_what = via_nested = inner.what();
    } catch (const std::exception& inner) {
      out.original_what = via_nested = inner.what();
    } catch (int v) {
      out.original_int = v;
      via_nested = "(non-std)";
    }
    out.original_ptr_matches = via_original == via_nested;
  } catch (const std::exception& e) {
    out.other = std::string("unexpected exception: ") + e.what();
  }
  return out;
}

}  // namespace

TEST_CASE("cpu_devices describes its devices", "[threads]") {
  ts::cpu_devices pool{3};
  REQUIRE(pool.device_count() == 3);
  REQUIRE(pool.platform() == "cpu");
  REQUIRE(pool.is_addressable(0));
  REQUIRE(pool.is_addressable(2));
  REQUIRE_FALSE(pool.is_addressable(3));
  REQUIRE(pool.describe(2).id == 2);
  REQUIRE(pool.describe(2).label() == "CPU 2");
  REQUIRE(pool.describe(2).to_string() == "CpuDevice(id=2)");
}

TEST_CASE("run executes every device's body once, each on its own thread, all concurrently",
          "[threads]") {
  // 16 devices on a machine with fewer cores: each body waits for all the others, so the
  // run completes only if all 16 bodies are in flight at the same time.
  constexpr std::size_t n = 16;
  auto pool = std::make_shared<ts::cpu_devices>(n);
  const auto [first, second, caller] = ts_test::within(limit, "run on 16 devices", [pool] {
    const auto devices = iota_devices(n);
    observed a = run_and_meet(*pool, devices);
    observed b = run_and_meet(*pool, devices);
    return std::tuple{a, b, std::this_thread::get_id()};
  });
  std::set<std::thread::id> threads;
  for (std::size_t i = 0; i < n; ++i) {
    CAPTURE(i);
    REQUIRE(first.calls[i] == 1);
    REQUIRE(first.met[i]);
    REQUIRE(second.met[i]);
    REQUIRE(first.thread[i] != caller);        // on a device thread, not the caller's
    REQUIRE(second.thread[i] == first.thread[i]);  // the same persistent thread every time
    threads.insert(first.thread[i]);
  }
  REQUIRE(threads.size() == n);  // a distinct thread per device
}

TEST_CASE("run on a subset, in any order: body(i) runs on the thread of devices[i]", "[threads]") {
  auto pool = std::make_shared<ts::cpu_devices>(8);
  const auto [all, subset] = ts_test::within(limit, "runs on subsets", [pool] {
    observed everyone = run_and_meet(*pool, iota_devices(8));
    observed some = run_and_meet(*pool, {6, 1, 3});
    return std::pair{everyone, some};
  });
  const std::vector<ts::device_id> order{6, 1, 3};
  for (std::size_t i = 0; i < order.size(); ++i) {
    CAPTURE(i);
    REQUIRE(subset.calls[i] == 1);
    REQUIRE(subset.met[i]);
    REQUIRE(subset.thread[i] == all.thread[order[i]]);
  }
}

TEST_CASE("run with no devices returns without calling the body", "[threads]") {
  ts::cpu_devices pool{2};
  int calls = 0;
  pool.run(std::vector<ts::device_id>{}, [&](std::size_t) { ++calls; });
  REQUIRE(calls == 0);
}

TEST_CASE("an exception in one device reaches the caller as a device_error", "[threads]") {
  auto pool = std::make_shared<ts::cpu_devices>(8);
  const auto [f, after] = ts_test::within(limit, "run with a throwing device", [pool] {
    const std::vector<ts::device_id> devices{3, 0, 5, 7, 1};
    ts_test::rendezvous others(devices.size() - 1, 60s);
    failure fl = expect_device_error([&] {
      pool->run(devices, [&](std::size_t i) {
        if (i == 2) throw std::runtime_error("bad block at row 17");
        others.arrive_and_wait();
      });
    });
    // The pool is usable afterwards: every device runs again, all at once.
    observed o = run_and_meet(*pool, iota_devices(8));
    return std::pair{fl, o};
  });
  INFO(f.other);
  REQUIRE(f.threw_device_error);
  REQUIRE(f.device == 5);  // devices[2]
  REQUIRE_THAT(f.what, Catch::StartsWith("typeshard: "));
  REQUIRE_THAT(f.what, Catch::Contains("device 5"));
  REQUIRE_THAT(f.what, Catch::Contains("bad block at row 17"));
  REQUIRE(f.original_what == "bad block at row 17");
  REQUIRE(f.original_ptr_matches);
  for (std::size_t i = 0; i < 8; ++i) {
    CAPTURE(i);
    REQUIRE(after.calls[i] == 1);
    REQUIRE(after.met[i]);
  }
}

TEST_CASE("failures in several devices: the first by position is reported", "[threads]") {
  auto pool = std::make_shared<ts::cpu_devices>(10);
  const failure f = ts_test::within(limit, "run with two throwing devices", [pool] {
    const std::vector<ts::device_id> devices{5, 2, 9, 0, 7};
    auto later_thrown = std::make_shared<ts_test::signal>();
    return expect_device_error([&] {
      pool->run(devices, [&](std::size_t i) {
        if (i == 3) {
          later_thrown->raise();
          throw std::logic_error("failure at position 3");
        }
        if (i == 1) {
          // Position 1 fails after position 3 has: the report goes by position, not time.
          later_thrown->wait_for(60s);
          throw std::runtime_error("failure at position 1");
        }
      });
    });
  });
  INFO(f.other);
  REQUIRE(f.threw_device_error);
  REQUIRE(f.device == 2);
  REQUIRE_THAT(f.what, Catch::Contains("failure at position 1"));
  REQUIRE(f.original_what == "failure at position 1");
}

TEST_CASE("a device that failed on its own is reported before one released by it", "[threads]") {
  auto pool = std::make_shared<ts::cpu_devices>(4);

  SECTION("a body that throws collective_aborted itself") {
    const failure f = ts_test::within(limit, "run with an aborted device", [pool] {
      return expect_device_error([&] {
        pool->run(iota_devices(4), [&](std::size_t i) {
          if (i == 0) throw ts::collective_aborted();
          if (i == 2) throw std::runtime_error("the real failure");
        });
      });
    });
    INFO(f.other);
    REQUIRE(f.threw_device_error);
    REQUIRE(f.device == 2);
    REQUIRE(f.original_what == "the real failure");
  }

  SECTION("devices blocked in a collective are released when a member throws") {
    struct outcome {
      failure f;
      std::vector<int> aborted;  // [position]: 1 if its all_reduce threw collective_aborted
      float sum_after = 0;       // an all_reduce on the same pool afterwards
    };
    const outcome o = ts_test::within(limit, "all_reduce with a failing member", [pool] {
      outcome out;
      out.aborted.assign(4, 0);
      const std::vector<std::size_t> members{0, 1, 2, 3};
      out.f = expect_device_error([&] {
        pool->run(iota_devices(4), [&](std::size_t i) {
          if (i == 1) throw std::runtime_error("device 1 gave up before the collective");
          float x = 1.0f, y = 0.0f;
          try {
            pool->all_reduce({members, i}, ts::element_type_of<float>, ts::reduce_op::sum, &x, &y, 1);
          } catch (const ts::collective_aborted&) {
            out.aborted[i] = 1;
            throw;
          }
        });
      });
      std::vector<float> sums(4, 0.0f);
      pool->run(iota_devices(4), [&](std::size_t i) {
        float x = static_cast<float>(i + 1);
        pool->all_reduce({members, i}, ts::element_type_of<float>, ts::reduce_op::sum, &x, &sums[i], 1);
      });
      out.sum_after = sums[3];
      return out;
    });
    INFO(o.f.other);
    REQUIRE(o.f.threw_device_error);
    REQUIRE(o.f.device == 1);
    REQUIRE(o.f.original_what == "device 1 gave up before the collective");
    REQUIRE(o.aborted == std::vector<int>{1, 0, 1, 1});
    REQUIRE(o.sum_after == 10.0f);  // the pool's collectives work afterwards
  }
}

TEST_CASE("an exception not derived from std::exception is reported too", "[threads]") {
  auto pool = std::make_shared<ts::cpu_devices>(3);
  const failure f = ts_test::within(limit, "run throwing an int", [pool] {
    return expect_device_error([&] {
      pool->run(iota_devices(3), [](std::size_t i) {
        if (i == 1) throw 42;
      });
    });
  });
  INFO(f.other);
  REQUIRE(f.threw_device_error);
  REQUIRE(f.device == 1);
  REQUIRE_THAT(f.what, Catch::Contains("device 1"));
  REQUIRE_THAT(f.what, Catch::Contains("not derived from std::exception"));
  REQUIRE(f.original_int == 42);
}

TEST_CASE("a multi-device operation started inside a body is a usage_error", "[threads]") {
  auto pool = std::make_shared<ts::cpu_devices>(4);

  SECTION("caught inside the body") {
    const auto seen = ts_test::within(limit, "nested run", [pool] {
      std::vector<std::string> messages(4);
      pool->run(iota_devices(4), [&](std::size_t i) {
        try {
          pool->run(iota_devices(2), [](std::size_t) {});
        } catch (const ts::usage_error& e) {
          messages[i] = e.what();
        }
      });
      return messages;
    });
    for (const std::string& m : seen) {
      REQUIRE_THAT(m, Catch::StartsWith("typeshard: "));
      REQUIRE_THAT(m, Catch::Contains("inside a per-device function"));
    }
  }

  SECTION("escaping the body: a device_error whose original is the usage_error") {
    const failure f = ts_test::within(limit, "nested device_put", [pool] {
      return expect_device_error([&] {
        using mesh = ts::mesh<ts::axis("x", 2)>;
        const ts::device_mesh<mesh> m{*pool};
        const ts::host_tensor<float, 1> host({4}, {1, 2, 3, 4});
        pool->run(iota_devices(2), [&](std::size_t) {
          (void)ts::device_put<ts::spec<"x">>(m, host);  // a multi-device operation
        });
      });
    });
    INFO(f.other);
    REQUIRE(f.threw_device_error);
    REQUIRE(f.device == 0);
    REQUIRE(f.original_is_usage_error);
    REQUIRE_THAT(f.original_what, Catch::Contains("inside a per-device function"));
  }

  // And the pool still works.
  const observed o = ts_test::within(limit, "run after nested misuse", [pool] {
    return run_and_meet(*pool, iota_devices(4));
  });
  for (int met : o.met) REQUIRE(met == 1);
}

TEST_CASE("run rejects devices listed twice or unknown, before running anything", "[threads]") {
  ts::cpu_devices pool{4};
  std::atomic<int> calls{0};
  auto body = [&](std::size_t) { ++calls; };

  SECTION("listed twice") {
    const std::vector<ts::device_id> twice{0, 2, 1, 2};
    REQUIRE_THROWS_AS(pool.run(twice, body), ts::device_mesh_error);
    REQUIRE_THROWS_WITH(pool.run(twice, body),
                        Catch::StartsWith("typeshard: ") && Catch::Contains("device 2") &&
                            Catch::Contains("twice"));
  }
  SECTION("unknown") {
    const std::vector<ts::device_id> unknown{0, 4};
    REQUIRE_THROWS_AS(pool.run(unknown, body), ts::device_mesh_error);
    REQUIRE_THROWS_WITH(pool.run(unknown, body),
                        Catch::StartsWith("typeshard: ") && Catch::Contains("device 4") &&
                            Catch::Contains("has 4 devices"));
  }
  REQUIRE(calls == 0);
  pool.run(iota_devices(4), body);  // still usable
  REQUIRE(calls == 4);
}

TEST_CASE("cpu_devices with no devices is an error", "[threads]") {
  REQUIRE_THROWS_AS(ts::cpu_devices{0}, ts::usage_error);
  REQUIRE_THROWS_WITH(ts::cpu_devices{0},
                      Catch::StartsWith("typeshard: ") && Catch::Contains("at least one device"));
}

TEST_CASE("pools are destroyed cleanly, idle or after work", "[threads]") {
  const int runs = ts_test::within(limit, "create and destroy pools", [] {
    int done = 0;
    for (int k = 0; k < 20; ++k) {
      ts::cpu_devices idle{16};  // never used
    }
    for (int k = 0; k < 20; ++k) {
      ts::cpu_devices used{static_cast<std::size_t>(1 + k % 9)};
      std::atomic<int> calls{0};
      used.run(iota_devices(used.device_count()), [&](std::size_t) { ++calls; });
      done += calls == static_cast<int>(used.device_count()) ? 1 : 0;
    }
    return done;
  });
  REQUIRE(runs == 20);
}

TEST_CASE("runs issued from several threads at once are serialised, none lost", "[threads]") {
  auto pool = std::make_shared<ts::cpu_devices>(6);
  const auto counts = ts_test::within(limit, "concurrent callers", [pool] {
    std::vector<int> per_device(6, 0);  // written only inside bodies: runs never overlap
    std::atomic<int> in_flight{0}, max_in_flight{0};
    auto caller = [&](std::vector<ts::device_id> devices) {
      for (int k = 0; k < 50; ++k)
        pool->run(devices, [&](std::size_t i) {
          const int now = ++in_flight;
          int seen = max_in_flight.load();
          while (now > seen && !max_in_flight.compare_exchange_weak(seen, now)) {
          }
          ++per_device[devices[i]];
          --in_flight;
        });
    };
    std::thread a(caller, std::vector<ts::device_id>{0, 1, 2, 3});
    std::thread b(caller, std::vector<ts::device_id>{2, 3, 4, 5});
    a.join();
    b.join();
    return std::pair{per_device, max_in_flight.load()};
  });
  REQUIRE(counts.first == std::vector<int>{50, 50, 100, 100, 50, 50});
  REQUIRE(counts.second <= 4);  // one operation's devices at a time
}

TEST_CASE("kernel slots: at most concurrent_kernels() at once; collectives between them run",
          "[threads][kernel_slot]") {
  // 8 devices on 2 slots: each takes a slot 20 times with an all-reduce of all 8 devices
  // between two slots, so a device holding a slot while a peer waits for it in a collective
  // would deadlock (the watchdog fails the test then).
  constexpr std::size_t devices = 8, slots = 2;
  auto pool = std::make_shared<ts::cpu_devices>(devices, slots);
  REQUIRE(pool->concurrent_kernels() == slots);
  struct seen {
    int most_at_once = 0;
    std::vector<float> sums;
  };
  const seen s = ts_test::within(limit, "kernel slots with collectives between them", [pool] {
    const std::vector<ts::device_id> ids = iota_devices(devices);
    std::atomic<int> running{0}, most{0};
    std::vector<float> sums(devices, 0.0f);
    pool->run(ids, [&](std::size_t i) {
      for (int k = 0; k < 20; ++k) {
        {
          const ts::backend::kernel_slot slot =
              pool->acquire_kernel_slot(ts::cpu_devices::pinned_kernel_multiply_adds);
          const int now = ++running;
          int high = most.load();
          while (now > high && !most.compare_exchange_weak(high, now)) {
          }
          // Hold the slot ~1 ms (8 threads on few cores get preempted meanwhile), or until a
          // holder too many shows up: without the slots, one does within a few holds.
          const auto until = std::chrono::steady_clock::now() + 1ms;
          while (running.load() <= static_cast<int>(slots) && std::chrono::steady_clock::now() < until) {
          }
          --running;
        }
        float v = 1.0f;
        pool->all_reduce({ids, i}, ts::element_type_of<float>, ts::reduce_op::sum, &v, &v, 1);
        sums[i] += v;
      }
    });
    return seen{most.load(), sums};
  });
  CHECK(s.most_at_once >= 1);
  CHECK(s.most_at_once <= static_cast<int>(slots));
  for (const float v : s.sums) CHECK(v == 20.0f * devices);
}

#if defined(__linux__)
TEST_CASE("kernel slots: a long kernel runs pinned to a core, a short one where it is",
          "[threads][kernel_slot]") {
  // The calling thread's affinity mask (how many cores it may run on) inside a slot taken for
  // a kernel of the pinning size, after it, and inside a slot for a kernel one multiply-add
  // shorter. 4 devices on 1 slot, so slots are in use.
  cpu_set_t process;
  REQUIRE(sched_getaffinity(0, sizeof process, &process) == 0);
  const int cores = CPU_COUNT(&process);
  constexpr std::size_t devices = 4;
  auto pool = std::make_shared<ts::cpu_devices>(devices, 1);
  struct cores_seen {
    int in_long = 0, after_long = 0, in_short = 0;
  };
  const std::vector<cores_seen> seen = ts_test::within(limit, "pinned kernel slots", [pool] {
    std::vector<cores_seen> s(devices);
    pool->run(iota_devices(devices), [&](std::size_t i) {
      const auto allowed = [] {
        cpu_set_t set;
        return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
      };
      constexpr std::size_t pin_size = ts::cpu_devices::pinned_kernel_multiply_adds;
      {
        const ts::backend::kernel_slot slot = pool->acquire_kernel_slot(pin_size);
        s[i].in_long = allowed();
      }
      s[i].after_long = allowed();
      {
        const ts::backend::kernel_slot slot = pool->acquire_kernel_slot(pin_size - 1);
        s[i].in_short = allowed();
      }
    });
    return s;
  });
  for (const cores_seen& s : seen) {
    CHECK(s.in_long == (cores >= 2 ? 1 : cores));  // one core: nothing to pin to
    CHECK(s.after_long == cores);
    CHECK(s.in_short == cores);
  }
}
#endif

TEST_CASE("kernel slots: by default the cores this process may use; zero is an error",
          "[threads][kernel_slot]") {
  const ts::cpu_devices pool{3};
  CHECK(pool.concurrent_kernels() >= 1);
  CHECK(pool.concurrent_kernels() <= std::max<std::size_t>(std::thread::hardware_concurrency(), 1));
  REQUIRE_THROWS_AS((ts::cpu_devices{4, 0}), ts::usage_error);
  REQUIRE_THROWS_WITH((ts::cpu_devices{4, 0}),
                      Catch::StartsWith("typeshard: ") && Catch::Contains("concurrent kernel"));
}

TEST_CASE("a matmul on more devices than kernel slots equals the serial product",
          "[threads][kernel_slot]") {
  // 8 devices, one slot: every device's GEMM runs alone, between the plan's collectives.
  ts::cpu_devices pool(8, 1);
  using mesh = ts::mesh<ts::axis("x", 4), ts::axis("y", 2)>;
  const ts::device_mesh<mesh> m{pool};
  constexpr std::size_t n = 24, k = 20, q = 18;
  ts::host_tensor<double, 2> a({n, k}), b({k, q});
  for (std::size_t i = 0; i < a.values().size(); ++i) a.values()[i] = double((i * 7) % 11) - 5.0;
  for (std::size_t i = 0; i < b.values().size(); ++i) b.values()[i] = double((i * 5) % 13) - 6.0;
  const auto A = ts::device_put<ts::spec<"x", "y">>(m, a);   // contracting dim over "y"
  const auto B = ts::device_put<ts::spec<"y", ts::none>>(m, b);
  const auto C = ts::reshard<ts::spec<"x", ts::none>>(ts::matmul(A, B));
  const ts::host_tensor<double, 2> c = ts::to_host(C);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < q; ++j) {
      double want = 0.0;
      for (std::size_t l = 0; l < k; ++l) want += a(i, l) * b(l, j);
      CHECK(c(i, j) == want);  // small integers: exact in double
    }
}
