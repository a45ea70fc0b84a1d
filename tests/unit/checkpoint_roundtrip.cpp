// ts::checkpoint: arrays saved by 8 devices (2x4) restore on 1 device and on 2x2 with other
// specs, and the reverse, every element equal (random extents, uneven included; with and
// without checksum verification; float, double, int32 and bfloat16); the index (steps, names, step_of); a fault injected between
// shards leaves the previous checkpoint loadable; truncated and torn files give a
// checkpoint_error naming the file; bad requests throw.
//
// With TYPESHARD_CHECKPOINT_FIXTURE=<dir> set, the "[.python-fixture]" case writes a
// checkpoint and each array's values (raw little-endian) there, for
// tests/python/checkpoint_numpy.py.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <typeshard/ops/checkpoint.hpp>
#include <typeshard/typeshard.hpp>

#include "support/foundation.hpp"

namespace {

namespace ts = typeshard;
namespace tc = typeshard::checkpoint;
namespace tr = typeshard::random;
namespace fs = std::filesystem;

using mesh_1 = ts::mesh<ts::axis("x", 1)>;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;

// A fresh directory under the system's temporary directory, removed at scope exit.
struct temp_dir {
  fs::path path;
  temp_dir() {
    path = fs::temp_directory_path() /
           ("typeshard-checkpoint-" + std::to_string(ts_test::seed()) + "-" +
            std::to_string(std::random_device{}()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

template <class A>
void require_same(const A& loaded, const auto& expected) {
  const auto a = ts::to_host(loaded);
  const auto b = ts::to_host(expected);
  REQUIRE(a.extents() == b.extents());
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(a.values()[i] == b.values()[i])) REQUIRE(a.values()[i] == b.values()[i]);
}

std::size_t random_extent(std::mt19937_64& rng) {
  return std::uniform_int_distribution<std::size_t>(0, 6)(rng) == 0
             ? std::uniform_int_distribution<std::size_t>(0, 3)(rng)
             : std::uniform_int_distribution<std::size_t>(1, 19)(rng);
}

}  // namespace

TEST_CASE("checkpoints saved on 2x4 restore on 1 device and on 2x2, and the reverse",
          "[checkpoint][property]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m8{devices};
  const ts::device_mesh<mesh_2x2> m4{devices, {6, 2, 5, 1}};
  const ts::device_mesh<mesh_1> m1{devices, {3}};
  for (int round = 0; round < 6; ++round) {
    temp_dir tmp;
    const ts::shape<2> e2{random_extent(rng), random_extent(rng)};
    const ts::shape<3> e3{random_extent(rng), random_extent(rng), random_extent(rng)};
    const ts::shape<1> e1{random_extent(rng)};
    INFO("round " << round << " extents " << ts::to_string(e2) << " " << ts::to_string(e3)
                  << " " << ts::to_string(e1));
    const auto [k1, k2, k3] = tr::split<3>(tr::key(rng()));
    const bool verify = round % 2 == 0;
    const tc::load_options options{verify};

    // 8 devices write; 1 and 4 devices read, with other specs (and as saved).
    const auto a = tr::normal<ts::spec<"x", "y">>(k1, m8, e2);
    const auto b = tr::uniform<ts::spec<ts::none, ts::axes("y", "x")>, double>(k2, m8, e3);
    const auto c = tr::bernoulli<ts::spec<>, std::int32_t>(k3, 0.5, m8, e1);  // replicated
    tc::save(tmp.path, 10 + round, {{"a", a}, {"opt/b", b}, {"c", c}});
    const fs::path dir = tc::step_path(tmp.path, 10 + round);
    require_same(tc::load<ts::spec<>, float, 2>(dir, "a", m1, options), a);
    require_same(tc::load<ts::spec<"y", "x">, float, 2>(dir, "a", m4, options), a);
    require_same(tc::load<ts::spec<"x", "y">, float, 2>(dir, "a", m8, options), a);
    require_same(tc::load<ts::spec<"x">, double, 3>(dir, "opt/b", m1, options), b);
    require_same(tc::load<ts::spec<"y", ts::none, "x">, double, 3>(dir, "opt/b", m4, options), b);
    require_same(tc::load<ts::spec<"x">, std::int32_t, 1>(dir, "c", m4, options), c);
    require_same(tc::load<ts::spec<ts::axes("x", "y")>, std::int32_t, 1>(dir, "c", m8, options),
                 c);

    // 4 devices write, 8 and 1 read.
    const auto d = tr::truncated_normal<ts::spec<ts::none, "x">>(k1, -2.0, 2.0, m4, e2);
    const auto d16 = ts::astype<ts::bfloat16>(d);  // safetensors' BF16
    tc::save(tmp.path, 100, {{"d", d}, {"d16", d16}});
    const fs::path dir4 = tc::step_path(tmp.path, 100);
    require_same(tc::load<ts::spec<"y", "x">, float, 2>(dir4, "d", m8, options), d);
    require_same(tc::load<ts::spec<>, float, 2>(dir4, "d", m1, options), d);
    require_same(tc::load<ts::spec<"y", "x">, ts::bfloat16, 2>(dir4, "d16", m8, options), d16);
    require_same(tc::load<ts::spec<>, ts::bfloat16, 2>(dir4, "d16", m1, options), d16);
    // 1 device writes, 8 read.
    tc::save(tmp.path, 101, {{"b1", tc::load<ts::spec<>, double, 3>(dir, "opt/b", m1)}});
    require_same(tc::load<ts::spec<"x", "y">, double, 3>(tc::step_path(tmp.path, 101), "b1", m8,
                                                        options),
                 b);

    REQUIRE(tc::steps(tmp.path) == std::vector<std::uint64_t>{std::uint64_t(10 + round), 100, 101});
    REQUIRE(tc::latest_step(tmp.path) == 101u);
    REQUIRE(tc::step_of(dir) == std::uint64_t(10 + round));
    REQUIRE(tc::names(dir) == std::vector<std::string>{"a", "c", "opt/b"});
    tc::verify(dir);
  }
}

TEST_CASE("each device writes its own primary shards, one file each", "[checkpoint]") {
  temp_dir tmp;
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m8{devices, {7, 6, 5, 4, 3, 2, 1, 0}};
  const auto a = tr::normal<ts::spec<"y">>(tr::key(1), m8, ts::shape<2>{8, 3});  // 2 replicas
  tc::save(tmp.path, 1, {{"a", a}});
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(tc::step_path(tmp.path, 1)))
    files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  // Positions 0-3 (x = 0) hold the primaries, on devices 7, 6, 5, 4.
  REQUIRE(files == std::vector<std::string>{"index.json", "shards-4.safetensors",
                                            "shards-5.safetensors", "shards-6.safetensors",
                                            "shards-7.safetensors"});
  REQUIRE(!fs::exists(tmp.path / "1.tmp"));
}

TEST_CASE("a fault between shards leaves the previous checkpoint loadable", "[checkpoint]") {
  temp_dir tmp;
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m8{devices};
  const ts::device_mesh<mesh_1> m1{devices};
  const auto first = tr::normal<ts::spec<"x", "y">>(tr::key(1), m8, ts::shape<2>{9, 10});
  const auto second = tr::normal<ts::spec<"x", "y">>(tr::key(2), m8, ts::shape<2>{9, 10});
  tc::save(tmp.path, 1, {{"w", first}});
  tc::save(tmp.path, 2, {{"w", first}});
  for (const std::int64_t after : {0, 3, 7}) {
    tc::detail::fault_after_shards = after;
    // A new step, and a step that exists: neither is touched.
    REQUIRE_THROWS_AS(tc::save(tmp.path, 3, {{"w", second}}), tc::checkpoint_error);
    tc::detail::fault_after_shards = after;
    REQUIRE_THROWS_WITH(tc::save(tmp.path, 2, {{"w", second}}),
                        Catch::Contains("injected fault between shards"));
    REQUIRE(tc::detail::fault_after_shards < 0);
    REQUIRE(tc::steps(tmp.path) == std::vector<std::uint64_t>{1, 2});
    REQUIRE(tc::latest_step(tmp.path) == 2u);
    require_same(tc::load<ts::spec<>, float, 2>(tc::step_path(tmp.path, 2), "w", m1), first);
    tc::verify(tc::step_path(tmp.path, 2));
  }
  tc::detail::fault_after_shards = -1;
  tc::save(tmp.path, 2, {{"w", second}});  // a save after the faults replaces the step
  require_same(tc::load<ts::spec<>, float, 2>(tc::step_path(tmp.path, 2), "w", m1), second);
  REQUIRE(tc::steps(tmp.path) == std::vector<std::uint64_t>{1, 2});
}

TEST_CASE("truncated and torn files give a checkpoint_error naming the file", "[checkpoint]") {
  temp_dir tmp;
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m8{devices};
  const ts::device_mesh<mesh_1> m1{devices};
  const auto w = tr::uniform<ts::spec<"x", "y">>(tr::key(5), m8, ts::shape<2>{16, 12});
  tc::save(tmp.path, 1, {{"w", w}});
  const fs::path dir = tc::step_path(tmp.path, 1);
  const fs::path victim = dir / "shards-5.safetensors";
  auto expect_error = [&](auto&& f, const char* what) {
    try {
      f();
      FAIL("no checkpoint_error");
    } catch (const tc::checkpoint_error& e) {
      REQUIRE(e.file() == victim);
      REQUIRE_THAT(e.what(), Catch::Contains(victim.string()) && Catch::Contains(what));
    }
  };
  const auto size = fs::file_size(victim);
  {  // a flipped byte in the data: the checksum catches it
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(size - 5));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x10);
    f.seekp(static_cast<std::streamoff>(size - 5));
    f.write(&c, 1);
  }
  expect_error([&] { (void)tc::load<ts::spec<>, float, 2>(dir, "w", m1); }, "checksum");
  expect_error([&] { tc::verify(dir); }, "checksum");
  // Without verification a device reads only its bytes: the damage goes unseen.
  REQUIRE_NOTHROW(tc::load<ts::spec<>, float, 2>(dir, "w", m1, {false}));
  fs::resize_file(victim, size - 3);  // truncated: caught with or without verification
  expect_error([&] { (void)tc::load<ts::spec<"x">, float, 2>(dir, "w", m8, {false}); },
               "truncated");
  expect_error([&] { tc::verify(dir); }, "truncated");
  fs::resize_file(victim, 5);  // inside the header length
  expect_error([&] { (void)tc::load<ts::spec<>, float, 2>(dir, "w", m1); }, "header");
  fs::remove(victim);
  expect_error([&] { (void)tc::load<ts::spec<>, float, 2>(dir, "w", m1); }, "cannot open");
  expect_error([&] { (void)tc::load<ts::spec<"x", "y">, float, 2>(dir, "w", m8); }, "cannot open");
}

TEST_CASE("checkpoints refuse bad requests", "[checkpoint]") {
  temp_dir tmp;
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const auto w = tr::uniform<ts::spec<"x">>(tr::key(5), m, ts::shape<2>{4, 4});
  REQUIRE_THROWS_AS(tc::save(tmp.path, 1, {{"w", w}, {"w", w}}), ts::usage_error);
  REQUIRE_THROWS_AS(tc::save(tmp.path, 1, {{"", w}}), ts::usage_error);
  REQUIRE_THROWS_AS(tc::save(tmp.path, 1, {}), ts::usage_error);
  ts::cpu_devices others{4};
  const ts::device_mesh<mesh_2x2> mo{others};
  REQUIRE_THROWS_AS(tc::save(tmp.path, 1, {{"w", w}, {"v", ts::device_put(w, mo)}}),
                    ts::usage_error);
  REQUIRE(tc::steps(tmp.path).empty());
  REQUIRE(!tc::latest_step(tmp.path));
  tc::save(tmp.path, 1, {{"w", w}});
  const fs::path dir = tc::step_path(tmp.path, 1);
  REQUIRE_THROWS_WITH((tc::load<ts::spec<>, float, 2>(dir, "v", m)),
                      Catch::Contains("no array named \"v\"") && Catch::Contains("holds: w"));
  REQUIRE_THROWS_WITH((tc::load<ts::spec<>, double, 2>(dir, "w", m)),
                      Catch::Contains("F32 elements, not the F64"));
  REQUIRE_THROWS_WITH((tc::load<ts::spec<>, float, 3>(dir, "w", m)), Catch::Contains("rank 2"));
  REQUIRE_THROWS_AS((tc::load<ts::spec<>, float, 2>(tmp.path / "7", "w", m)),
                    tc::checkpoint_error);
}

TEST_CASE("python fixture: a checkpoint and its arrays' values", "[.python-fixture]") {
  const char* where = std::getenv("TYPESHARD_CHECKPOINT_FIXTURE");
  REQUIRE(where != nullptr);
  const fs::path root = where;
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m8{devices};
  const auto [k1, k2, k3] = tr::split<3>(tr::key(2026));
  const auto a = tr::normal<ts::spec<"x", "y">>(k1, m8, ts::shape<2>{13, 10});
  const auto b = tr::uniform<ts::spec<ts::none, "y", "x">, double>(k2, m8, ts::shape<3>{3, 9, 5});
  const auto c = tr::bernoulli<ts::spec<"y">, std::int64_t>(k3, 0.3, m8, ts::shape<1>{11});
  tc::save(root / "checkpoint", 42, {{"a", a}, {"b", b}, {"c", c}});
  auto dump = [&](const std::string& name, const auto& array) {
    const auto h = ts::to_host(array);
    std::ofstream f(root / (name + ".bin"), std::ios::binary);
    f.write(reinterpret_cast<const char*>(h.data()),
            static_cast<std::streamsize>(h.size() * sizeof(*h.data())));
  };
  dump("a", a);
  dump("b", b);
  dump("c", c);
}

TEST_CASE("CRC-32 is zlib's, and JSON round-trips", "[checkpoint]") {
  namespace d = tc::detail;
  REQUIRE(d::crc32("123456789", 9) == 0xCBF43926u);  // the standard check value
  REQUIRE(d::crc32("", 0) == 0u);
  std::vector<unsigned char> bytes(1000);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 7);
  for (const std::size_t split : {0, 1, 7, 8, 9, 500, 999})  // continuing gives the same
    REQUIRE(d::crc32(bytes.data() + split, bytes.size() - split, d::crc32(bytes.data(), split)) ==
            d::crc32(bytes.data(), bytes.size()));
  const std::string text =
      R"({"a":[1,2,{"b":"x\"y\\z"}],"c":true,"d":null,"e":18446744073709551615})";
  REQUIRE(d::to_json(d::parse_json(text)) == text);
  for (const char* bad :
       {"{", "[1,]", "{\"a\" 1}", "1.5", "-1", "\"x", "{} x", "18446744073709551616"})
    REQUIRE_THROWS_AS(d::parse_json(bad), d::json_error);
}
