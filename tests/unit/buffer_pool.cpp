// The pool of freed shard blocks (detail/buffer.hpp): equal sizes are reused, newest first;
// a block that does not fit sends the blocks kept longest ago back to the system; a block
// larger than the whole pool is not kept.
#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

#include "typeshard/array/detail/buffer.hpp"

namespace {

using typeshard::detail::block_pool;
using typeshard::detail::system_allocate_block;
using typeshard::detail::system_free_block;

constexpr std::size_t MiB = std::size_t{1} << 20;

// Returns every block still in the pool to the system, so the test leaks nothing.
void drain(block_pool& pool, const std::vector<std::size_t>& sizes) {
  for (std::size_t bytes : sizes)
    while (void* p = pool.take(bytes)) system_free_block(p, bytes);
  CHECK(pool.kept_bytes() == 0);
}

}  // namespace

TEST_CASE("block_pool hands back a kept block of the same size, the newest first", "[buffer]") {
  block_pool pool(8 * MiB);
  void* a = system_allocate_block(2 * MiB);
  void* b = system_allocate_block(2 * MiB);
  REQUIRE(pool.keep(a, 2 * MiB));
  REQUIRE(pool.keep(b, 2 * MiB));
  CHECK(pool.kept_bytes() == 4 * MiB);
  CHECK(pool.take(3 * MiB) == nullptr);  // only exact sizes
  CHECK(pool.take(2 * MiB) == b);
  CHECK(pool.take(2 * MiB) == a);
  CHECK(pool.take(2 * MiB) == nullptr);
  CHECK(pool.kept_bytes() == 0);
  system_free_block(a, 2 * MiB);
  system_free_block(b, 2 * MiB);
}

TEST_CASE("block_pool makes room by giving back the blocks kept longest ago", "[buffer]") {
  block_pool pool(8 * MiB);
  void* old1 = system_allocate_block(3 * MiB);
  void* old2 = system_allocate_block(2 * MiB);
  void* mid = system_allocate_block(3 * MiB);
  REQUIRE(pool.keep(old1, 3 * MiB));
  REQUIRE(pool.keep(old2, 2 * MiB));
  REQUIRE(pool.keep(mid, 3 * MiB));
  CHECK(pool.kept_bytes() == 8 * MiB);

  // 4 MiB more: old1 (3) and old2 (2) go, oldest first, until it fits; mid stays.
  void* fresh = system_allocate_block(4 * MiB);
  REQUIRE(pool.keep(fresh, 4 * MiB));
  CHECK(pool.kept_bytes() == 7 * MiB);
  CHECK(pool.take(2 * MiB) == nullptr);
  CHECK(pool.take(3 * MiB) == mid);
  CHECK(pool.take(3 * MiB) == nullptr);
  CHECK(pool.take(4 * MiB) == fresh);
  system_free_block(mid, 3 * MiB);
  system_free_block(fresh, 4 * MiB);
  drain(pool, {2 * MiB, 3 * MiB, 4 * MiB});
}

TEST_CASE("block_pool does not keep a block larger than itself", "[buffer]") {
  block_pool pool(4 * MiB);
  void* small = system_allocate_block(2 * MiB);
  REQUIRE(pool.keep(small, 2 * MiB));
  void* huge = system_allocate_block(5 * MiB);
  CHECK_FALSE(pool.keep(huge, 5 * MiB));
  CHECK(pool.kept_bytes() == 2 * MiB);  // the kept block was not evicted for nothing
  system_free_block(huge, 5 * MiB);
  drain(pool, {2 * MiB});
}

TEST_CASE("block_pool under a changing mix of sizes stays within its bound", "[buffer]") {
  block_pool pool(16 * MiB);
  const std::vector<std::size_t> sizes{1 * MiB, 3 * MiB, 5 * MiB, 7 * MiB};
  std::vector<std::pair<void*, std::size_t>> live;
  for (int round = 0; round < 200; ++round) {
    const std::size_t bytes = sizes[static_cast<std::size_t>(round * 7 + round / 5) % sizes.size()];
    void* p = pool.take(bytes);
    if (p == nullptr) p = system_allocate_block(bytes);
    static_cast<unsigned char*>(p)[bytes - 1] = 1;  // the block is usable to its last byte
    live.emplace_back(p, bytes);
    if (live.size() > 3) {
      const auto [q, n] = live.front();
      live.erase(live.begin());
      if (!pool.keep(q, n)) system_free_block(q, n);
    }
    CHECK(pool.kept_bytes() <= 16 * MiB);
  }
  for (const auto& [q, n] : live) system_free_block(q, n);
  drain(pool, sizes);
}
