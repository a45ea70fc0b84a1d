// Reliability, bad input: every run-time error path, table-driven. Each row calls one entry
// point with one thing wrong and says which exception must come out (for an error raised
// inside a per-device function: a device_error, and the type of the original it nests),
// and substrings the message must contain: what was wrong, with its numbers, and what to
// do. Every message must start with "typeshard: ". Every input a row hands over is
// snapshotted first and compared afterwards (bitwise; for arrays also the shards' addresses):
// a failed operation leaves its inputs untouched.
//
// Also: NaN, infinities, -0.0 and subnormals pass through data movement bit for bit and
// through arithmetic as IEEE 754 says, like the serial computation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include <typeshard/typeshard.hpp>

#include "reliability_support.hpp"

namespace ts = typeshard;
using namespace reliability;

namespace {

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_4 = ts::mesh<ts::axis("x", 4)>;
using mesh_8x2 = ts::mesh<ts::axis("x", 8), ts::axis("y", 2)>;
using rows_x = ts::spec<"x", ts::none>;
using spec_xy = ts::spec<"x", "y">;
using replicated = ts::spec<ts::none, ts::none>;

constexpr std::size_t huge = std::size_t{1} << 40;

// ---- snapshots of the inputs --------------------------------------------------------------------

// guard: the inputs of one row. watch(x) snapshots x (which must outlive the guard) and
// returns it; hold(x) keeps x in the guard, snapshots it and returns it (for inputs made
// inside a row); verify() checks every input against its snapshot.
class guard {
 public:
  template <class X>
  const X& hold(X x) {
    auto kept = std::make_shared<X>(std::move(x));
    owned_.push_back(kept);
    return watch(*kept);
  }
  template <class T, std::size_t R>
  const ts::host_tensor<T, R>& watch(const ts::host_tensor<T, R>& t) {
    checks_.push_back([&t, copy = t] { return same_bits(t, copy); });
    return t;
  }
  template <class T>
  const std::vector<T>& watch(const std::vector<T>& v) {
    checks_.push_back([&v, copy = v] { return v == copy; });
    return v;
  }
  template <class M>
  const ts::device_mesh<M>& watch(const ts::device_mesh<M>& m) {
    checks_.push_back([&m, copy = m.devices()] { return m.devices() == copy; });
    return m;
  }
  template <class T, class M, class S, class E, class U>
  const ts::sharded_array<T, M, S, E, U>& watch(const ts::sharded_array<T, M, S, E, U>& a) {
    std::vector<const T*> where(M::size);
    for (std::size_t p = 0; p < M::size; ++p) where[p] = a.local_data(p).data();
    checks_.push_back([&a, where, extents = a.extents(), copy = ts::to_host(a)] {
      for (std::size_t p = 0; p < M::size; ++p)
        if (a.local_data(p).data() != where[p]) return false;
      return a.extents() == extents && same_bits(ts::to_host(a), copy);
    });
    return a;
  }
  std::size_t watched() const { return checks_.size(); }
  bool verify() const {
    for (const auto& c : checks_)
      if (!c()) return false;
    return true;
  }

 private:
  std::vector<std::shared_ptr<void>> owned_;  // destroyed after checks_, which refer to it
  std::vector<std::function<bool()>> checks_;
};

// ---- the expected exception -----------------------------------------------------------------------

struct expectation {
  std::string type;                                      // for the failure message
  std::function<bool(const std::exception&)> matches;
};

template <class E>
expectation expect(const char* type) {
  return {type, [](const std::exception& e) { return dynamic_cast<const E*>(&e) != nullptr; }};
}

// A device_error whose original is an O.
template <class O>
expectation expect_device_error(const char* original_type) {
  // The name is built in the returned object (no std::string moved or added): g++ 12 sees a
  // bogus out-of-bounds memcpy in those once inlined (-Warray-bounds, GCC PR 105651).
  expectation e;
  e.type = "device_error nesting ";
  e.type.append(original_type);
  e.matches = [](const std::exception& x) {
    const auto* d = dynamic_cast<const ts::device_error*>(&x);
    if (d == nullptr) return false;
    try {
      std::rethrow_exception(d->original());
    } catch (const O&) {
      return true;
    } catch (...) {
      return false;
    }
  };
  return e;
}

struct bad_case {
  std::string name;
  expectation expected;
  std::vector<std::string> message;  // substrings: the problem, its numbers, the fix
  std::function<void(guard&)> run;
};

ts::host_tensor<float, 2> iota(std::size_t rows, std::size_t cols) {
  ts::host_tensor<float, 2> t({rows, cols});
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<float>(i) - 3.5f;
  return t;
}

struct opaque_pair {
  int a;
  int b;
};

}  // namespace

TEST_CASE("bad input: every run-time error names the problem and the fix, and leaves the inputs untouched",
          "[reliability][bad_input]") {
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_2x2> m{devices};
  ts::device_mesh<mesh_2x2> upper{devices, {4, 5, 6, 7}};
  ts::device_mesh<mesh_4> m4{devices};
  const auto h44 = iota(4, 4);
  const auto h46 = iota(4, 6);
  const auto h54 = iota(5, 4);
  const auto a44 = ts::device_put<rows_x>(m, h44);
  const auto a46 = ts::device_put<rows_x>(m, h46);
  const auto a54 = ts::device_put<rows_x>(m, h54);
  const auto b44 = ts::device_put<rows_x>(upper, h44);
  const auto c44 = ts::device_put<spec_xy>(m, h44);

  const std::vector<bad_case> table{
      // ---- devices and device lists ----
      {"a pool of zero devices", expect<ts::usage_error>("usage_error"),
       {"cpu_devices needs at least one device", "ts::cpu_devices devices{8}"},
       [](guard&) { ts::cpu_devices none{0}; }},
      {"a device list that is too short", expect<ts::device_mesh_error>("device_mesh_error"),
       {"Mesh('x': 2, 'y': 2) needs exactly 4 devices", "the device list has 3",
        "list one device per mesh position"},
       [&](guard& g) {
         ts::device_mesh<mesh_2x2> bad{devices, g.hold(std::vector<ts::device_id>{0, 1, 2})};
       }},
      {"an empty device list", expect<ts::device_mesh_error>("device_mesh_error"),
       {"needs exactly 4 devices", "the device list has 0"},
       [&](guard& g) {
         ts::device_mesh<mesh_2x2> bad{devices, g.hold(std::vector<ts::device_id>{})};
       }},
      {"a device that does not exist", expect<ts::device_mesh_error>("device_mesh_error"),
       {"device 9 (entry 3 of the device list) does not exist", "the backend has 8 devices, 0 to 7"},
       [&](guard& g) {
         ts::device_mesh<mesh_2x2> bad{devices, g.hold(std::vector<ts::device_id>{0, 1, 2, 9})};
       }},
      {"a device listed twice", expect<ts::device_mesh_error>("device_mesh_error"),
       {"device 1 appears twice in the device list (entries 1 and 2)",
        "each mesh position needs its own device"},
       [&](guard& g) {
         ts::device_mesh<mesh_2x2> bad{devices, g.hold(std::vector<ts::device_id>{0, 1, 1, 3})};
       }},
      {"a mesh larger than the pool", expect<ts::device_mesh_error>("device_mesh_error"),
       {"Mesh('x': 8, 'y': 2) needs 16 devices but the backend has 8",
        "create more devices or use a smaller mesh"},
       [&](guard&) { ts::device_mesh<mesh_8x2> bad{devices}; }},
      // ---- host data ----
      {"host data of the wrong size", expect<ts::shape_error>("shape_error"),
       {"host_tensor of shape (3, 4) needs 12 values, got 11", "pass exactly one value per element"},
       [](guard& g) {
         ts::host_tensor<float, 2> bad({3, 4}, g.hold(std::vector<float>(11, 1.0f)));
       }},
      {"extents whose product overflows size_t", expect<ts::shape_error>("shape_error"),
       {"overflows size_t", "use smaller extents"},
       [](guard&) { ts::host_tensor<float, 3> bad({huge, huge, huge}); }},
      {"extents whose element count fits size_t but not memory",
       expect<ts::shape_error>("shape_error"),
       {"host_tensor of shape (4611686018427387904,)", "more than fit in memory",
        "use smaller extents"},
       [](guard&) { ts::host_tensor<float, 1> bad({std::size_t{1} << 62}); }},
      {"host data whose extent differs from a static one",
       expect<ts::shape_error>("shape_error"),
       {"dimension 0 has extent 6 but the array type fixes it to 8",
        "pass data of that extent or make the extent ts::dyn"},
       [&](guard& g) {
         (void)ts::device_put<rows_x, ts::extents<8, ts::dyn>>(g.watch(m), g.hold(iota(6, 4)));
       }},
      {"make_block returning a block of the wrong shape",
       expect_device_error<ts::shape_error>("shape_error"),
       {"device_put: make_block returned a block of shape (3, 4)", "which have shape (2, 4)",
        "return exactly the slices asked for"},
       [&](guard& g) {
         (void)ts::device_put<rows_x>(g.watch(m), ts::shape<2>{4, 4},
                                      [](const ts::index_slices<2>&) { return iota(3, 4); });
       }},
      {"a global shape whose blocks overflow size_t",
       expect_device_error<ts::shape_error>("shape_error"),
       {"overflows size_t", "use smaller extents"},
       [&](guard& g) {
         (void)ts::device_put<rows_x>(g.watch(m), ts::shape<2>{huge, huge},
                                      [](const ts::index_slices<2>& ix) {
                                        return ts::host_tensor<float, 2>({ix[0].size(), ix[1].size()});
                                      });
       }},
      // ---- shapes that do not match ----
      {"elementwise operands of different shapes", expect<ts::shape_error>("shape_error"),
       {"operator+: the operands have shapes (4, 4) and (4, 6)", "which do not broadcast"},
       [&](guard& g) { (void)(g.watch(a44) + g.watch(a46)); }},
      {"zip of operands of different shapes", expect<ts::shape_error>("shape_error"),
       {"zip: the operands have shapes (4, 4) and (5, 4)"},
       [&](guard& g) { (void)ts::zip(g.watch(a44), g.watch(a54), [](float x, float y) { return x * y; }); }},
      {"matmul with different contracting extents", expect<ts::shape_error>("shape_error"),
       {"matmul: lhs has 4 columns", "rhs has 5 rows", "pass operands of matching inner extent"},
       [&](guard& g) { (void)ts::matmul(g.watch(a44), g.watch(a54)); }},
      {"batched matmul with different batch extents", expect<ts::shape_error>("shape_error"),
       {"matmul: batch dimension 0 has extent 2 in lhs but 3 in rhs", "the same batch extents"},
       [&](guard& g) {
         using batched = ts::spec<"x", ts::none, ts::none>;
         (void)ts::matmul(g.hold(ts::device_put<batched>(m, ts::host_tensor<float, 3>({2, 4, 6}, 1.0f))),
                          g.hold(ts::device_put<batched>(m, ts::host_tensor<float, 3>({3, 6, 4}, 1.0f))));
       }},
      {"shard_map over an extent its shards do not divide", expect<ts::shape_error>("shape_error"),
       {"shard_map: argument 0, dimension 0 has extent 5, not divisible by its 2 shards over 'x' (2)",
        "use a multiple of 2"},
       [&](guard& g) {
         const auto f = ts::shard_map<mesh_2x2, rows_x, rows_x>([](const auto& b) { return b; });
         (void)f(g.watch(a54));
       }},
      {"shard_map devices returning blocks of different shapes", expect<ts::shape_error>("shape_error"),
       {"shard_map: output 0", "every device must return blocks of equal shape"},
       [&](guard& g) {
         const auto f = ts::shard_map<mesh_2x2, rows_x, rows_x>(
             [](const ts::shard_context<mesh_2x2>& c, const auto& b) {
               using B = std::remove_cvref_t<decltype(b)>;
               return B(c, ts::shape<2>{2, 4 + c.position()});
             });
         (void)f(g.watch(a44));
       }},
      {"an elementwise operation on blocks of different shapes",
       expect_device_error<ts::shape_error>("shape_error"),
       {"operator+ of blocks of shapes (2, 4) and (3, 4)", "broadcast as NumPy's"},
       [&](guard& g) {
         const auto f = ts::shard_map<mesh_2x2, rows_x, rows_x>(
             [](const ts::shard_context<mesh_2x2>& c, const auto& b) {
               using B = std::remove_cvref_t<decltype(b)>;
               return b + B(c, ts::shape<2>{3, 4});
             });
         (void)f(g.watch(a44));
       }},
      {"a local matmul of blocks that do not fit", expect_device_error<ts::shape_error>("shape_error"),
       {"matmul of blocks of shapes (2, 4) and (2, 4): contracting extents 4 and 2 differ"},
       [&](guard& g) {
         const auto f = ts::shard_map<mesh_2x2, rows_x, rows_x>([](const auto& b) { return ts::matmul(b, b); });
         (void)f(g.watch(a44));
       }},
      {"a block whose extents overflow size_t", expect_device_error<ts::shape_error>("shape_error"),
       {"overflows size_t"},
       [&](guard& g) {
         const auto f = ts::shard_map<mesh_2x2, rows_x, rows_x>(
             [](const ts::shard_context<mesh_2x2>& c, const auto& b) {
               using B = std::remove_cvref_t<decltype(b)>;
               return B(c, ts::shape<2>{huge, huge});
             });
         (void)f(g.watch(a44));
       }},
      {"a block of more bytes than size_t can count", expect_device_error<ts::shape_error>("shape_error"),
       {"overflows size_t"},
       [&](guard& g) {
         const auto f = ts::shard_map<mesh_2x2, rows_x, rows_x>(
             [](const ts::shard_context<mesh_2x2>& c, const auto& b) {
               using B = std::remove_cvref_t<decltype(b)>;  // float: 2^62 elements, 2^64 bytes
               return B(c, ts::shape<2>{std::size_t{1} << 31, std::size_t{1} << 31});
             });
         (void)f(g.watch(a44));
       }},
      // ---- collectives called wrongly ----
      {"all_to_all over a dimension the group does not divide",
       expect_device_error<ts::shape_error>("shape_error"),
       {"all_to_all: split dimension 0 has extent 1, not divisible by the group size 2",
        "a multiple of the group size"},
       [&](guard& g) {
         const auto f = ts::shard_map<mesh_2x2, spec_xy, spec_xy>(
             [](const auto& b) { return ts::all_to_all<"x">(b, 0, 1); });
         (void)f(g.hold(ts::device_put<spec_xy>(m, iota(2, 4))));
       }},
      {"a collective along a dimension the block does not have",
       expect_device_error<ts::usage_error>("usage_error"),
       {"all_gather: dimension 5 of a block of rank 2", "name a dimension below the rank"},
       [&](guard& g) {
         const auto f = ts::shard_map<mesh_2x2, rows_x, rows_x>(
             [](const auto& b) { return ts::all_gather<"y">(b, 5); });
         (void)f(g.watch(a44));
       }},
      {"a ppermute pair outside the group", expect_device_error<ts::usage_error>("usage_error"),
       {"ppermute: the pair (0, 2) is outside a group of 2",
        "give each rank at most once as a source and once as a destination"},
       [&](guard& g) {
         const auto f = ts::shard_map<mesh_2x2, rows_x, rows_x>(
             [](const auto& b) { return ts::ppermute<"x">(b, {{0, 2}}); });
         (void)f(g.watch(a44));
       }},
      {"a psum of elements that cannot be added", expect_device_error<ts::usage_error>("usage_error"),
       {"cannot reduce elements of type opaque with sum", "reductions need arithmetic element types"},
       [&](guard& g) {
         const auto f = ts::shard_map<mesh_2x2, rows_x, rows_x>([](const auto& b) { return ts::psum<"y">(b); });
         (void)f(g.hold(ts::device_put<rows_x>(m, ts::host_tensor<opaque_pair, 2>({4, 2}, opaque_pair{1, 2}))));
       }},
      {"a collective called outside a per-device function", expect<ts::usage_error>("usage_error"),
       {"a collective was called outside a per-device function", "call it on local blocks inside ts::shard_map"},
       [&](guard& g) {
         const ts::shard_context<mesh_2x2> context(g.watch(m), 0);
         const ts::block<float, 2, mesh_2x2, ts::vary<mesh_2x2, "x">> b(context, ts::shape<2>{2, 2}, 1.0f);
         (void)ts::psum<"x">(b);
       }},
      {"a multi-device operation inside a per-device function",
       expect_device_error<ts::usage_error>("usage_error"),
       {"a multi-device operation was started from inside a per-device function",
        "move the operation out of the function"},
       [&](guard& g) {
         const auto f = ts::shard_map<mesh_2x2, rows_x, rows_x>([&](const auto& b) {
           (void)ts::to_host(a46);
           return b;
         });
         (void)f(g.watch(a44));
       }},
      // ---- arrays on different devices ----
      {"elementwise operands on different devices", expect<ts::device_mesh_error>("device_mesh_error"),
       {"operator+: the operands live on different devices", "on devices [0, 1, 2, 3]",
        "on devices [4, 5, 6, 7]", "ts::reshard"},
       [&](guard& g) { (void)(g.watch(a44) + g.watch(b44)); }},
      {"matmul operands on different devices", expect<ts::device_mesh_error>("device_mesh_error"),
       {"matmul: the operands live on different devices", "ts::device_put(x, other.device_mesh())"},
       [&](guard& g) { (void)ts::matmul(g.watch(a44), g.watch(b44)); }},
      {"shard_map arguments on different devices", expect<ts::device_mesh_error>("device_mesh_error"),
       {"shard_map: argument 1 lives on", "put every argument on the same devices"},
       [&](guard& g) {
         const auto f = ts::shard_map<mesh_2x2, ts::specs<rows_x, rows_x>, rows_x>(
             [](const auto& x, const auto& y) { return x + y; });
         (void)f(g.watch(a44), g.watch(b44));
       }},
      // (reshard onto other devices is no error: it moves the array, see unit.device_put_move)
  };

  for (const bad_case& c : table) {
    INFO("case: " << c.name << " (expects " << c.expected.type << ")");
    watchdog dog("bad input: " + c.name);
    guard g;
    bool threw = false;
    try {
      c.run(g);
    } catch (const std::exception& e) {
      threw = true;
      const std::string what = e.what();
      INFO("message: " << what);
      CHECK(c.expected.matches(e));
      CHECK(dynamic_cast<const ts::error*>(&e) != nullptr);
      CHECK(starts_with_typeshard(what));
      for (const std::string& part : c.message) {
        INFO("the message should contain: " << part);
        CHECK(contains(what, part));
      }
    }
    CHECK(threw);
    CHECK(g.verify());
  }
  // The pool still works after all of that.
  CHECK(ts::to_host(a44 + a44) == ts::to_host(a44 * 2.0f));
}

// ---- NaN, infinities, -0.0, subnormals ------------------------------------------------------------

namespace {

// A 4 x 4 tensor full of special values, each with a distinct bit pattern.
ts::host_tensor<double, 2> specials() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const double tiny = std::numeric_limits<double>::denorm_min();
  std::uint64_t payload_bits = 0x7ff8000000001234ull;  // a NaN with a payload
  double payload;
  std::memcpy(&payload, &payload_bits, sizeof payload);
  return ts::host_tensor<double, 2>(
      {4, 4}, {nan, -nan, inf, -inf, -0.0, 0.0, tiny, -tiny, payload, 1.0, -1.0, 1e308, -1e308,
               std::numeric_limits<double>::min(), 2.5, nan});
}

}  // namespace

TEST_CASE("bad input: NaN, infinities, -0.0 and subnormals pass through unchanged",
          "[reliability][bad_input][ieee]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto h = specials();
  const auto a = ts::device_put<spec_xy>(m, h);

  SECTION("data movement is bit-exact: device_put, to_host, reshard, all_gather, all_to_all, ppermute") {
    CHECK(same_bits(ts::to_host(a), h));
    CHECK(same_bits(ts::to_host(ts::reshard<replicated>(a)), h));
    CHECK(same_bits(ts::to_host(ts::reshard<ts::spec<"y", "x">>(a)), h));
    CHECK(same_bits(ts::to_host(ts::reshard<ts::spec<ts::axes("x", "y"), ts::none>>(a)), h));
    const auto gathered = ts::shard_map<mesh_2x2, spec_xy, replicated>(
        [](const auto& b) { return ts::all_gather<"y">(ts::all_gather<"x">(b, 0), 1); })(a);
    // Every device's copy, not only the primary one, holds the exact bits.
    for (const auto& s : gathered.addressable_shards()) CHECK(same_bits(s.to_host(), h));
    // Columns over "x" to rows over "x": split the full rows, concatenate the columns.
    const auto swapped = ts::shard_map<mesh_2x2, ts::spec<ts::none, "x">, rows_x>(
        [](const auto& b) { return ts::all_to_all<"x">(b, 0, 1); })(a);
    CHECK(same_bits(ts::to_host(swapped), h));
    const auto round = ts::shard_map<mesh_2x2, spec_xy, spec_xy>(
        [](const auto& b) { return ts::shift<"x">(ts::shift<"x">(b, 1), 1); })(a);
    CHECK(same_bits(ts::to_host(round), h));
  }

  SECTION("arithmetic follows IEEE 754 as the serial computation does") {
    auto expect_each = [&](const auto& result, auto f) {
      const auto got = ts::to_host(result);
      for (std::size_t i = 0; i < h.size(); ++i) {
        const double want = f(h.data()[i]);
        const double have = got.data()[i];
        INFO("element " << i << ": input " << h.data()[i] << ", want " << want << ", have " << have);
        if (std::isnan(want)) {
          CHECK(std::isnan(have));
        } else {
          CHECK(std::memcmp(&want, &have, sizeof want) == 0);
        }
      }
    };
    expect_each(a + a, [](double v) { return v + v; });
    expect_each(a * 0.5, [](double v) { return v * 0.5; });
    expect_each(ts::relu(a), [](double v) { return v < 0 ? 0.0 : v; });
    // maximum and minimum take a NaN from either side (numpy's and JAX's maximum).
    const auto flipped = ts::device_put<spec_xy>(m, [&] {
      auto t = h;
      std::reverse(t.values().begin(), t.values().end());
      return t;
    }());
    const auto hf = ts::to_host(flipped);
    auto both = [&](auto f) {
      return [&, f](std::size_t i) { return f(h.data()[i], hf.data()[i]); };
    };
    auto expect_pairwise = [&](const auto& result, auto want_at) {
      const auto got = ts::to_host(result);
      for (std::size_t i = 0; i < h.size(); ++i) {
        const double want = want_at(i), have = got.data()[i];
        INFO("element " << i << ": inputs " << h.data()[i] << " and " << hf.data()[i] << ", want "
                        << want << ", have " << have);
        if (std::isnan(want))
          CHECK(std::isnan(have));
        else
          CHECK(want == have);
      }
    };
    const auto nan_max = [](double x, double y) {
      return std::isnan(x) || std::isnan(y) ? std::numeric_limits<double>::quiet_NaN() : std::max(x, y);
    };
    const auto nan_min = [](double x, double y) {
      return std::isnan(x) || std::isnan(y) ? std::numeric_limits<double>::quiet_NaN() : std::min(x, y);
    };
    expect_pairwise(ts::maximum(a, flipped), both(nan_max));
    expect_pairwise(ts::maximum(flipped, a), both(nan_max));
    expect_pairwise(ts::minimum(a, flipped), both(nan_min));
    expect_pairwise(ts::minimum(flipped, a), both(nan_min));
    expect_pairwise(ts::shard_map<mesh_2x2, ts::specs<spec_xy, spec_xy>, spec_xy>(
                        [](const auto& x, const auto& y) { return ts::maximum(y, x); })(a, flipped),
                    both(nan_max));
    // psum over "x" of a replicated array: each element added to itself, in rank order.
    const auto r = ts::reshard<replicated>(a);
    expect_each(ts::shard_map<mesh_2x2, replicated, replicated>([](const auto& b) { return ts::psum<"x">(b); })(r),
                [](double v) { return v + v; });
    // pmax / pmin of equal values: the value itself, NaN included.
    expect_each(ts::shard_map<mesh_2x2, replicated, replicated>([](const auto& b) { return ts::pmax<"x", "y">(b); })(r),
                [](double v) { return v; });
    expect_each(ts::shard_map<mesh_2x2, replicated, replicated>([](const auto& b) { return ts::pmin<"x", "y">(b); })(r),
                [](double v) { return v; });
  }

  SECTION("a NaN on any one device makes psum, pmax and pmin NaN there, as in JAX") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (std::size_t holder = 0; holder < 4; ++holder) {
      INFO("the NaN is on mesh position " << holder);
      // Position p holds p + 1 everywhere, except the holder's element 0, which is NaN.
      const auto x = ts::device_put<ts::spec<ts::axes("x", "y")>>(
          m, ts::shape<1>{8}, [&](const ts::index_slices<1>& ix) {
            const std::size_t p = ix[0].start / 2;
            ts::host_tensor<double, 1> t({2}, static_cast<double>(p + 1));
            if (p == holder) t(0) = nan;
            return t;
          });
      const auto reduce = [&](auto op) {
        return ts::to_host(ts::shard_map<mesh_2x2, ts::spec<ts::axes("x", "y")>, ts::spec<ts::axes("x", "y")>>(op)(x));
      };
      const auto s = reduce([](const auto& b) { return ts::psum<"x", "y">(b); });
      const auto hi = reduce([](const auto& b) { return ts::pmax<"x", "y">(b); });
      const auto lo = reduce([](const auto& b) { return ts::pmin<"x", "y">(b); });
      for (std::size_t p = 0; p < 4; ++p) {
        CHECK(std::isnan(s(2 * p)));
        CHECK(s(2 * p + 1) == 10.0);
        CHECK(std::isnan(hi(2 * p)));
        CHECK(hi(2 * p + 1) == 4.0);
        CHECK(std::isnan(lo(2 * p)));
        CHECK(lo(2 * p + 1) == 1.0);
      }
    }
  }
}
