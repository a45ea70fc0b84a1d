// ts::device_put<Spec>(a, target) onto device meshes of other mesh types, device sets and
// specs (and ts::device_put(a, m) onto another device set of the same type): every element
// equal, over random extents (uneven, empty); the plan moves exactly the bytes whose owner
// changes (checked element by element against the layouts) and keeps the rest; besides the
// target's blocks the move allocates only bookkeeping, never a host copy of the array (this
// file counts operator new); a ts::communication_recorder reports the move (its move records,
// or the message schedule's permutes) with exactly the bytes that change owner.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <random>
#include <vector>

#include <typeshard/ops/move.hpp>
#include <typeshard/typeshard.hpp>

#include "support/foundation.hpp"

// ---- live heap bytes, for the peak-memory check --------------------------------------------
namespace {
std::atomic<std::size_t> live_bytes{0}, peak_bytes{0};
void note_alloc(std::size_t n) {
  const std::size_t now = live_bytes.fetch_add(n) + n;
  std::size_t peak = peak_bytes.load();
  while (now > peak && !peak_bytes.compare_exchange_weak(peak, now)) {
  }
}
// Each block starts with its size, 64 bytes before the pointer handed out.
constexpr std::size_t header = 64;
void* counted_alloc(std::size_t n, std::size_t align) {
  if (align < header) align = header;
  void* raw = std::aligned_alloc(align, ((n + header + align - 1) / align) * align + align);
  if (!raw) throw std::bad_alloc();
  auto* p = static_cast<unsigned char*>(raw) + align;
  *reinterpret_cast<std::size_t*>(p - header) = n;
  *reinterpret_cast<std::size_t*>(p - header + sizeof(std::size_t)) = align;
  note_alloc(n);
  return p;
}
void counted_free(void* p) noexcept {
  if (!p) return;
  auto* c = static_cast<unsigned char*>(p);
  const std::size_t n = *reinterpret_cast<std::size_t*>(c - header);
  const std::size_t align = *reinterpret_cast<std::size_t*>(c - header + sizeof(std::size_t));
  live_bytes.fetch_sub(n);
  std::free(c - align);
}
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n, alignof(std::max_align_t)); }
void* operator new[](std::size_t n) { return counted_alloc(n, alignof(std::max_align_t)); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_alloc(n, std::size_t(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_alloc(n, std::size_t(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n, alignof(std::max_align_t));
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept {
  return operator new(n, t);
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n, std::size_t(a));
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t& t) noexcept {
  return operator new(n, a, t);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  counted_free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  counted_free(p);
}
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }

namespace {

namespace ts = typeshard;
namespace tr = typeshard::random;

using mesh_1 = ts::mesh<ts::axis("x", 1)>;
using mesh_3 = ts::mesh<ts::axis("a", 3)>;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x4 = ts::mesh<ts::axis("data", 2), ts::axis("model", 4)>;

template <class A, class B>
void require_same(const A& a, const B& b) {
  const auto x = ts::to_host(a);
  const auto y = ts::to_host(b);
  REQUIRE(x.extents() == y.extents());
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!(x.values()[i] == y.values()[i])) REQUIRE(x.values()[i] == y.values()[i]);
}

// The bytes whose owner changes, element by element: for each target position, its elements
// that no source position on the same device holds.
template <class A, class B>
std::size_t changing_owner_bytes(const A& from, const B& to) {
  std::size_t bytes = 0;
  const auto e = from.extents();
  for (std::size_t q = 0; q < B::mesh_type::size; ++q) {
    const auto t = to.index(q);
    const ts::device_id dev = to.device_mesh().device_at(q);
    std::vector<decltype(from.index(0))> local;
    for (std::size_t p = 0; p < A::mesh_type::size; ++p)
      if (from.device_mesh().device_at(p) == dev) local.push_back(from.index(p));
    std::size_t count = 1;
    for (std::size_t d = 0; d < A::rank; ++d) count *= t[d].size();
    for (std::size_t i = 0; i < count; ++i) {
      std::size_t rest = i;
      std::array<std::size_t, A::rank> g{};
      for (std::size_t d = A::rank; d-- > 0;) {
        g[d] = t[d].start + rest % t[d].size();
        rest /= t[d].size();
      }
      bool held = false;
      for (const auto& s : local) {
        bool in = true;
        for (std::size_t d = 0; d < A::rank; ++d) in = in && g[d] >= s[d].start && g[d] < s[d].stop;
        held = held || in;
      }
      bytes += held ? 0 : sizeof(typename A::value_type);
    }
  }
  (void)e;
  return bytes;
}

template <class A, class B>
void check_plan(const ts::move_plan& plan, const A& from, const B& to) {
  std::size_t target_bytes = 0;
  for (std::size_t q = 0; q < B::mesh_type::size; ++q) {
    std::size_t n = sizeof(typename B::value_type);
    for (std::size_t d = 0; d < B::rank; ++d) n *= to.local_shape(q)[d];
    target_bytes += n;
  }
  REQUIRE(plan.bytes_moved() + plan.bytes_kept() == target_bytes);
  REQUIRE(plan.bytes_moved() == changing_owner_bytes(from, to));
}

std::size_t random_extent(std::mt19937_64& rng) {
  return std::uniform_int_distribution<std::size_t>(0, 6)(rng) == 0
             ? std::uniform_int_distribution<std::size_t>(0, 3)(rng)
             : std::uniform_int_distribution<std::size_t>(1, 17)(rng);
}

}  // namespace

TEST_CASE("device_put moves arrays between meshes of other types, devices and specs",
          "[move][property]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x2> low{devices, {0, 1, 2, 3}}, high{devices, {7, 5, 6, 4}};
  const ts::device_mesh<mesh_2x4> all{devices};
  const ts::device_mesh<mesh_1> one{devices, {6}};
  const ts::device_mesh<mesh_3> odd{devices, {1, 3, 5}};
  for (int round = 0; round < 8; ++round) {
    const ts::shape<2> e2{random_extent(rng), random_extent(rng)};
    const ts::shape<3> e3{random_extent(rng), random_extent(rng), random_extent(rng)};
    INFO("extents " << ts::to_string(e2) << " " << ts::to_string(e3));
    const tr::prng_key k = tr::key(rng());
    const auto a = tr::normal<ts::spec<"x", "y">>(k, low, e2);
    const auto b = tr::uniform<ts::spec<ts::none, "y">, double>(k, low, e3);

    const auto a8 = ts::device_put<ts::spec<"model", "data">>(a, all);
    require_same(a8, a);
    check_plan(ts::plan_device_put<ts::spec<"model", "data">>(a, all), a, a8);
    const auto a1 = ts::device_put<ts::spec<>>(a8, one);
    require_same(a1, a);
    check_plan(ts::plan_device_put<ts::spec<>>(a8, one), a8, a1);
    const auto a3 = ts::device_put<ts::spec<ts::none, "a">>(a1, odd);
    require_same(a3, a);
    const auto back = ts::device_put<ts::spec<"x", "y">>(a3, low);
    require_same(back, a);
    check_plan(ts::plan_device_put<ts::spec<"x", "y">>(a3, low), a3, back);

    const auto b8 = ts::device_put<ts::spec<ts::axes("data", "model")>>(b, all);
    require_same(b8, b);
    ts::communication_recorder rec;  // a move's report: the bytes that change owner
    const auto bh = ts::device_put<ts::spec<"y", "x", ts::none>>(b8, high);  // 4 other devices
    const ts::communication_report report = rec.report();
    REQUIRE(report.count(ts::collective_kind::move) == 1);  // position 0's part
    REQUIRE(report.size() == 1);
    REQUIRE(report.devices_observed() == 4);
    REQUIRE(report.total_bytes_received() ==
            ts::plan_device_put<ts::spec<"y", "x", ts::none>>(b8, high).bytes_moved());
    require_same(bh, b);
    check_plan(ts::plan_device_put<ts::spec<"y", "x", ts::none>>(b8, high), b8, bh);
    // The same mesh type onto another device set: reshard's move, the same values.
    require_same(ts::device_put(b, high), b);
    require_same(ts::reshard<ts::spec<"x">>(b, high), b);
  }
}

TEST_CASE("a move keeps boxes on their device and prints its plan", "[move]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  using mesh_2 = ts::mesh<ts::axis("a", 2)>;
  const ts::device_mesh<mesh_2> half{devices, {0, 2}};
  const auto a = tr::normal<ts::spec<"x", ts::none>>(tr::key(3), m, ts::shape<2>{6, 4});
  // Rows over x: positions (0, y) on devices 0 and 1 hold the first half, devices 2 and 3 the
  // second; the target's devices 0 and 2 already hold their halves.
  const auto plan = ts::plan_device_put<ts::spec<"a">>(a, half);
  REQUIRE(plan.bytes_moved() == 0);
  REQUIRE(plan.bytes_kept() == 6 * 4 * sizeof(float));
  REQUIRE(plan.transfers.size() == 2);
  require_same(ts::device_put<ts::spec<"a">>(a, half), a);
  const auto spread = ts::plan_device_put<ts::spec<ts::none, "a">>(a, half);
  REQUIRE(spread.bytes_moved() == 2 * 3 * 2 * sizeof(float));  // the quarter each lacks, twice
  {
    ts::communication_recorder rec;  // each target device's part, as a move record
    const auto moved = ts::device_put<ts::spec<ts::none, "a">>(a, half);
    const ts::communication_report r = rec.report();
    INFO(r);
    REQUIRE(r.size() == 1);
    REQUIRE(r.collectives()[0].name() == "move");
    REQUIRE(r.collectives()[0].axes == "move to other devices");
    REQUIRE(r.collectives()[0].block_bytes == 6 * 2 * sizeof(float));
    REQUIRE(r.collectives()[0].bytes_received == 3 * 2 * sizeof(float));
    REQUIRE(r.devices_observed() == 2);
    REQUIRE(r.total_bytes_received() == spread.bytes_moved());
    require_same(moved, a);
  }
  REQUIRE(spread.describe() ==
          "move NamedSharding(mesh=Mesh('x': 2, 'y': 2), spec=PartitionSpec('x', None)) -> "
          "NamedSharding(mesh=Mesh('a': 2), spec=PartitionSpec(None, 'a')): 4 transfers, 2 "
          "between devices, 48 bytes moved, 48 bytes kept on their device\n"
          "  device 0 (position 0) -> device 0 (position 0): [0:3, 0:2] 24 B (kept)\n"
          "  device 2 (position 2) -> device 0 (position 0): [3:6, 0:2] 24 B\n"
          "  device 1 (position 1) -> device 2 (position 1): [0:3, 2:4] 24 B\n"
          "  device 2 (position 2) -> device 2 (position 1): [3:6, 2:4] 24 B (kept)\n");
}

TEST_CASE("a move holds no more than the target's blocks", "[move]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x2> low{devices, {0, 1, 2, 3}};
  const ts::device_mesh<mesh_2x4> all{devices};
  const ts::shape<2> e{512, 768};  // 1.5 MiB of floats
  const auto a = tr::uniform<ts::spec<"x", "y">>(tr::key(9), low, e);
  const std::size_t array_bytes = 512 * 768 * sizeof(float);
  // Warm the pool and the threads once, then measure a second move.
  { const auto warm = ts::device_put<ts::spec<"model", "data">>(a, all); }
  // Whether shard blocks come through operator new (under AddressSanitizer, where typeshard's
  // block pool and mappings are off) or not (mappings of their own, the pool).
  std::size_t probe_bytes = live_bytes.load();
  {
    const ts::detail::buffer<float> probe(std::size_t{1} << 16);
    probe_bytes = live_bytes.load() - probe_bytes;
  }
  const std::size_t blocks = probe_bytes >= (std::size_t{1} << 16) * sizeof(float) ? array_bytes
                                                                                   : 0;
  const std::size_t before = live_bytes.load();
  peak_bytes = before;
  const auto moved = ts::device_put<ts::spec<"model", "data">>(a, all);
  const std::size_t peak = peak_bytes.load() - before;
  INFO("peak " << peak << " bytes above the start, the array is " << array_bytes);
  // Besides the target's blocks (counted here only where they come through operator new), a
  // move allocates the plan's bookkeeping, never a copy of the array (a trip through the host
  // holds one).
  REQUIRE(peak < blocks + 64 * 1024);
  require_same(moved, a);
}

TEST_CASE("the message schedule (MPI's) moves the same values on the thread pool", "[move]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed() + 1);
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x2> low{devices, {0, 1, 2, 3}}, high{devices, {6, 4, 7, 5}};
  const ts::device_mesh<mesh_2x4> all{devices, {3, 0, 7, 1, 6, 2, 5, 4}};
  const ts::device_mesh<mesh_3> odd{devices, {5, 3, 1}};
  auto by_messages = [](const auto& a, const auto& target_array) {
    using R = std::remove_cvref_t<decltype(target_array)>;
    const auto from = a.placement();
    const auto to = target_array.placement();
    const ts::move_plan plan =
        ts::detail::plan_move(from, to, a.extents(), sizeof(typename R::value_type));
    // Every round: each device sends at most one box and receives at most one.
    for (const auto& round : ts::detail::move_rounds(plan))
      for (std::size_t i = 0; i < round.size(); ++i)
        for (std::size_t j = 0; j < i; ++j) {
          REQUIRE(plan.transfers[round[i]].from_device != plan.transfers[round[j]].from_device);
          REQUIRE(plan.transfers[round[i]].to_device != plan.transfers[round[j]].to_device);
        }
    // The rounds are permutes, which a recorder sees: the bytes received, over every
    // device, are those that change owner.
    ts::communication_recorder rec;
    R moved(ts::adopt_shards, target_array.device_mesh(), a.extents(),
            ts::detail::run_move_by_messages<typename R::value_type, R::rank>(
                plan, from, to, a.extents(), *a.shared_shards()));
    const ts::communication_report report = rec.report();
    REQUIRE(report.count(ts::collective_kind::permute, "move to other devices") ==
            ts::detail::move_rounds(plan).size());
    REQUIRE(report.total_bytes_received() == plan.bytes_moved());
    return moved;
  };
  for (int round = 0; round < 6; ++round) {
    const ts::shape<2> e2{random_extent(rng), random_extent(rng)};
    INFO("extents " << ts::to_string(e2));
    const auto a = tr::normal<ts::spec<"x", "y">>(tr::key(rng()), low, e2);
    require_same(by_messages(a, ts::device_put<ts::spec<"model", "data">>(a, all)), a);
    require_same(by_messages(a, ts::device_put<ts::spec<"y", "x">>(a, high)), a);
    require_same(by_messages(a, ts::device_put<ts::spec<ts::none, "a">>(a, odd)), a);
    const auto r = ts::device_put<ts::spec<>>(a, all);  // replicated: 8 receivers of each box
    require_same(by_messages(r, ts::device_put<ts::spec<"a">>(r, odd)), a);
    require_same(by_messages(r, ts::device_put<ts::spec<>>(r, low)), a);
  }
}
