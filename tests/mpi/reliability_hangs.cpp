// The thread pool's reliability_hangs cases on MPI ranks (issue 41), every rank running every
// test case: softmax and log_softmax of empty arrays whatever their other extents, and with
// an empty block on some ranks beside full ones (those ranks still take part in the max and
// sum collectives); max and min over an empty dimension (the identities); and a device mesh
// or array used after its (adopting) mpi_devices is destroyed: a usage_error on every rank.
// Run with 2 and 4 ranks and with 4 over TCP; with TYPESHARD_MPI_CHECK=1 too, by hand.
#include "support.hpp"

#include <chrono>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>

using namespace mpi_test;

namespace {
using mesh_2 = ts::mesh<ts::axis("x", 2)>;
constexpr auto none = ts::none;
constexpr std::size_t huge = std::size_t{1} << 62;
}  // namespace

TEST_CASE("softmax of an empty array returns at once on every rank", "[reliability][fault]") {
  ts::device_mesh<mesh_2> m{devices(), {0, 1}};  // ranks 2 and 3, if any, sit out
  for (const ts::shape<2> s : {ts::shape<2>{huge, 0}, ts::shape<2>{0, huge}, ts::shape<2>{0, 0}}) {
    const auto start = std::chrono::steady_clock::now();
    const auto a = ts::device_put<ts::spec<"x", none>>(m, ts::host_tensor<double, 2>(s));
    const auto b = ts::device_put<ts::spec<none, "x">>(m, ts::host_tensor<double, 2>(s));
    const auto empty = [&](const auto& r) {
      CHECK(r.extents() == s);
      CHECK(ts::to_host(r).size() == 0);
    };
    empty(ts::softmax<0>(a));
    empty(ts::softmax<-1>(a));
    empty(ts::log_softmax<0>(b));
    empty(ts::log_softmax<1>(b));
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 2.0);
  }
}

TEST_CASE("softmax with an empty block on a rank matches the serial loop",
          "[reliability][fault]") {
  ts::device_mesh<mesh_2> m{devices(), {0, 1}};
  // One element along the dimension for two ranks: rank 1's block is empty along it.
  ts::host_tensor<double, 2> h({3, 1});
  for (std::size_t i = 0; i < 3; ++i) h(i, 0) = static_cast<double>(i) - 1.0;
  const auto a = ts::device_put<ts::spec<none, "x">>(m, h);
  const auto p = ts::to_host(ts::softmax<-1>(a));
  const auto l = ts::to_host(ts::log_softmax<-1>(a));
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(p(i, 0) == 1.0);
    CHECK(l(i, 0) == 0.0);
  }
}

TEST_CASE("max and min over an empty dimension give -inf and +inf on every rank",
          "[reliability][fault]") {
  ts::device_mesh<mesh_2> m{devices(), {0, 1}};
  const auto a = ts::device_put<ts::spec<"x", none>>(m, ts::host_tensor<double, 2>({2, 0}));
  const auto mx = ts::to_host(ts::max<1>(a));
  const auto mn = ts::to_host(ts::min<1>(a));
  REQUIRE(mx.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(mx.data()[i] == -std::numeric_limits<double>::infinity());
    CHECK(mn.data()[i] == std::numeric_limits<double>::infinity());
  }
}

TEST_CASE("a device mesh or array used after its mpi_devices is destroyed is a usage_error",
          "[reliability][fault]") {
  // An adopting mpi_devices (collective over MPI_COMM_WORLD) can be destroyed without
  // finalizing MPI; main's keeps MPI alive.
  std::optional<ts::mpi_devices> adopted;
  adopted.emplace(MPI_COMM_WORLD);
  std::optional<ts::device_mesh<mesh_2>> m;
  m.emplace(*adopted, std::vector<ts::device_id>{0, 1});
  auto a = ts::device_put<ts::spec<"x", none>>(*m, ts::host_tensor<double, 2>({2, 2}, 1.0));
  CHECK(ts::to_host(a + a) == ts::host_tensor<double, 2>({2, 2}, 2.0));
  adopted.reset();
  CHECK_THROWS_AS(m->get_backend(), ts::usage_error);
  CHECK_THROWS_AS(ts::to_host(a), ts::usage_error);
  CHECK_THROWS_AS(a + a, ts::usage_error);
  { const auto gone = std::move(a); }
  m.reset();
}
