// ts::communication_recorder: what a region of a program communicated. The recorded
// collectives must be exactly the ones the plans list (kind, axes, order), with the bytes the
// blocks have; a Megatron MLP forward records its one all-reduce over "model" and nothing
// else; shard_map's collectives are recorded with their axes;
// recorders nest and clear.
#include <catch2/catch.hpp>

#include <cstddef>
#include <sstream>
#include <string>
#include <type_traits>

#include <typeshard/ops/communication_report.hpp>
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

namespace {

using mesh_2x4 = ts::mesh<ts::axis("data", 2), ts::axis("model", 4)>;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;

ts::host_tensor<float, 2> ramp(std::size_t r, std::size_t c, float scale) {
  ts::host_tensor<float, 2> t({r, c});
  for (std::size_t i = 0; i < t.size(); ++i)
    t.data()[i] = scale * static_cast<float>(static_cast<int>(i % 7) - 3);
  return t;
}

std::string axes_text(const ts::dim_spec& d) {
  std::string s;
  for (std::size_t i = 0; i < d.count; ++i) {
    if (i > 0) s += ',';
    s.append(d.axes[i].chars, d.axes[i].length);
  }
  return s;
}

// Reshards From -> To on the 2x2 mesh (12 x 8 floats, even) under a recorder and checks the
// recording against the plan's steps, collective by collective.
template <class From, class To>
void check_reshard_recorded() {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto a = ts::device_put<From>(m, ramp(12, 8, 1.0f));
  using plan = ts::reshard_plan<mesh_2x2, From, To, ts::extents<12, 8>>;
  ts::communication_recorder rec;
  const auto b = ts::reshard<To>(a);
  const ts::communication_report r = rec.report();
  INFO(plan::describe());
  std::size_t k = 0;
  for (const auto& s : plan::steps) {
    if (s.kind == ts::step_kind::slice) continue;
    REQUIRE(k < r.size());
    const ts::communication_record& c = r.collectives()[k++];
    CHECK(c.name() == ts::to_string(s.kind));
    CHECK(c.axes == axes_text(s.axes));
    CHECK(c.group_size == ts::detail::group_size<mesh_2x2>(s.axes));
  }
  CHECK(k == r.size());
  CHECK(r.position() == 0);
  CHECK(r.devices_observed() == (r.empty() ? 0u : 4u));
  (void)b;
}


}  // namespace

TEST_CASE("communication report: a reshard records exactly its plan's collectives", "[comm]") {
  using ts::none;
  check_reshard_recorded<ts::spec<"x", none>, ts::spec<none, none>>();     // all_gather x
  check_reshard_recorded<ts::spec<"x", "y">, ts::spec<none, none>>();      // two all_gathers
  check_reshard_recorded<ts::spec<"x", none>, ts::spec<none, "x">>();      // all_to_all x
  check_reshard_recorded<ts::spec<ts::axes("x", "y"), none>, ts::spec<"y", "x">>();
  check_reshard_recorded<ts::spec<none, none>, ts::spec<"y", "x">>();      // slices: nothing
  check_reshard_recorded<ts::spec<"x", none>, ts::spec<"x", none>>();      // no step at all
}

TEST_CASE("communication report: a Megatron MLP forward all-reduces once over model", "[comm]") {
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_2x4> m{devices};
  constexpr std::size_t B = 8, D = 16, F = 32;
  using rows_over_data = ts::spec<"data", ts::none>;
  const auto X = ts::device_put<rows_over_data>(m, ramp(B, D, 0.5f));
  const auto W1 = ts::device_put<ts::spec<ts::none, "model">>(m, ramp(D, F, 0.25f));
  const auto W2 = ts::device_put<ts::spec<"model", ts::none>>(m, ramp(F, D, 0.125f));

  ts::communication_recorder rec;
  const auto H = ts::relu(ts::einsum<"bd,df->bf">(X, W1));  // P("data", "model"): local
  const auto U = ts::einsum<"bf,fd->bd">(H, W2);            // unreduced over "model"
  REQUIRE(rec.report().empty());                            // nothing communicated yet
  const auto Y = ts::reshard<rows_over_data>(U);            // the all-reduce
  const ts::communication_report r = rec.report();

  REQUIRE(r.size() == 1);
  CHECK(r.count(ts::step_kind::psum, "model") == 1);
  CHECK(r.count(ts::collective_kind::all_reduce) == 1);
  CHECK(r.count(ts::step_kind::psum, "data") == 0);
  CHECK(r.count(ts::step_kind::all_gather) == 0);
  const ts::communication_record& c = r.collectives()[0];
  CHECK(c.group_size == 4);
  CHECK(c.block_bytes == B / 2 * D * sizeof(float));  // the device's (B/2) x D block
  CHECK(c.bytes_received == 2 * c.block_bytes * 3 / 4);
  CHECK(c.seconds >= 0.0);
  CHECK(r.devices_observed() == 8);
  CHECK(r.total_bytes_received() == 8 * c.bytes_received);
  (void)Y;
}

TEST_CASE("communication report: shard_map's collectives are recorded with their axes", "[comm]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  using rows_x = ts::spec<"x", ts::none>;
  const auto a = ts::device_put<rows_x>(m, ramp(4, 6, 1.0f));
  ts::communication_recorder rec;
  const auto f = ts::shard_map<mesh_2x2, rows_x, ts::spec<ts::none, ts::none>>(
      [](const auto& blk) { return ts::all_gather<"x">(ts::psum<"y">(blk), 0); });
  const auto g = f(a);
  // The thread pool holds every shard: to_host copies them in place, no collective (an MPI
  // rank gathers them: an all_gather labelled "to_host").
  const auto h = ts::to_host(a);
  const ts::communication_report r = rec.report();
  INFO(r);
  REQUIRE(r.size() == 2);
  CHECK(r.collectives()[0].name() == "psum");
  CHECK(r.collectives()[0].axes == "y");
  CHECK(r.collectives()[1].name() == "all_gather");
  CHECK(r.collectives()[1].axes == "x");
  CHECK(r.count(ts::collective_kind::all_gather) == 1);
  CHECK(r.count(ts::collective_kind::all_gather, "y") == 0);
  CHECK(h.size() == 4 * 6);
}

TEST_CASE("communication report: recorders nest, clear, and stop at their scope's end", "[comm]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto a = ts::device_put<ts::spec<"x", "y">>(m, ramp(8, 8, 1.0f));
  ts::communication_recorder outer;
  {
    ts::communication_recorder inner;
    (void)ts::reshard<ts::spec<ts::none, "y">>(a);  // all_gather over x
    CHECK(inner.report().size() == 1);
  }
  (void)ts::reshard<ts::spec<"x", ts::none>>(a);  // all_gather over y: the outer one only
  CHECK(outer.report().size() == 2);
  CHECK(outer.report().count(ts::step_kind::all_gather, "x") == 1);
  CHECK(outer.report().count(ts::step_kind::all_gather, "y") == 1);
  outer.clear();
  CHECK(outer.report().empty());
  CHECK(ts::detail::installed_collective_observer.load() == &outer);
}

TEST_CASE("communication report: printed one line a collective", "[comm]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  const auto a = ts::device_put<ts::spec<"x", ts::none>>(m, ramp(8, 4, 1.0f));
  ts::communication_recorder rec;
  (void)ts::reshard<ts::spec<ts::none, ts::none>>(a);
  std::ostringstream os;
  os << rec.report();
  const std::string text = os.str();
  INFO(text);
  CHECK(text.find("1 collectives, as run by the device at mesh position 0 (4 devices observed)") !=
        std::string::npos);
  CHECK(text.find("all_gather") != std::string::npos);
  CHECK(text.find("128 B") != std::string::npos);  // the gathered 8 x 4 floats
}
