// ts::jit (ops/jit.hpp): a step run as one SPMD program per device gives bitwise the results
// of running it eagerly, on 1d and 2d meshes (on all of a pool's devices or some of them):
// a matmul and collective chain, an MLP training step (ts::value_and_grad and ZeRO-1 Adam over
// a parameter tree) for several steps; failures inside a device's program reach the caller as
// eager mode throws them and never hang (programs as fibers and on device threads); lower()
// records each device's program and the communication ledger, which equals what a
// communication_recorder sees eagerly; a step's device threads block at most twice per
// collective of the ledger (getrusage).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <sys/resource.h>

#include <typeshard/ops/jit.hpp>
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using ts::none;

namespace {

using mesh_1d = ts::mesh<ts::axis("data", 4)>;
using mesh_2x2 = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
using mesh_2x4 = ts::mesh<ts::axis("data", 2), ts::axis("model", 4)>;

template <std::size_t Rank>
ts::host_tensor<float, Rank> random_tensor(const ts::shape<Rank>& s, unsigned seed) {
  ts::host_tensor<float, Rank> t(s);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = u(gen);
  return t;
}

// Bitwise equality of two arrays' values (and of their types).
template <class A, class B>
void require_bitwise(const A& a, const B& b) {
  STATIC_REQUIRE(std::is_same_v<A, B>);
  const auto ha = ts::to_host(ts::reshard<ts::spec<>>(a));  // a partial sum: reduced alike
  const auto hb = ts::to_host(ts::reshard<ts::spec<>>(b));
  REQUIRE(ha.extents() == hb.extents());
  CHECK(std::memcmp(ha.data(), hb.data(), ha.size() * sizeof(*ha.data())) == 0);
}

// A chain of matmuls whose plans communicate (psums over the contracted axis, a reshard's
// all-gather), elementwise ops and a reduction (a partial sum over "data"). HSpec: the hidden
// layer's reduced spec.
template <class HSpec>
const auto chain = [](const auto& x, const auto& w1, const auto& w2) {
  auto h = ts::tanh(ts::reshard<HSpec>(ts::matmul(x, w1)));
  auto y = ts::reshard<ts::spec<"data", none>>(ts::matmul(h, w2));
  auto g = ts::reshard<ts::spec<none, none>>(y);
  return std::tuple(g, ts::sum(y * y), h);
};

template <class Mesh>
void check_chain(const ts::device_mesh<Mesh>& m, std::size_t rows, std::size_t k) {
  INFO(m.to_string() << ", rows " << rows << ", k " << k);
  constexpr bool two_d = Mesh::rank == 2;
  using x_spec = std::conditional_t<two_d, ts::spec<"data", none>, ts::spec<none, "data">>;
  using w1_spec = std::conditional_t<two_d, ts::spec<none, "model">, ts::spec<"data", none>>;
  using w2_spec = std::conditional_t<two_d, ts::spec<"model", none>, ts::spec<none, none>>;
  const auto x = ts::device_put<x_spec>(m, random_tensor(ts::shape<2>{rows, k}, 1));
  const auto w1 = ts::device_put<w1_spec>(m, random_tensor(ts::shape<2>{k, 8}, 2));
  const auto w2 = ts::device_put<w2_spec>(m, random_tensor(ts::shape<2>{8, 5}, 3));
  using h_spec = std::conditional_t<two_d, ts::spec<"data", "model">, ts::spec<none, none>>;
  const auto eager = chain<h_spec>(x, w1, w2);
  const auto step = ts::jit(chain<h_spec>);
  for (int call = 0; call < 2; ++call) {
    const auto jitted = step(x, w1, w2);
    require_bitwise(std::get<0>(jitted), std::get<0>(eager));
    require_bitwise(std::get<1>(jitted), std::get<1>(eager));
    require_bitwise(std::get<2>(jitted), std::get<2>(eager));
  }
}

// The MLP's parameters: a Hana struct template (a parameter tree).
template <class W1, class B1, class W2>
struct mlp_params {
  BOOST_HANA_DEFINE_STRUCT(mlp_params, (W1, w1), (B1, b1), (W2, w2));
};

template <class W1, class B1, class W2>
mlp_params<W1, B1, W2> make_params(W1 w1, B1 b1, W2 w2) {
  return {std::move(w1), std::move(b1), std::move(w2)};
}

const auto mlp_loss = [](const auto& p, const auto& x, const auto& y) {
  auto h = ts::tanh(ts::matmul(x, p.w1) + p.b1);
  auto e = ts::reshard<ts::spec<"data", none>>(ts::matmul(h, p.w2)) - y;
  return ts::mean(e * e);
};

// One training step: value_and_grad, then ZeRO-1 Adam over the tree (a new state: f runs once
// per device, so it updates a copy, never shared state).
const auto train_step = [](const auto& params, const auto& state, const auto& x, const auto& y) {
  auto [loss, grads] = ts::value_and_grad(mlp_loss)(params, x, y);
  auto s = state;
  auto next = ts::adam_update(params, grads, s, {.lr = 0.05});
  return std::tuple(loss, next, s);
};

template <class Mesh>
void check_training(const ts::device_mesh<Mesh>& m) {
  INFO(m.to_string());
  constexpr bool two_d = Mesh::rank == 2;
  using hidden = std::conditional_t<two_d, ts::spec<none, "model">, ts::spec<none, none>>;
  using hidden_b = std::conditional_t<two_d, ts::spec<"model">, ts::spec<none>>;
  using back = std::conditional_t<two_d, ts::spec<"model", none>, ts::spec<none, none>>;
  auto params = make_params(ts::device_put<hidden>(m, random_tensor(ts::shape<2>{6, 12}, 4)),
                           ts::device_put<hidden_b>(m, random_tensor(ts::shape<1>{12}, 5)),
                           ts::device_put<back>(m, random_tensor(ts::shape<2>{12, 3}, 6)));
  auto state = ts::zero_adam_init<"data">(params);
  auto eager_params = params;
  auto eager_state = state;
  const auto step = ts::jit(train_step);
  for (unsigned s = 0; s < 3; ++s) {
    INFO("step " << s);
    using batch = ts::spec<"data", none>;
    const auto x = ts::device_put<batch>(m, random_tensor(ts::shape<2>{8, 6}, 10 + s));
    const auto y = ts::device_put<batch>(m, random_tensor(ts::shape<2>{8, 3}, 20 + s));
    auto [eager_loss, eager_next, eager_s] = train_step(eager_params, eager_state, x, y);
    auto [loss, next, st] = step(params, state, x, y);
    require_bitwise(loss, eager_loss);
    require_bitwise(next.w1, eager_next.w1);
    require_bitwise(next.b1, eager_next.b1);
    require_bitwise(next.w2, eager_next.w2);
    require_bitwise(st.w1.m, eager_s.w1.m);
    require_bitwise(st.w2.v, eager_s.w2.v);
    CHECK(st.b1.step == eager_s.b1.step);
    params = next;
    state = st;
    eager_params = eager_next;
    eager_state = eager_s;
  }
}

}  // namespace

TEST_CASE("jit: a matmul and collective chain equals eager mode bitwise", "[jit]") {
  ts::cpu_devices devices{8};
  for (const auto how : {ts::program_execution::fibers, ts::program_execution::device_threads}) {
    devices.set_program_execution(how);
    check_chain(ts::device_mesh<mesh_1d>{devices, {4, 5, 6, 7}}, 7, 12);  // half the pool
    check_chain(ts::device_mesh<mesh_2x2>{devices, {0, 1, 2, 3}}, 6, 4);
    check_chain(ts::device_mesh<mesh_2x4>{devices}, 9, 16);
  }
}

TEST_CASE("jit: an MLP training step (value_and_grad, ZeRO-1 Adam) equals eager mode", "[jit]") {
  ts::cpu_devices devices{8};
  check_training(ts::device_mesh<mesh_1d>{devices, {0, 1, 2, 3}});
  check_training(ts::device_mesh<mesh_2x4>{devices});
}

TEST_CASE("jit: failures in a device's program are thrown as eagerly, never a hang", "[jit]") {
  ts::cpu_devices devices{8};
  // Programs as fibers (the default, on several workers and, once small, on one) and on
  // device threads: the same failures.
  for (const auto how : {ts::program_execution::fibers, ts::program_execution::device_threads}) {
    devices.set_program_execution(how);
    INFO((how == ts::program_execution::fibers ? "fibers" : "device threads"));
    ts::device_mesh<mesh_2x4> m{devices};
    const auto a =
        ts::device_put<ts::spec<"data", "model">>(m, random_tensor(ts::shape<2>{4, 8}, 7));
    // Device 5 fails inside an operation while its peers wait for it in a collective.
    const auto failing = [](const auto& x) {
      const auto f = ts::shard_map<mesh_2x4, ts::spec<"data", "model">, ts::spec<"data", "model">>(
          [](const ts::shard_context<mesh_2x4>& c, const auto& b) {
            if (c.position() == 5) throw std::logic_error("device 5 fails");
            return ts::psum<"model">(b);
          });
      return ts::reshard<ts::spec<none, none>>(f(x) * 2.0f);
    };
    std::string eager_what;
    try {
      (void)failing(a);
      FAIL("no exception");
    } catch (const ts::device_error& e) {
      CHECK(e.device() == 5);
      eager_what = e.what();
    }
    const auto step = ts::jit(failing);
    for (int call = 0; call < 2; ++call) {
      try {
        (void)step(a);
        FAIL("no exception");
      } catch (const ts::device_error& e) {
        CHECK(e.device() == 5);
        CHECK(std::string(e.what()) == eager_what);
      }
    }
    // Devices of a group that call different collectives: the usage_error (each device's call
    // and call site), as a device_error, as eagerly.
    const auto mismatched = [](const auto& x) {
      const auto f = ts::shard_map<mesh_2x4, ts::spec<"data", "model">, ts::spec<"data", "model">>(
          [](const ts::shard_context<mesh_2x4>& c, const auto& b) {
            if (c.position() == 1) return ts::pmax<"model">(b);  // its peers call psum
            return ts::psum<"model">(b);
          });
      return f(x);
    };
    try {
      (void)mismatched(a);
      FAIL("no exception");
    } catch (const ts::device_error& e) {
      eager_what = e.what();
    }
    CHECK_THAT(eager_what, Catch::Contains("same collectives in the same order"));
    try {
      (void)ts::jit(mismatched)(a);
      FAIL("no exception");
    } catch (const ts::device_error& e) {
      CHECK_THROWS_AS(std::rethrow_exception(e.original()), ts::usage_error);
      CHECK(std::string(e.what()) == eager_what);
    }
    // A host-side failure (every device's program throws it): rethrown as it is.
    const auto host_failure = ts::jit([](const auto& x) {
      if (x.extent(0) == 4) throw std::invalid_argument("bad extent");
      return x;
    });
    CHECK_THROWS_AS(host_failure(a), std::invalid_argument);
    // The pool works on afterwards, eagerly and compiled.
    const auto twice =
        ts::jit([](const auto& x) { return ts::reshard<ts::spec<none, none>>(x + x); });
    require_bitwise(twice(a), ts::reshard<ts::spec<none, none>>(a + a));
  }
}

TEST_CASE("jit: lower() records each device's program and the communication ledger", "[jit]") {
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_2x4> m{devices};
  using cols = ts::spec<none, "model">;
  using rows = ts::spec<"model", none>;
  using bias = ts::spec<"model">;
  const auto params = make_params(ts::device_put<cols>(m, random_tensor(ts::shape<2>{6, 12}, 4)),
                                  ts::device_put<bias>(m, random_tensor(ts::shape<1>{12}, 5)),
                                  ts::device_put<rows>(m, random_tensor(ts::shape<2>{12, 3}, 6)));
  const auto state = ts::zero_adam_init<"data">(params);
  const auto x = ts::device_put<ts::spec<"data", none>>(m, random_tensor(ts::shape<2>{8, 6}, 10));
  const auto y = ts::device_put<ts::spec<"data", none>>(m, random_tensor(ts::shape<2>{8, 3}, 11));
  ts::communication_report eager;
  {
    ts::communication_recorder rec;
    (void)train_step(params, state, x, y);
    eager = rec.report();
  }
  const auto step = ts::jit(train_step);
  const ts::jit_lowered lowered = step.lower(params, state, x, y);
  REQUIRE(lowered.devices() == 8);
  for (std::size_t d = 0; d < 8; ++d) {
    INFO("device " << d);
    const auto ledger = lowered.ledger(d);
    CHECK(ledger.size() == eager.size());
    CHECK(lowered.local_steps(d) > 0);
    CHECK(lowered.local_steps(d) == lowered.local_steps(0));
  }
  const auto ledger = lowered.ledger(0);
  REQUIRE(ledger.size() == eager.size());
  for (std::size_t i = 0; i < ledger.size(); ++i) {
    INFO("collective " << i);
    CHECK(ledger[i].name() == eager.collectives()[i].name());
    CHECK(ledger[i].axes == eager.collectives()[i].axes);
    CHECK(ledger[i].block_bytes == eager.collectives()[i].block_bytes);
  }
  const std::string printed = lowered.to_string();
  CHECK_THAT(printed, Catch::Contains("communication ledger") && Catch::Contains("psum"));
  for (const ts::jit_step& s : ledger) CHECK(!s.call_site.empty());  // the call that ran it
}

// ---- SPMD execution: context switches per step ------------------------------------------------
namespace {
// Under a sanitizer, which slows the work several times (timings differ).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool sanitized = true;
#else
constexpr bool sanitized = false;
#endif
#else
constexpr bool sanitized = false;
#endif

// The context switches of the whole process so far (getrusage): voluntary (a thread blocked,
// in a condition variable or a mutex) and involuntary (preempted, or gave its core away).
std::pair<long, long> context_switches() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return {u.ru_nvcsw, u.ru_nivcsw};
}

// The fewest voluntary switches per call of `step` over a few batches of calls, and the
// involuntary ones of that batch.
template <class Step, class... Args>
std::pair<double, double> switches_per_step(const Step& step, const Args&... args) {
  (void)step(args...);  // the fibers' stacks, the kernels' buffers
  std::pair<double, double> fewest{1e30, 0};
  for (int batch = 0; batch < 4; ++batch) {
    const auto before = context_switches();
    for (int call = 0; call < 8; ++call) (void)step(args...);
    const auto after = context_switches();
    const double voluntary = static_cast<double>(after.first - before.first) / 8;
    if (voluntary < fewest.first)
      fewest = {voluntary, static_cast<double>(after.second - before.second) / 8};
  }
  return fewest;
}
}  // namespace

// Each device's program runs start to end and meets the others only in collectives; on fibers
// (the default) a device waiting in a collective hands its worker to another device, and a
// worker thread blocks only when none of its devices can run: at most twice per collective
// (both barriers of it). Two kernel slots, so two workers on any machine. On a thread per
// device (TYPESHARD_PROGRAM_EXECUTION=threads, where this test fails), the 8 device threads
// block at each collective the others are late to (a GEMM of about a millisecond per device,
// 8 devices on 2 slots) and for each kernel slot. Robust on a loaded machine: the test counts
// voluntary switches only, i.e. this process's threads blocking (the mechanism), not
// involuntary ones (another process preempting ours, or a waiting thread's yield giving the
// core to one). A preempted worker can make the other wait long enough to block (over 200
// us), so the test takes the fewest per step over a few batches of calls.
TEST_CASE("jit: a step's devices switch threads at most twice per collective", "[jit]") {
  ts::cpu_devices devices{8, 2};
  ts::device_mesh<mesh_2x4> m{devices};
  using h_spec = ts::spec<"data", "model">;
  const std::size_t rows = 512, k = 512, hidden = 512;
  const auto x = ts::device_put<ts::spec<"data", none>>(m, random_tensor(ts::shape<2>{rows, k}, 1));
  const auto w1 =
      ts::device_put<ts::spec<none, "model">>(m, random_tensor(ts::shape<2>{k, hidden}, 2));
  const auto w2 =
      ts::device_put<ts::spec<"model", none>>(m, random_tensor(ts::shape<2>{hidden, 5}, 3));
  const auto step = ts::jit(chain<h_spec>);
  const std::size_t collectives = step.lower(x, w1, w2).ledger(0).size();
  REQUIRE(collectives > 0);
  const auto [voluntary, involuntary] = switches_per_step(step, x, w1, w2);
  INFO("collectives per step " << collectives << "; context switches per step: voluntary "
       << voluntary << ", involuntary " << involuntary << " (not counted), "
       << (devices.program_execution_mode() == ts::program_execution::fibers
               ? "fibers" : "device threads"));
  CHECK(voluntary <= 2.0 * static_cast<double>(collectives));
}

// A step whose work is small (well under 100 us, detail::fiber_small_program) runs on the
// calling thread alone from its second call: every device's program runs on it (on device
// threads, each on its own), no thread is woken and none blocks, so the process makes no
// voluntary context switch (robust as above: preemption is involuntary; the fewest over a few
// batches, in case a preempted call took long enough to run on two workers once).
TEST_CASE("jit: a small step runs on the calling thread alone", "[jit]") {
  ts::cpu_devices devices{8, 2};
  ts::device_mesh<mesh_2x4> m{devices};
  const auto a = ts::device_put<ts::spec<"data", "model">>(m, random_tensor(ts::shape<2>{4, 8}, 7));
  std::vector<std::thread::id> ran(8);  // the thread of each device's program, by device
  const auto step = ts::jit([&ran, &devices](const auto& x) {
    ran[devices.process_index()] = std::this_thread::get_id();  // the program's device
    return ts::reshard<ts::spec<none, none>>(x + x);
  });
  require_bitwise(step(a), ts::reshard<ts::spec<none, none>>(a + a));
  const auto [voluntary, involuntary] = switches_per_step(step, a);
  INFO("context switches per step: voluntary " << voluntary << ", involuntary "
       << involuntary << " (not counted)");
  if (!sanitized) CHECK(voluntary == 0);
  // Where the devices' programs ran: on the calling thread alone in some of a few calls (one
  // preempted for long would make the next run on two workers). Neither check under a
  // sanitizer, which slows the step past the threshold.
  std::size_t alone = 0;
  for (int call = 0; call < 8; ++call) {
    require_bitwise(step(a), ts::reshard<ts::spec<none, none>>(a + a));
    bool all = true;
    for (std::size_t d = 0; d < 8; ++d) all = all && ran[d] == std::this_thread::get_id();
    alone += all;
  }
  if (!sanitized) CHECK(alone > 0);
}
