// typeshard/ops/detail/random_blocks.hpp: each device's block of a random array, on values
// (element type and rank only, whatever the mesh and spec): every device fills only its own
// block, each element from the key and its global row-major index.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "../../array/detail/copy_box.hpp"
#include "../../array/detail/transfer.hpp"
#include "../../core/layout.hpp"
#include "../../array/detail/buffer.hpp"
#include "../random_key.hpp"
#include "threefry.hpp"

namespace typeshard::random::detail {

enum class distribution_kind { uniform, normal, truncated_normal, bernoulli };

// distribution: what each element is. uniform: [a, b); truncated_normal: within (a, b);
// bernoulli: 1 with probability a, else 0; normal: no parameter.
struct distribution {
  distribution_kind kind = distribution_kind::uniform;
  double a = 0;
  double b = 1;
};

// The value of the element at global row-major index i.
template <class T>
struct element_rule {
  std::array<std::uint32_t, 2> key;
  distribution_kind kind;
  T lo, hi;               // uniform: [lo, hi); normal and truncated normal: the uniform's range
  T clamp_lo, clamp_hi;   // truncated normal: the result's range
  float p;                // bernoulli

  static element_rule make(prng_key k, const distribution& d) {
    element_rule r{k.data, d.kind, T(0), T(1), T(0), T(0), 0.0f};
    constexpr T inf = std::numeric_limits<T>::infinity();
    if constexpr (std::is_floating_point_v<T>) {
      switch (d.kind) {
        case distribution_kind::uniform:
          r.lo = static_cast<T>(d.a);
          r.hi = static_cast<T>(d.b);
          break;
        case distribution_kind::normal:  // sqrt(2) erfinv(u), u uniform in (-1, 1)
          r.lo = std::nextafter(T(-1), inf);
          r.hi = T(1);
          break;
        case distribution_kind::truncated_normal:  // u uniform in [erf(a/√2), erf(b/√2))
          r.lo = static_cast<T>(std::erf(d.a / std::sqrt(2.0)));
          r.hi = static_cast<T>(std::erf(d.b / std::sqrt(2.0)));
          r.clamp_lo = std::nextafter(static_cast<T>(d.a), inf);
          r.clamp_hi = std::nextafter(static_cast<T>(d.b), -inf);
          break;
        case distribution_kind::bernoulli:
          break;
      }
    }
    r.p = static_cast<float>(d.a);
    return r;
  }

  // The value of the element whose cipher words are w, for a distribution known at compile
  // time (so the run loops below carry no branch on the kind).
  template <distribution_kind Kind>
  T value(std::array<std::uint32_t, 2> w) const {
    if constexpr (Kind == distribution_kind::bernoulli) {
      return unit_interval<float>(w) < p ? T(1) : T(0);
    } else if constexpr (std::is_floating_point_v<T>) {
      const T u = uniform_value<T>(w, lo, hi);
      if constexpr (Kind == distribution_kind::uniform) return u;
      const T x = static_cast<T>(1.4142135623730951 * erfinv_for<T>(u));
      if constexpr (Kind == distribution_kind::normal) return x;
      return x < clamp_lo ? clamp_lo : (x > clamp_hi ? clamp_hi : x);
    } else {
      return T(0);  // only bernoulli reaches integer element types
    }
  }

  // Elements first, first + 1, ... into out[0, count): the ciphers 16 lanes at a time.
  template <distribution_kind Kind>
  void fill_run_of(std::uint64_t first, std::size_t count, T* out) const {
    constexpr std::size_t lanes = 16;
    std::uint32_t x0[lanes], x1[lanes];
    for (std::size_t j0 = 0; j0 < count; j0 += lanes) {
      for (std::size_t l = 0; l < lanes; ++l) {
        const std::uint64_t i = first + j0 + l;
        x0[l] = static_cast<std::uint32_t>(i >> 32);
        x1[l] = static_cast<std::uint32_t>(i);
      }
      threefry2x32_lanes<lanes>(key, x0, x1);
      const std::size_t n = count - j0 < lanes ? count - j0 : lanes;
      for (std::size_t l = 0; l < n; ++l) out[j0 + l] = value<Kind>({x0[l], x1[l]});
    }
  }
  void fill_run(std::uint64_t first, std::size_t count, T* out) const {
    switch (kind) {
      case distribution_kind::uniform:
        return fill_run_of<distribution_kind::uniform>(first, count, out);
      case distribution_kind::normal:
        return fill_run_of<distribution_kind::normal>(first, count, out);
      case distribution_kind::truncated_normal:
        return fill_run_of<distribution_kind::truncated_normal>(first, count, out);
      case distribution_kind::bernoulli:
        return fill_run_of<distribution_kind::bernoulli>(first, count, out);
    }
  }

  T operator()(std::uint64_t i) const {
    T v{};
    fill_run(i, 1, &v);
    return v;
  }
};

// Fills `out` (row-major over the box [origin, origin + local) of an array of extents
// `global`) with the elements at those global indices.
template <class T, std::size_t Rank>
void fill_box(const element_rule<T>& rule, const shape<Rank>& global, const shape<Rank>& origin,
              const shape<Rank>& local, T* out) {
  for (std::size_t d = 0; d < Rank; ++d)
    if (local[d] == 0) return;
  const std::size_t run = local[Rank - 1];
  std::array<std::size_t, Rank> at{};  // the row's index within the box (last entry 0)
  for (;;) {
    std::uint64_t first = 0;  // the row's first global row-major index
    for (std::size_t d = 0; d < Rank; ++d) first = first * global[d] + origin[d] + at[d];
    rule.fill_run(first, run, out);
    out += run;
    if (!typeshard::detail::next_row(at, local)) return;
  }
}

// The blocks of a random array with placement `at` and extents `global` (empty for positions
// this process does not address). Each device fills its own, concurrently.
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE std::vector<typeshard::detail::buffer<T>> random_blocks(
    const typeshard::detail::placement<Rank>& at, const shape<Rank>& global, prng_key k,
    const distribution& dist) {
  const element_rule<T> rule = element_rule<T>::make(k, dist);
  std::vector<typeshard::detail::buffer<T>> out(at.mesh.size);
  at.b.run(at.devices, [&](std::size_t p) {
    const index_slices<Rank> ix = typeshard::detail::index_of(at.mesh, at.spec, global, p);
    shape<Rank> origin{}, local{};
    typeshard::detail::box_of(ix, origin, local);
    std::size_t count = 1;
    for (std::size_t d = 0; d < Rank; ++d) count *= local[d];
    typeshard::detail::buffer<T> block(count);
    fill_box<T, Rank>(rule, global, origin, local, block.data());
    out[p] = std::move(block);
  });
  return out;
}

}  // namespace typeshard::random::detail
