// The checks every backend shares (backend::run and the collectives check their arguments
// once, in the base class, before the backend's own primitive): the MPI backend and the
// thread pool reject the same bad calls with the same exception and the same message.
// Every bad call is made inside a per-device function and caught there (an exception that
// escaped it would abort the MPI job); none of them reaches MPI, so none can hang.
#include "support.hpp"

#include <cstddef>
#include <complex>
#include <functional>
#include <string>
#include <vector>

namespace {

namespace ts = typeshard;

// What a call threw: the exception's kind and message, or "" when it threw nothing.
struct rejection {
  std::string kind;
  std::string message;
  friend bool operator==(const rejection&, const rejection&) = default;
};

template <class F>
rejection rejection_of(F&& f) {
  try {
    f();
  } catch (const ts::device_mesh_error& e) {
    return {"device_mesh_error", e.what()};
  } catch (const ts::usage_error& e) {
    return {"usage_error", e.what()};
  } catch (const std::exception& e) {
    return {"other", e.what()};
  }
  return {};
}

// A bad collective call, made by the device at run position `me` of a run over `n` devices.
using bad_call = std::function<void(ts::backend&, std::size_t me, std::size_t n)>;

// What `call` throws inside a per-device function of `b` running on device `d` alone.
rejection inside_body(ts::backend& b, ts::device_id d, const bad_call& call) {
  rejection seen{"not run", ""};
  const ts::device_id devices[] = {d};
  b.run(devices, [&](std::size_t i) { seen = rejection_of([&] { call(b, i, 1); }); });
  return seen;
}

const float in[4] = {1, 2, 3, 4};
float out[16];

const std::vector<std::pair<std::string, bad_call>>& bad_calls() {
  static const std::vector<std::pair<std::string, bad_call>> calls = {
      {"a member listed twice",
       [](ts::backend& b, std::size_t me, std::size_t) {
         const std::size_t members[] = {me, me};
         b.all_reduce({members, 0}, ts::element_type_of<float>, ts::reduce_op::sum, in, out, 4);
       }},
      {"a rank that does not name the caller",
       [](ts::backend& b, std::size_t me, std::size_t) {
         const std::size_t members[] = {me};
         b.all_reduce({members, 1}, ts::element_type_of<float>, ts::reduce_op::sum, in, out, 4);
       }},
      {"a member outside the run",
       [](ts::backend& b, std::size_t me, std::size_t n) {
         const std::size_t members[] = {me, n + 3};
         b.all_reduce({members, 0}, ts::element_type_of<float>, ts::reduce_op::sum, in, out, 4);
       }},
      {"counts that do not match the group",
       [](ts::backend& b, std::size_t me, std::size_t) {
         const std::size_t members[] = {me};
         const std::size_t counts[] = {1, 1, 1};
         b.all_gather({members, 0}, ts::element_type_of<float>, in, out, 1, counts);
       }},
      {"a permute peer outside the group",
       [](ts::backend& b, std::size_t me, std::size_t) {
         const std::size_t members[] = {me};
         b.permute({members, 0}, ts::element_type_of<float>, in, 4, 5, out, 4, ts::no_peer);
       }},
      {"a reduction of opaque elements",
       [](ts::backend& b, std::size_t me, std::size_t) {
         const std::size_t members[] = {me};
         b.all_reduce({members, 0}, ts::element_type{ts::element_kind::opaque, 4},
                      ts::reduce_op::sum, in, out, 4);
       }},
      {"max over complex elements",
       [](ts::backend& b, std::size_t me, std::size_t) {
         const std::size_t members[] = {me};
         const std::size_t counts[] = {1};
         b.reduce_scatter({members, 0}, ts::element_type_of<std::complex<float>>,
                          ts::reduce_op::max, in, out, 1, counts);
       }},
      {"all_to_all pieces of different sizes",
       [](ts::backend& b, std::size_t me, std::size_t) {
         const std::size_t members[] = {me};
         b.all_to_all({members, 0}, ts::element_type_of<float>, in, out, {1, 2, 2, 2},
                      {1, 3, 3, 3});
       }},
      {"a multi-device operation inside a per-device function",
       [](ts::backend& b, std::size_t, std::size_t) {
         const ts::device_id d[] = {0};
         b.run(d, [](std::size_t) {});
       }},
  };
  return calls;
}

}  // namespace

TEST_CASE("both backends reject the same bad collective calls alike", "[mpi][checks]") {
  ts::cpu_devices threads{static_cast<std::size_t>(mpi_test::size())};
  const auto me = static_cast<ts::device_id>(mpi_test::rank());
  for (const auto& [what, call] : bad_calls()) {
    INFO(what);
    const rejection on_mpi = inside_body(mpi_test::devices(), me, call);
    const rejection on_threads = inside_body(threads, me, call);
    CHECK(on_mpi.kind == "usage_error");
    CHECK(on_mpi.message.rfind("typeshard: ", 0) == 0);
    CHECK(on_mpi == on_threads);
  }
}

TEST_CASE("both backends reject bad device lists and calls outside a run alike",
          "[mpi][checks]") {
  ts::cpu_devices threads{static_cast<std::size_t>(mpi_test::size())};
  const std::size_t n = static_cast<std::size_t>(mpi_test::size());
  auto nothing = [](std::size_t) {};
  for (ts::backend* b : {static_cast<ts::backend*>(&mpi_test::devices()),
                         static_cast<ts::backend*>(&threads)}) {
    const std::vector<ts::device_id> repeated{0, 0};
    const rejection twice = rejection_of([&] { b->run(repeated, nothing); });
    CHECK(twice == rejection{"device_mesh_error",
                             "typeshard: device 0 appears twice in one operation; list each "
                             "device once"});
    const std::vector<ts::device_id> missing{n};
    const rejection absent = rejection_of([&] { b->run(missing, nothing); });
    CHECK(absent.kind == "device_mesh_error");
    CHECK(absent.message.rfind("typeshard: device " + std::to_string(n) + " does not exist: ",
                               0) == 0);
    const std::size_t members[] = {0};
    const rejection outside = rejection_of([&] {
      b->all_reduce({members, 0}, ts::element_type_of<float>, ts::reduce_op::sum, in, out, 1);
    });
    CHECK(outside == rejection{"usage_error",
                               "typeshard: a collective was called outside a per-device "
                               "function; call it on local blocks inside ts::shard_map (or a "
                               "backend run() body)"});
  }
}
