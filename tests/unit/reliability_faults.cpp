// Reliability, faults: per-device functions that throw, and allocations that fail, at chosen
// points of multi-device operations. For every fault: the caller gets the exception (a
// device_error naming the device and what it threw, or the std::bad_alloc of its own
// thread), no thread hangs (a watchdog turns a hang into a failure), the inputs are
// untouched, and the next operation on the same pool gives the serial reference's result.
// The sanitizer builds add: nothing leaks (LeakSanitizer), no data race (ThreadSanitizer).
//
// Also the pool's life cycle: destroying it while another thread's operation runs waits
// for that operation; two threads sharing one pool; pools created and destroyed in a loop
// leave no thread behind.
//
// This executable replaces the global operator new/delete (below) with a malloc-based pair
// that can be told to throw std::bad_alloc at the k-th allocation of one thread: a device's
// thread (inside its per-device function) or the calling thread. Sweeping k from 1 until the
// operation succeeds reaches every allocation point of the operation: before, between and
// after its collectives.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <limits>
#include <mutex>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <typeshard/typeshard.hpp>

#include "reliability_support.hpp"

namespace ts = typeshard;
using namespace reliability;

// ---- allocation fault injection ---------------------------------------------------------------
//
// Not where the sanitizer runtime is a static library that defines operator new itself (clang's
// TSan, ASan and MSan: the two definitions would clash at link time); g++'s shared libasan
// lets the replacement interpose, so the gcc, clang and asan stages of scripts/test run the
// allocation sweeps and the tsan stage runs everything else.
#if defined(__SANITIZE_THREAD__)
#define RELIABILITY_ALLOCATION_HOOK 0
#elif defined(__clang__) && defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define RELIABILITY_ALLOCATION_HOOK 0
#endif
#endif
#ifndef RELIABILITY_ALLOCATION_HOOK
#define RELIABILITY_ALLOCATION_HOOK 1
#endif

#if RELIABILITY_ALLOCATION_HOOK
namespace {

namespace inject {

constexpr std::size_t caller_thread = std::numeric_limits<std::size_t>::max();

std::atomic<bool> armed{false};
std::atomic<bool> fired{false};
std::atomic<long> countdown{0};
std::atomic<std::size_t> target{caller_thread};  // a run index (mesh position), or caller_thread
std::thread::id caller;

// Whether this allocation is the one to fail.
bool should_fail() noexcept {
  if (!armed.load(std::memory_order_acquire)) return false;
  const ts::detail::thread_device_context& here = ts::detail::current_thread_device();
  const std::size_t t = target.load(std::memory_order_relaxed);
  const bool mine = t == caller_thread ? (here.run == nullptr && std::this_thread::get_id() == caller)
                                       : (here.run != nullptr && here.index == t);
  if (!mine) return false;
  if (countdown.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
  armed.store(false, std::memory_order_release);
  fired.store(true, std::memory_order_release);
  return true;
}

// Fail the k-th allocation (k >= 1) made by `who` from now on.
void arm(std::size_t who, long k) {
  caller = std::this_thread::get_id();
  fired = false;
  countdown = k;
  target = who;
  armed.store(true, std::memory_order_release);
}
void disarm() { armed.store(false, std::memory_order_release); }

void* allocate(std::size_t n, std::size_t alignment) {
  if (should_fail()) throw std::bad_alloc();
  if (n == 0) n = 1;
  void* p = nullptr;
  if (alignment <= alignof(std::max_align_t)) {
    p = std::malloc(n);
  } else {
    n = (n + alignment - 1) / alignment * alignment;  // aligned_alloc wants a multiple
    p = std::aligned_alloc(alignment, n);
  }
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
// Not inlined, so that g++ does not see free() applied to what operator new returned
// (-Wmismatched-new-delete): here both are malloc's.
[[gnu::noinline]] void release(void* p) noexcept { std::free(p); }

void* allocate_nothrow(std::size_t n, std::size_t alignment) noexcept {
  try {
    return allocate(n, alignment);
  } catch (...) {
    return nullptr;
  }
}

}  // namespace inject

}  // namespace

// Every replaceable form, so that no allocation reaches the sanitizer's own operator new
// and is then freed here (or the reverse): new and delete always come as a malloc/free pair.
void* operator new(std::size_t n) { return inject::allocate(n, 0); }
void* operator new[](std::size_t n) { return inject::allocate(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return inject::allocate(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return inject::allocate(n, static_cast<std::size_t>(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return inject::allocate_nothrow(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return inject::allocate_nothrow(n, 0); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return inject::allocate_nothrow(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return inject::allocate_nothrow(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { inject::release(p); }
void operator delete[](void* p) noexcept { inject::release(p); }
void operator delete(void* p, std::size_t) noexcept { inject::release(p); }
void operator delete[](void* p, std::size_t) noexcept { inject::release(p); }
void operator delete(void* p, std::align_val_t) noexcept { inject::release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { inject::release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { inject::release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { inject::release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { inject::release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { inject::release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { inject::release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { inject::release(p); }
#endif  // RELIABILITY_ALLOCATION_HOOK

namespace {

// ---- the setting ------------------------------------------------------------------------------

using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;
using spec_xy = ts::spec<"x", "y">;

// The mesh positions run on the devices in reverse (position p on device 7 - p), so a
// message that names a position where it should name a device is caught.
const std::vector<ts::device_id> reversed{7, 6, 5, 4, 3, 2, 1, 0};

ts::host_tensor<int, 2> iota(std::size_t rows, std::size_t cols, int offset = 0) {
  ts::host_tensor<int, 2> t({rows, cols});
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<int>(i) * 7 % 23 - 11 + offset;
  return t;
}

// ---- the collectives under test, each with a serial reference ----------------------------------
//
// The input is an 8 x 16 array sharded spec<"x", "y"> on the 2 x 4 mesh (blocks of 4 x 4).
// Every program's output is sharded spec<"x", "y"> too.
enum class coll { psum, pmax, all_gather, psum_scatter, all_to_all, shift };

const char* name(coll c) {
  switch (c) {
    case coll::psum: return "psum<y>";
    case coll::pmax: return "pmax<x,y>";
    case coll::all_gather: return "all_gather<y>(dim 1)";
    case coll::psum_scatter: return "psum_scatter<y>(dim 1)";
    case coll::all_to_all: return "all_to_all<y>(0, 1)";
    case coll::shift: return "shift<y>(1)";
  }
  return "?";
}

template <coll C, class B>
auto apply(const B& b) {
  if constexpr (C == coll::psum) return ts::psum<"y">(b);
  else if constexpr (C == coll::pmax) return ts::pmax<"x", "y">(b);
  else if constexpr (C == coll::all_gather) return ts::all_gather<"y">(b, 1);
  else if constexpr (C == coll::psum_scatter) return ts::psum_scatter<"y">(b, 1);
  else if constexpr (C == coll::all_to_all) return ts::all_to_all<"y">(b, 0, 1);
  else return ts::shift<"y">(b, 1);
}

// The mesh axes a collective runs over (indices into mesh_2x4's axes).
std::vector<std::size_t> axes_of(coll c) {
  return c == coll::pmax ? std::vector<std::size_t>{0, 1} : std::vector<std::size_t>{1};
}

// The global result of apply<C> on every block of `h` (8 x 16), computed serially from the
// definitions (block (px, py) holds rows 4px.., columns 4py..).
ts::host_tensor<int, 2> reference(coll c, const ts::host_tensor<int, 2>& h) {
  switch (c) {
    case coll::psum: {  // every member of a row group gets the sum of its 4 blocks
      ts::host_tensor<int, 2> out({8, 16});
      for (std::size_t i = 0; i < 8; ++i)
        for (std::size_t j = 0; j < 16; ++j)
          for (std::size_t q = 0; q < 4; ++q) out(i, j) += h(i, 4 * q + j % 4);
      return out;
    }
    case coll::pmax: {  // the elementwise maximum of all 8 blocks, everywhere
      ts::host_tensor<int, 2> out({8, 16});
      for (std::size_t i = 0; i < 8; ++i)
        for (std::size_t j = 0; j < 16; ++j) {
          int m = std::numeric_limits<int>::min();
          for (std::size_t px = 0; px < 2; ++px)
            for (std::size_t q = 0; q < 4; ++q) m = std::max(m, h(4 * px + i % 4, 4 * q + j % 4));
          out(i, j) = m;
        }
      return out;
    }
    case coll::all_gather: {  // each block becomes its whole row group (4 x 16)
      ts::host_tensor<int, 2> out({8, 64});
      for (std::size_t i = 0; i < 8; ++i)
        for (std::size_t j = 0; j < 64; ++j) out(i, j) = h(i, j % 16);
      return out;
    }
    case coll::psum_scatter: {  // the row group's sum, member py keeping column py (4 x 1)
      ts::host_tensor<int, 2> out({8, 4});
      for (std::size_t i = 0; i < 8; ++i)
        for (std::size_t j = 0; j < 4; ++j)
          for (std::size_t q = 0; q < 4; ++q) out(i, j) += h(i, 4 * q + j);
      return out;
    }
    case coll::all_to_all: {  // member py gets row py of each member's block, concatenated
      ts::host_tensor<int, 2> out({2, 64});
      for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < 64; ++j) out(i, j) = h(4 * i + j / 16, j % 16);
      return out;
    }
    case coll::shift: {  // member py gets member py - 1's block
      ts::host_tensor<int, 2> out({8, 16});
      for (std::size_t i = 0; i < 8; ++i)
        for (std::size_t j = 0; j < 16; ++j) out(i, j) = h(i, (j / 4 + 3) % 4 * 4 + j % 4);
      return out;
    }
  }
  return {};
}

// ---- fault plans --------------------------------------------------------------------------------

enum class point { before, between, inside, after };
constexpr std::array all_points{point::before, point::between, point::inside, point::after};

const char* name(point p) {
  switch (p) {
    case point::before: return "before the first collective";
    case point::between: return "between two collectives";
    case point::inside: return "inside the second collective (arguments its group disagrees with)";
    case point::after: return "after the last collective";
  }
  return "?";
}

struct fault_plan {
  std::set<std::size_t> positions;  // the mesh positions that fail
  point where = point::before;
  bool fails(std::size_t p) const { return positions.count(p) != 0; }
};

// What a failing device throws: not always a std::exception, so that path is covered too.
[[noreturn]] void throw_injected(std::size_t position, ts::device_id device, point where) {
  if (position % 3 == 1) throw 42;
  throw std::runtime_error("injected fault on device " + std::to_string(device) + " (position " +
                           std::to_string(position) + "), " + name(where));
}

// The shard_map program: C, then C again, with the plan's fault at its point. "inside"
// passes a block of another shape to the second collective on the failing devices (sizes
// alternate by position, so even a group whose members all fail disagrees).
template <coll C>
auto program(const fault_plan& plan) {
  return ts::shard_map<mesh_2x4, spec_xy, spec_xy>(
      [plan](const ts::shard_context<mesh_2x4>& ctx, const auto& b) {
        using B = std::remove_cvref_t<decltype(b)>;
        const std::size_t p = ctx.position();
        const bool fail = plan.fails(p);
        if (fail && plan.where == point::before) throw_injected(p, ctx.device(), plan.where);
        auto first = apply<C>(b);
        if (fail && plan.where == point::between) throw_injected(p, ctx.device(), plan.where);
        decltype(first) second = [&] {
          if (fail && plan.where == point::inside) {
            const std::size_t e = 4 * (2 + p % 2);
            B other(ctx, ts::shape<2>{e, e}, 1);
            return apply<C>(other);
          }
          return apply<C>(b);
        }();
        if (fail && plan.where == point::after) throw_injected(p, ctx.device(), plan.where);
        (void)first;
        return second;
      });
}

// The position of every mesh position's group (over `axes`) that contains a failing position.
bool in_failing_group(std::size_t position, const fault_plan& plan, const std::vector<std::size_t>& axes) {
  const auto mine = mesh_2x4::coordinates(position);
  for (std::size_t f : plan.positions) {
    const auto c = mesh_2x4::coordinates(f);
    bool same = true;
    for (std::size_t i = 0; i < mesh_2x4::rank; ++i)
      if (std::find(axes.begin(), axes.end(), i) == axes.end() && c[i] != mine[i]) same = false;
    if (same) return true;
  }
  return false;
}

template <class A>
ts::host_tensor<int, 2> host_of(const A& a) {
  return ts::to_host(a);
}

template <coll C>
void run_fault_matrix(ts::cpu_devices& devices, const ts::device_mesh<mesh_2x4>& m) {
  const ts::host_tensor<int, 2> host = iota(8, 16);
  const auto a = ts::device_put<spec_xy>(m, host);
  const ts::host_tensor<int, 2> expected = reference(C, host);
  REQUIRE(host_of(program<C>({})(a)) == expected);  // the program itself is right

  const std::vector<std::set<std::size_t>> sets{{5}, {1, 6}, {0, 1, 2, 3, 4, 5, 6, 7}};
  for (const auto& failing : sets) {
    for (point where : all_points) {
      const fault_plan plan{failing, where};
      std::string set_text;
      for (std::size_t f : failing) set_text += std::to_string(f) + " ";
      INFO("collective " << name(C) << ", failing positions { " << set_text << "}, fault "
                         << name(where));
      // Appends, not operator+ on temporaries: g++ 12 -O2 raises a false -Warray-bounds
      // there (GCC bug 105329, as -Wrestrict at -O3).
      std::string run_name = "fault run: ";
      run_name.append(name(C)).append(", ").append(name(where));
      watchdog dog(run_name);
      bool threw = false;
      try {
        (void)program<C>(plan)(a);
      } catch (const ts::device_error& e) {
        threw = true;
        const std::string what = e.what();
        CHECK(starts_with_typeshard(what));
        // e.device() is a device id; its mesh position is 7 - id here.
        REQUIRE(e.device() < 8);
        const std::size_t position = 7 - e.device();
        CHECK(contains(what, "device " + std::to_string(e.device()) + " threw"));
        if (where == point::inside) {
          // The collective itself failed on the failing devices' groups.
          CHECK(in_failing_group(position, plan, axes_of(C)));
          CHECK((contains(what, "called different collectives") || contains(what, "ppermute")));
          CHECK_THROWS_AS(std::rethrow_exception(e.original()), ts::usage_error);
        } else {
          // A failing device, with what it threw. Before any collective no failing device
          // can be released early by another's failure, so it is the first by position;
          // later, a failing device may be released from a collective (collective_aborted)
          // before it reaches its own fault, and one that did reach it is reported.
          CHECK(failing.count(position) == 1);
          if (where == point::before) CHECK(position == *failing.begin());
          // original() and the nested exception are both what the device threw.
          if (position % 3 == 1) {
            CHECK(contains(what, "an exception not derived from std::exception"));
            CHECK_THROWS_AS(std::rethrow_exception(e.original()), int);
            CHECK_THROWS_AS(e.rethrow_nested(), int);
          } else {
            CHECK(contains(what, "injected fault on device " + std::to_string(e.device())));
            CHECK_THROWS_AS(std::rethrow_exception(e.original()), std::runtime_error);
            CHECK_THROWS_AS(e.rethrow_nested(), std::runtime_error);
          }
        }
        CHECK_FALSE(contains(what, "collective aborted"));
      }
      CHECK(threw);
      // The inputs are untouched and the same pool runs the next operation correctly.
      CHECK(host_of(a) == host);
      CHECK(host_of(program<C>({})(a)) == expected);
    }
  }
  (void)devices;
}

}  // namespace

TEST_CASE("faults: a device function throwing before, between, inside or after collectives",
          "[reliability][faults]") {
  const long threads_before = settled_thread_count();
  {
    ts::cpu_devices devices{8};
    ts::device_mesh<mesh_2x4> m{devices, reversed};
    run_fault_matrix<coll::psum>(devices, m);
    run_fault_matrix<coll::pmax>(devices, m);
    run_fault_matrix<coll::all_gather>(devices, m);
    run_fault_matrix<coll::psum_scatter>(devices, m);
    run_fault_matrix<coll::all_to_all>(devices, m);
    run_fault_matrix<coll::shift>(devices, m);
  }
  CHECK(threads_return_to(threads_before));  // every device thread joined
}

// ---- a local matmul inside shard_map (Megatron's MLP block) -------------------------------------

namespace {

using spec_rows = ts::spec<"x", ts::none>;
using spec_cols_y = ts::spec<ts::none, "y">;
using spec_rows_y = ts::spec<"y", ts::none>;

ts::host_tensor<double, 2> small_integers(std::size_t rows, std::size_t cols, int seed) {
  ts::host_tensor<double, 2> t({rows, cols});
  for (std::size_t i = 0; i < t.size(); ++i)
    t.data()[i] = static_cast<double>((static_cast<int>(i) * 5 + seed * 3) % 7 - 3);
  return t;
}

ts::host_tensor<double, 2> serial_matmul(const ts::host_tensor<double, 2>& a,
                                         const ts::host_tensor<double, 2>& b) {
  ts::host_tensor<double, 2> c({a.extent(0), b.extent(1)});
  for (std::size_t i = 0; i < a.extent(0); ++i)
    for (std::size_t k = 0; k < b.extent(1); ++k)
      for (std::size_t j = 0; j < a.extent(1); ++j) c(i, k) += a(i, j) * b(j, k);
  return c;
}

// relu(x . W1) . W2 with x rows over "x", W1 columns and W2 rows over "y": each device
// multiplies its blocks, and psum<"y"> adds the partial products (seed 000's Megatron MLP).
enum class mlp_point { none, before_first_matmul, between_matmuls, before_psum, after_psum };

auto mlp_program(std::set<std::size_t> failing, mlp_point where) {
  return ts::shard_map<mesh_2x4, ts::specs<spec_rows, spec_cols_y, spec_rows_y>, spec_rows>(
      [failing, where](const ts::shard_context<mesh_2x4>& ctx, const auto& x, const auto& w1,
                       const auto& w2) {
        const bool fail = failing.count(ctx.position()) != 0;
        auto maybe = [&](mlp_point here) {
          if (fail && where == here)
            throw std::runtime_error("injected fault in the MLP on device " +
                                     std::to_string(ctx.device()));
        };
        maybe(mlp_point::before_first_matmul);
        auto h = ts::relu(ts::matmul(x, w1));
        maybe(mlp_point::between_matmuls);
        auto partial = ts::matmul(h, w2);
        maybe(mlp_point::before_psum);
        auto out = ts::psum<"y">(partial);
        maybe(mlp_point::after_psum);
        return out;
      });
}

ts::host_tensor<double, 2> relu(ts::host_tensor<double, 2> t) {
  for (double& v : t.values()) v = v < 0 ? 0 : v;
  return t;
}

}  // namespace

TEST_CASE("faults: a device function throwing around the local matmuls and psum of an MLP block",
          "[reliability][faults]") {
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_2x4> m{devices, reversed};
  const auto hx = small_integers(8, 16, 1), hw1 = small_integers(16, 8, 2), hw2 = small_integers(8, 16, 3);
  const auto x = ts::device_put<spec_rows>(m, hx);
  const auto w1 = ts::device_put<spec_cols_y>(m, hw1);
  const auto w2 = ts::device_put<spec_rows_y>(m, hw2);
  const auto expected = serial_matmul(relu(serial_matmul(hx, hw1)), hw2);
  REQUIRE(ts::to_host(mlp_program({}, mlp_point::none)(x, w1, w2)) == expected);

  for (const std::set<std::size_t>& failing :
       {std::set<std::size_t>{3}, std::set<std::size_t>{0, 7}, std::set<std::size_t>{2, 3, 4, 5}}) {
    for (mlp_point where : {mlp_point::before_first_matmul, mlp_point::between_matmuls,
                            mlp_point::before_psum, mlp_point::after_psum}) {
      INFO("first failing position " << *failing.begin() << ", point " << static_cast<int>(where));
      watchdog dog("MLP fault run");
      try {
        (void)mlp_program(failing, where)(x, w1, w2);
        FAIL("the fault did not reach the caller");
      } catch (const ts::device_error& e) {
        // Before the psum (the only collective) the first failing position is reported;
        // after it, a failing device may be released from its psum by another's failure
        // first, so any failing device may be the one reported.
        bool failing_device = false;
        for (std::size_t p : failing) failing_device = failing_device || e.device() == reversed[p];
        CHECK(failing_device);
        if (where != mlp_point::after_psum) CHECK(e.device() == reversed[*failing.begin()]);
        CHECK(contains(e.what(), "injected fault in the MLP on device " + std::to_string(e.device())));
      }
      CHECK(ts::to_host(x) == hx);
      CHECK(ts::to_host(w1) == hw1);
      CHECK(ts::to_host(w2) == hw2);
      CHECK(ts::to_host(mlp_program({}, mlp_point::none)(x, w1, w2)) == expected);
    }
  }
}

// ---- allocation failures: every allocation point of an operation ---------------------------------
#if RELIABILITY_ALLOCATION_HOOK

namespace {

struct sweep_outcome {
  long points = 0;          // allocations that were made to fail
  long device_errors = 0;   // of which reached the caller as device_error
  long caller_errors = 0;   // of which reached the caller as std::bad_alloc
};

// Makes the k-th allocation of `who` (a mesh position, or the calling thread) fail, for
// k = 1, 2, ... until the operation runs without reaching the k-th allocation. Each time:
// the failure reaches the caller as it should, the inputs are untouched (`untouched()`),
// and the next run is correct (`check(result)`).
template <class Op, class Check, class Untouched>
sweep_outcome sweep_allocation_faults(const std::string& what, std::size_t who, Op op, Check check,
                                      Untouched untouched) {
  INFO("operation: " << what << ", failing allocations of "
                     << (who == inject::caller_thread ? std::string("the calling thread")
                                                      : "mesh position " + std::to_string(who)));
  watchdog dog("allocation fault sweep: " + what);
  sweep_outcome out;
  for (long k = 1;; ++k) {
    REQUIRE(k < 5000);  // an operation with this many allocations would be a bug of its own
    CAPTURE(k);
    std::exception_ptr failure;
    bool succeeded = false;
    inject::arm(who, k);
    try {
      auto result = op();
      inject::disarm();
      succeeded = true;
      check(result);
    } catch (...) {
      inject::disarm();
      if (succeeded) throw;  // a failed check, not an injected fault
      failure = std::current_exception();
    }
    const bool fired = inject::fired.load();
    if (succeeded) {
      if (!fired) return out;  // every allocation point before this one was made to fail
      continue;                // the failure was absorbed and the result is still right
    }
    ++out.points;
    REQUIRE(fired);
    try {
      std::rethrow_exception(failure);
    } catch (const ts::device_error& e) {
      ++out.device_errors;
      CHECK(who != inject::caller_thread);
      CHECK(e.device() == reversed[who]);
      CHECK(starts_with_typeshard(e.what()));
      CHECK(contains(e.what(), "device " + std::to_string(reversed[who]) + " threw"));
      CHECK_THROWS_AS(std::rethrow_exception(e.original()), std::bad_alloc);
    } catch (const std::bad_alloc&) {
      ++out.caller_errors;
      CHECK(who == inject::caller_thread);
    } catch (const std::exception& e) {
      FAIL("unexpected exception: " << e.what());
    }
    untouched();
    check(op());  // the pool is usable and right
  }
}

}  // namespace

TEST_CASE("faults: allocation failures at every point of device_put, to_host, elementwise, reshard, "
          "matmul and shard_map",
          "[reliability][faults][alloc]") {
  const long threads_before = settled_thread_count();
  {
    ts::cpu_devices devices{8};
    ts::device_mesh<mesh_2x4> m{devices, reversed};
    const auto ha = small_integers(8, 16, 1), hb = small_integers(8, 16, 4);
    const auto hw = small_integers(16, 8, 2), hw2 = small_integers(8, 16, 3);
    const auto a = ts::device_put<spec_xy>(m, ha);
    const auto b = ts::device_put<spec_xy>(m, hb);
    const auto w = ts::device_put<ts::spec<"y", ts::none>>(m, hw);
    const auto x = ts::device_put<spec_rows>(m, ha);
    const auto w1 = ts::device_put<spec_cols_y>(m, hw);
    const auto w2 = ts::device_put<spec_rows_y>(m, hw2);
    auto untouched = [&] {
      CHECK(ts::to_host(a) == ha);
      CHECK(ts::to_host(b) == hb);
      CHECK(ts::to_host(w) == hw);
    };
    ts::host_tensor<double, 2> sum = ha;
    for (std::size_t i = 0; i < sum.size(); ++i) sum.data()[i] += hb.data()[i];
    const auto product = serial_matmul(ha, hw);
    const auto mlp = serial_matmul(relu(serial_matmul(ha, hw)), hw2);
    auto equals = [](const ts::host_tensor<double, 2>& want) {
      return [want](const auto& r) { CHECK(ts::to_host(r) == want); };
    };

    std::vector<std::pair<std::string, sweep_outcome>> report;
    for (std::size_t who : {inject::caller_thread, std::size_t{0}, std::size_t{5}}) {
      auto run = [&](const std::string& what, auto op, auto check) {
        report.emplace_back(what, sweep_allocation_faults(what, who, op, check, untouched));
      };
      run("device_put", [&] { return ts::device_put<spec_xy>(m, ha); }, equals(ha));
      run("device_put(make_block)",
          [&] {
            return ts::device_put<spec_xy>(m, ts::shape<2>{8, 16}, [&](const ts::index_slices<2>& ix) {
              ts::host_tensor<double, 2> t({ix[0].size(), ix[1].size()});
              for (std::size_t i = 0; i < ix[0].size(); ++i)
                for (std::size_t j = 0; j < ix[1].size(); ++j) t(i, j) = ha(ix[0].start + i, ix[1].start + j);
              return t;
            });
          },
          equals(ha));
      run("to_host", [&] { return ts::to_host(a); }, [&](const auto& h) { CHECK(h == ha); });
      run("a + b", [&] { return a + b; }, equals(sum));
      run("reshard to spec<y, x> (all_to_all)", [&] { return ts::reshard<ts::spec<"y", "x">>(a); },
          equals(ha));
      run("reshard to replicated (all_gather)",
          [&] { return ts::reshard<ts::spec<ts::none, ts::none>>(a); }, equals(ha));
      run("matmul with psum_scatter (J over y in both)",
          [&] { return ts::matmul<spec_xy>(a, w); }, equals(product));
      run("matmul unreduced, then reshard (psum)",
          [&] { return ts::reshard<spec_rows>(ts::matmul(a, w)); }, equals(product));
      run("shard_map MLP block", [&] { return mlp_program({}, mlp_point::none)(x, w1, w2); },
          equals(mlp));
    }
    // Every operation allocates on the calling thread and, except to_host (which copies
    // into the caller's tensor), on the devices: so every sweep made something fail.
    long points = 0;
    for (const auto& [what, o] : report) {
      INFO(what << ": " << o.points << " allocation points, " << o.device_errors
                << " device errors, " << o.caller_errors << " caller errors");
      if (what != "to_host" || o.caller_errors != 0) CHECK(o.points >= 1);
      points += o.points;
    }
    CHECK(points > 100);
  }
  CHECK(threads_return_to(threads_before));
}

#endif  // RELIABILITY_ALLOCATION_HOOK

// ---- the pool's life cycle ------------------------------------------------------------------------

TEST_CASE("pool: destroying cpu_devices while another thread's run() is in progress waits for it",
          "[reliability][pool]") {
  // The documented contract of ~cpu_devices: it waits for a run() in progress. (A typeshard
  // operation such as shard_map still uses the backend after its run() returns, so the
  // caller must not destroy a pool while another thread is inside an operation on it; this
  // test uses run() and the collective primitives directly, and touches nothing after.)
  watchdog dog("destructor during a running operation");
  const long threads_before = settled_thread_count();
  auto devices = std::make_unique<ts::cpu_devices>(4);
  ts::backend& backend = *devices;
  const std::vector<ts::device_id> ids{0, 1, 2, 3};
  const std::vector<std::size_t> members{0, 1, 2, 3};
  constexpr long rounds = 200;
  std::vector<std::vector<long>> sums(4, std::vector<long>(rounds, -1));

  std::mutex mutex;
  std::condition_variable cv;
  int entered = 0;
  bool destroying = false;
  // run() releases the pool as it returns, so the destructor may return before the
  // operation thread runs its next statement: what it guarantees is that every device
  // function has finished by then.
  std::atomic<int> devices_finished{0};
  int finished_when_destroyed = -1;

  std::thread operation([&] {
    backend.run(ids, [&](std::size_t i) {
      {
        std::unique_lock lock(mutex);
        ++entered;
        cv.notify_all();
        cv.wait(lock, [&] { return destroying; });
      }
      // The destructor has been called by now; these collectives run while it waits.
      for (long r = 0; r < rounds; ++r) {
        const long mine = static_cast<long>(i) + r;
        backend.all_reduce(ts::collective_group{members, i}, ts::element_type_of<long>,
                           ts::reduce_op::sum, &mine, &sums[i][static_cast<std::size_t>(r)], 1);
      }
      devices_finished.fetch_add(1);
    });
    // nothing touches the pool after run() returned
  });
  std::thread destroyer([&] {
    {
      std::unique_lock lock(mutex);
      cv.wait(lock, [&] { return entered == 4; });
      destroying = true;
    }
    cv.notify_all();
    devices.reset();  // must wait for the run() in progress
    finished_when_destroyed = devices_finished.load();
  });
  operation.join();
  destroyer.join();
  CHECK(finished_when_destroyed == 4);
  for (std::size_t i = 0; i < 4; ++i)
    for (long r = 0; r < rounds; ++r) {
      INFO("device " << i << ", round " << r);
      CHECK(sums[i][static_cast<std::size_t>(r)] == 6 + 4 * r);  // (0 + 1 + 2 + 3) + 4r
    }
  CHECK(threads_return_to(threads_before));
}

TEST_CASE("pool: two threads sharing one pool, and pools made and destroyed in a loop",
          "[reliability][pool]") {
  watchdog dog("shared pool");
  const long threads_before = settled_thread_count();
  {
    ts::cpu_devices devices{8};
    ts::device_mesh<mesh_2x4> m{devices};
    ts::device_mesh<mesh_2x4> other{devices, reversed};
    std::atomic<int> wrong{0}, faults_seen{0};
    auto worker = [&](const ts::device_mesh<mesh_2x4>& mesh, int seed) {
      for (int i = 0; i < 60; ++i) {
        const auto h = iota(8, 16, seed + i);
        const auto a = ts::device_put<spec_xy>(mesh, h);
        if (!(ts::to_host(ts::reshard<ts::spec<"y", "x">>(a)) == h)) ++wrong;
        if (!(ts::to_host(program<coll::psum>({})(a)) == reference(coll::psum, h))) ++wrong;
        try {  // a failing operation in between must not disturb the other thread's
          (void)program<coll::all_to_all>({{static_cast<std::size_t>(i % 8)}, point::between})(a);
        } catch (const ts::device_error&) {
          ++faults_seen;
        }
      }
    };
    std::thread t1(worker, std::cref(m), 0), t2(worker, std::cref(other), 100);
    t1.join();
    t2.join();
    CHECK(wrong == 0);
    CHECK(faults_seen == 120);
  }
  for (int i = 0; i < 30; ++i) {
    ts::cpu_devices devices{static_cast<std::size_t>(1 + i % 8)};
    ts::device_mesh<ts::mesh<ts::axis("x", 1)>> m{devices};
    const auto h = iota(3, 5, i);
    CHECK(ts::to_host(ts::device_put<ts::spec<"x", ts::none>>(m, h)) == h);
  }
  CHECK(threads_return_to(threads_before));
}
