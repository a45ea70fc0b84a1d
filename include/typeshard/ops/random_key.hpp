// typeshard/ops/random_key.hpp: the keys of typeshard's random numbers, as jax.random's.
//
//   auto k = ts::random::key(42);                  // jax.random.key(42)
//   auto [k1, k2] = ts::random::split(k);          // k1, k2 = jax.random.split(k)
//   auto ks = ts::random::split<4>(k);             // jax.random.split(k, 4), a std::array
//   auto layer = ts::random::fold_in(k, 7);        // jax.random.fold_in(k, 7)
//
// A key is two 32-bit words; every new key and every random value is a Threefry-2x32 cipher
// of a counter under a key (JAX's default generator, in its partitionable form), so the same
// key always gives the same values, whatever the mesh. Consume a key once: draw with one of
// split's results and keep the other for later draws, as in JAX.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "detail/threefry.hpp"

namespace typeshard::random {

// prng_key: a key of the counter-based generator (the value of jax.random.key_data(key)).
struct prng_key {
  std::array<std::uint32_t, 2> data{};

  friend constexpr bool operator==(const prng_key&, const prng_key&) = default;

  // "key(0x0000002a, 0x00000000)"
  std::string to_string() const {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out = "key(";
    for (std::size_t w = 0; w < 2; ++w) {
      out += w ? ", 0x" : "0x";
      for (int shift = 28; shift >= 0; shift -= 4) out += hex[(data[w] >> shift) & 0xF];
    }
    return out + ")";
  }
};

// key(seed): the key of a 64-bit seed (its high and low words, as jax.random.key).
[[nodiscard]] constexpr prng_key key(std::uint64_t seed) {
  return {{static_cast<std::uint32_t>(seed >> 32), static_cast<std::uint32_t>(seed)}};
}

// split<Num>(k): Num new keys, independent of each other and of k (jax.random.split(k, Num)).
template <std::size_t Num = 2>
[[nodiscard]] constexpr std::array<prng_key, Num> split(prng_key k) {
  std::array<prng_key, Num> out{};
  for (std::size_t j = 0; j < Num; ++j) out[j].data = detail::element_words(k.data, j);
  return out;
}

// split(k, num): the same keys as split<num>(k), in a vector (num known at run time).
[[nodiscard]] inline std::vector<prng_key> split(prng_key k, std::size_t num) {
  std::vector<prng_key> out(num);
  for (std::size_t j = 0; j < num; ++j) out[j].data = detail::element_words(k.data, j);
  return out;
}

// fold_in(k, data): a new key from k and a number (a layer index, a step, a device-independent
// label), as jax.random.fold_in.
[[nodiscard]] constexpr prng_key fold_in(prng_key k, std::uint32_t data) {
  return {detail::threefry2x32(k.data, {0u, data})};
}

}  // namespace typeshard::random
