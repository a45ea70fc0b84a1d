// What happens when devices fail or disagree during collectives on the thread pool: the
// caller gets the failure (as device_error naming the device), the peers blocked in a
// collective are released, nothing hangs, and the pool runs the next operation normally.
#include <catch2/catch.hpp>

#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

namespace {

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_8 = ts::mesh<ts::axis("i", 8)>;

std::vector<std::size_t> iota_positions(std::size_t n) {
  std::vector<std::size_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

// A psum over all n devices of a run, on the backend directly: each device contributes i.
void sum_positions(ts::cpu_devices& devices, std::size_t n, std::vector<long>& out,
                   std::size_t throwing = static_cast<std::size_t>(-1), int where = 0) {
  const std::vector<std::size_t> ids = iota_positions(n);
  out.assign(n, -1);
  devices.run(ids, [&](std::size_t i) {
    long v = static_cast<long>(i);
    if (i == throwing && where == 0) throw std::runtime_error("failed before the collective");
    devices.all_reduce({ids, i}, ts::element_type_of<long>, ts::reduce_op::sum, &v, &v, 1);
    if (i == throwing && where == 1) throw std::runtime_error("failed between collectives");
    devices.all_reduce({ids, i}, ts::element_type_of<long>, ts::reduce_op::sum, &v, &v, 1);
    out[i] = v;
  });
}

}  // namespace

TEST_CASE("collectives: a device that throws releases its peers; the pool stays usable",
          "[collectives][failure]") {
  ts::cpu_devices devices{8};
  std::vector<long> out;
  for (int where : {0, 1}) {
    for (std::size_t throwing : {std::size_t{0}, std::size_t{5}, std::size_t{7}}) {
      INFO("device " << throwing << (where == 0 ? " before" : " between") << " collectives");
      try {
        sum_positions(devices, 8, out, throwing, where);
        FAIL("no exception");
      } catch (const ts::device_error& e) {
        CHECK(e.device() == throwing);
        CHECK(std::string(e.what()).find("failed") != std::string::npos);
        CHECK_THROWS_AS(std::rethrow_exception(e.original()), std::runtime_error);
      }
      sum_positions(devices, 8, out);
      // 0 + ... + 7 = 28; summed again over 8 devices: 224.
      for (long v : out) CHECK(v == 224);
    }
  }
}

TEST_CASE("collectives: a failure in one group does not corrupt another group's collective",
          "[collectives][failure]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto a = ts::device_put<ts::spec<"x", "y">>(m, ts::host_tensor<int, 2>({2, 2}, {1, 2, 3, 4}));
  // Device 3 fails, so device 2 is released from its group {2, 3}. The group {0, 1}
  // either completes its psum (then with the right sum) or is released too, if the failure
  // came first (a failed run aborts all its collectives).
  std::vector<int> sums(4, 0);
  const auto f = ts::shard_map<mesh_2x2, ts::spec<"x", "y">, ts::spec<"x", "y">>(
      [&](const ts::shard_context<mesh_2x2>& c, const auto& b) {
        if (c.position() == 3) throw std::logic_error("device 3 fails");
        auto s = ts::psum<"y">(b);
        sums[c.position()] = s(0, 0);
        return ts::all_gather<"y">(s, 1);  // more work after the failure elsewhere
      });
  try {
    (void)f(a);
    FAIL("no exception");
  } catch (const ts::device_error& e) {
    CHECK(e.device() == 3);
  }
  for (std::size_t p : {0, 1}) CHECK((sums[p] == 0 || sums[p] == 3));
  CHECK(sums[2] == 0);
}

TEST_CASE("collectives: devices that call different collectives get a usage_error, not a hang",
          "[collectives][failure]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto a = ts::device_put<ts::spec<"x", "y">>(m, ts::host_tensor<int, 2>({2, 2}, {1, 2, 3, 4}));
  const int pmax_line = __LINE__ + 3;  // the lines of the two calls, for the report
  const auto f = ts::shard_map<mesh_2x2, ts::spec<"x", "y">, ts::spec<"x", "y">>(
      [](const ts::shard_context<mesh_2x2>& c, const auto& b) {
        if (c.position() == 1) return ts::pmax<"y">(b);  // its peer calls psum
        return ts::psum<"y">(b);
      });
  try {
    (void)f(a);
    FAIL("no exception");
  } catch (const ts::device_error& e) {
    CHECK_THROWS_AS(std::rethrow_exception(e.original()), ts::usage_error);
    CHECK(std::string(e.what()).find("same collectives in the same order") != std::string::npos);
    // Each device's collective, group and call site (file:line of the user's call).
    const std::string what = e.what();
    const std::string file = "collectives_failures.cpp:";
    CHECK_THAT(what, Catch::Contains("device 1 called all_reduce over \"y\" (group of devices "
                                     "[0, 1]) at ") &&
                         Catch::Contains(file + std::to_string(pmax_line)) &&
                         Catch::Contains(file + std::to_string(pmax_line + 1)));
  }
  // Blocks of different sizes in one all_gather: also a usage_error. (Devices that call
  // collectives over different groups in different orders deadlock, as MPI ranks would:
  // SPMD code never does that.)
  const auto g = ts::shard_map<mesh_2x2, ts::spec<ts::none, ts::axes("x", "y")>,
                               ts::spec<ts::none, ts::axes("x", "y")>>(
      [](const ts::shard_context<mesh_2x2>& c, const auto& b) {
        const std::remove_cvref_t<decltype(b)> other(c, {1, 1});
        return ts::all_gather<"x", "y">(c.position() == 0 ? other : b, 0);  // shapes differ
      });
  const auto wide = ts::device_put<ts::spec<ts::none, ts::axes("x", "y")>>(
      m, ts::host_tensor<int, 2>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}));
  CHECK_THROWS_AS(g(wide), ts::device_error);
}

TEST_CASE("collectives: called outside a per-device function is a usage_error", "[collectives][failure]") {
  ts::cpu_devices devices{2};
  const std::vector<std::size_t> ids{0, 1};
  int v = 1;
  CHECK_THROWS_AS(devices.all_reduce({ids, 0}, ts::element_type_of<int>, ts::reduce_op::sum, &v, &v, 1),
                  ts::usage_error);
  // A multi-device operation from inside a device is refused too.
  CHECK_THROWS_AS(devices.run(ids, [&](std::size_t) { devices.run(ids, [](std::size_t) {}); }),
                  ts::device_error);
}

TEST_CASE("collectives: a report names the call site of the operation the user called",
          "[collectives][failure]") {
  ts::cpu_devices devices{2};
  const std::vector<ts::device_id> ids{0, 1};
  const std::vector<std::size_t> members{0, 1};
  // Called on the backend directly: each device's own call is named.
  const auto mismatch = [&](std::size_t i) {
    int v[2] = {1, 1};
    devices.all_reduce({members, i}, ts::element_type_of<int>, ts::reduce_op::sum, v, v,
                       i + 1);  // device 1 sums two elements, device 0 one
  };
  const int call_line = __LINE__ - 3;
  const std::string at = "collectives_failures.cpp:";
  CHECK_THROWS_WITH(devices.run(ids, mismatch),
                    Catch::Contains("device 0 called all_reduce over \"\" (group of devices "
                                    "[0, 1]) at ") &&
                        Catch::Contains(at + std::to_string(call_line) + "; device 1"));
  // Inside an entry point (here a scope as ts::reshard opens one on the calling thread): its
  // site, handed to the device threads with the run, wins over the library's inner calls.
  const int outer_line = __LINE__ + 1;
  const ts::detail::source_site outer = ts::detail::source_site::current();
  {
    const ts::detail::call_site_scope scope(outer);
    CHECK_THROWS_WITH(devices.run(ids, mismatch),
                      Catch::Contains(at + std::to_string(outer_line) + "; device 1") &&
                          !Catch::Contains(at + std::to_string(call_line)));
  }
  CHECK(ts::detail::current_call_site() == nullptr);
}

TEST_CASE("collectives: random failures under load never hang and never leak into later runs",
          "[collectives][failure]") {
  const unsigned seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_8> m{devices};
  const auto a = ts::device_put<ts::spec<"i">>(m, ts::host_tensor<int, 1>({64}, 1));
  for (int trial = 0; trial < 40; ++trial) {
    const std::size_t victim = std::uniform_int_distribution<std::size_t>(0, 15)(rng);  // >= 8: none
    const int step = std::uniform_int_distribution<int>(0, 3)(rng);
    const auto f = ts::shard_map<mesh_8, ts::spec<"i">, ts::spec<"i">>(
        [&](const ts::shard_context<mesh_8>& c, const auto& b) {
          // Typed as varying over "i" (as b is): the gathered values widen into it.
          std::remove_cvref_t<decltype(b)> x = ts::all_gather<"i">(b, 0);
          for (int s = 0; s < 4; ++s) {
            if (c.position() == victim && s == step) throw std::runtime_error("victim");
            x = ts::all_gather<"i">(ts::psum_scatter<"i">(x, 0), 0);
          }
          return ts::psum_scatter<"i">(x, 0);
        });
    if (victim < 8) {
      CHECK_THROWS_AS(f(a), ts::device_error);
    } else {
      // Four rounds of psum_scatter + all_gather over 8 devices, then a last psum_scatter.
      const auto r = ts::to_host(f(a));
      for (int v : r.values()) CHECK(v == 8 * 8 * 8 * 8 * 8);
    }
  }
}

TEST_CASE("collectives: devices that disagree on the groups or skip a collective get an error, not a hang",
          "[collectives][failure]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto a = ts::device_put<ts::spec<"x", "y">>(m, ts::host_tensor<int, 2>({2, 2}, {1, 2, 3, 4}));
  using both = ts::spec<"x", "y">;
  // Devices 0 and 3 sum over x first, 1 and 2 over y first: 0 waits for 2 in an x group,
  // 2 for 3 in a y group, 3 for 1 in an x group, 1 for 0 in a y group: a cycle. (Other
  // orders can be harmless: groups meet independently.)
  const int crossed_line = __LINE__ + 3;  // the line of the first psums, for the report
  const auto crossed = ts::shard_map<mesh_2x2, both, both>(
      [](const ts::shard_context<mesh_2x2>& c, const auto& b) {
        if (c.position() == 0 || c.position() == 3) return ts::psum<"y">(ts::psum<"x">(b));
        return ts::psum<"x">(ts::psum<"y">(b));
      });
  // The report names each device's pending collective, its group and its call site.
  const std::string at = "collectives_failures.cpp:";
  CHECK_THROWS_WITH(
      crossed(a),
      Catch::Contains("deadlock") &&
          Catch::Contains("device 0 waits in all_reduce over \"x\" (group of devices [0, 2]) "
                          "at ") &&
          Catch::Contains("device 1 waits in all_reduce over \"y\" (group of devices [0, 1]) "
                          "at ") &&
          Catch::Contains(at + std::to_string(crossed_line) + ";") &&
          Catch::Contains(at + std::to_string(crossed_line + 1) + ";"));
  // Device 3 skips the psum its group partner waits in.
  const auto skipped = ts::shard_map<mesh_2x2, both, both>(
      [](const ts::shard_context<mesh_2x2>& c, const auto& b) {
        if (c.position() == 3) return ts::pvary<"y">(b);
        return ts::pvary<"y">(ts::psum<"y">(b));
      });
  CHECK_THROWS_WITH(skipped(a), Catch::Contains("deadlock") &&
                                    Catch::Contains("device 2 waits in all_reduce over \"y\"") &&
                                    Catch::Contains("3 devices returned from the function"));
  // The pool is fine afterwards.
  const auto fine = ts::shard_map<mesh_2x2, both, both>(
      [](const auto& b) { return ts::pvary<"x", "y">(ts::psum<"x", "y">(b)); });
  CHECK(ts::to_host(fine(a)) == ts::host_tensor<int, 2>({2, 2}, 10));
}
