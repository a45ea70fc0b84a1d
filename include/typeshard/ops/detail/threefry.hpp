// typeshard/ops/detail/threefry.hpp: the Threefry-2x32 block cipher (Salmon et al., "Parallel
// random numbers: as easy as 1, 2, 3", SC'11; Random123's threefry2x32), the counter-based
// generator behind jax.random's default implementation, and the conversions of its output to
// the values of one element (after JAX's "partitionable" scheme: the bits of element i are a
// function of the key and i only).
//
// Internal to ops/random.hpp; tests check threefry2x32 against Random123's known answers.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace typeshard::random::detail {

// threefry2x32<Rounds>(key, counter): the cipher of `counter` under `key` (Random123's
// threefry2x32_R; JAX and Random123's default is 20 rounds).
template <unsigned Rounds = 20>
constexpr std::array<std::uint32_t, 2> threefry2x32(std::array<std::uint32_t, 2> key,
                                                    std::array<std::uint32_t, 2> counter) {
  constexpr unsigned rotation[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const std::uint32_t ks[3] = {key[0], key[1], 0x1BD11BDAu ^ key[0] ^ key[1]};
  std::uint32_t x0 = counter[0] + ks[0];
  std::uint32_t x1 = counter[1] + ks[1];
  for (unsigned r = 0; r < Rounds; ++r) {
    x0 += x1;
    x1 = std::rotl(x1, static_cast<int>(rotation[r % 8]));
    x1 ^= x0;
    if (r % 4 == 3) {  // key injection after every fourth round
      const unsigned s = r / 4 + 1;
      x0 += ks[s % 3];
      x1 += ks[(s + 1) % 3] + s;
    }
  }
  return {x0, x1};
}

// threefry2x32_lanes<Lanes>(key, x0, x1): threefry2x32<20> of the counters (x0[l], x1[l]),
// in place, every round applied to all lanes before the next (independent lanes the compiler
// can interleave or vectorise, rather than one 20-round dependency chain at a time).
template <std::size_t Lanes>
constexpr void threefry2x32_lanes(std::array<std::uint32_t, 2> key, std::uint32_t* x0,
                                  std::uint32_t* x1) {
  constexpr unsigned rotation[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const std::uint32_t ks[3] = {key[0], key[1], 0x1BD11BDAu ^ key[0] ^ key[1]};
  for (std::size_t l = 0; l < Lanes; ++l) {
    x0[l] += ks[0];
    x1[l] += ks[1];
  }
  for (unsigned r = 0; r < 20; ++r) {
    const int rot = static_cast<int>(rotation[r % 8]);
    for (std::size_t l = 0; l < Lanes; ++l) {
      x0[l] += x1[l];
      x1[l] = std::rotl(x1[l], rot);
      x1[l] ^= x0[l];
    }
    if (r % 4 == 3) {
      const unsigned s = r / 4 + 1;
      const std::uint32_t a = ks[s % 3], b = ks[(s + 1) % 3] + s;
      for (std::size_t l = 0; l < Lanes; ++l) {
        x0[l] += a;
        x1[l] += b;
      }
    }
  }
}

// The cipher's two words for the element at global row-major index i (its counter is i's
// high and low 32-bit halves).
constexpr std::array<std::uint32_t, 2> element_words(std::array<std::uint32_t, 2> key,
                                                     std::uint64_t i) {
  return threefry2x32(key, {static_cast<std::uint32_t>(i >> 32), static_cast<std::uint32_t>(i)});
}

// unit_interval<T>(words): a value in [0, 1) from the words' bits (the top 23 bits for float,
// 52 for double, as mantissa of a number in [1, 2), minus 1; JAX's _uniform).
template <class T>
constexpr T unit_interval(std::array<std::uint32_t, 2> w) {
  if constexpr (sizeof(T) == 4) {
    const std::uint32_t bits = w[0] ^ w[1];
    return std::bit_cast<float>((bits >> 9) | 0x3F800000u) - 1.0f;
  } else {
    const std::uint64_t bits = (std::uint64_t{w[0]} << 32) | w[1];
    return std::bit_cast<double>((bits >> 12) | 0x3FF0000000000000ull) - 1.0;
  }
}

// uniform_value<T>(words, lo, hi): a value in [lo, hi) (lo * (1 - u) + hi * u, kept >= lo).
template <class T>
constexpr T uniform_value(std::array<std::uint32_t, 2> w, T lo, T hi) {
  const T v = unit_interval<T>(w) * (hi - lo) + lo;
  return v < lo ? lo : v;
}

// erfinv_giles(x) for x in (-1, 1): Giles' single-precision approximation ("Approximating the
// erfinv function", GPU Computing Gems, 2011; XLA's float32 ErfInv), relative error below
// 4e-7 on (-1, 1) away from the ends.
inline double erfinv_giles(double x) {
  double w = -std::log((1.0 - x) * (1.0 + x));
  double p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  return p * x;
}

// erfinv(x) for x in (-1, 1) to double precision: Giles' approximation, then two Newton
// steps on erf.
inline double erfinv(double x) {
  if (!(x > -1.0)) return -std::numeric_limits<double>::infinity();
  if (!(x < 1.0)) return std::numeric_limits<double>::infinity();
  double y = erfinv_giles(x);
  constexpr double two_over_sqrt_pi = 1.1283791670955126;
  for (int step = 0; step < 2; ++step)
    y -= (std::erf(y) - x) / (two_over_sqrt_pi * std::exp(-y * y));
  return y;
}

// erfinv_for<T>(x): what a T needs: Giles' approximation (evaluated in double) for float,
// erfinv for double.
template <class T>
inline double erfinv_for(T x) {
  if constexpr (sizeof(T) == 4) return erfinv_giles(static_cast<double>(x));
  else return erfinv(x);
}

}  // namespace typeshard::random::detail
