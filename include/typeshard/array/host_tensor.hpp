// typeshard/array/host_tensor.hpp: an owning, row-major, n-dimensional array in host memory.
//
//   ts::host_tensor<float, 2> a({4, 4});           // zeros
//   a(1, 2) = 3.0f;
//   auto b = ts::host_tensor<float, 2>({2, 2}, {1, 2, 3, 4});
//   ts::host_tensor<float, 0> s({}, {2.5f});       // rank 0: one element, shape ()
//   float v = s();                                   // or s.item(), as numpy's x.item()
//
// It is what device_put takes and to_host returns: the single-device view of the data.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/config.hpp"
#include "../core/errors.hpp"
#include "../core/layout.hpp"

namespace typeshard {

namespace detail {

// host_tensor's failures, out of line: functions of values, one copy per TU.
[[noreturn]] TYPESHARD_COLD inline void throw_value_count_mismatch(
    std::span<const std::size_t> extents, std::size_t need, std::size_t got) {
  throw shape_error("typeshard: host_tensor of shape " + shape_string(extents) + " needs " +
                    std::to_string(need) + " values, got " + std::to_string(got) +
                    "; pass exactly one value per element");
}

[[noreturn]] TYPESHARD_COLD inline void throw_too_many_elements(
    std::span<const std::size_t> extents, std::size_t n, std::size_t max) {
  throw shape_error(message({"typeshard: host_tensor of shape ", shape_string(extents), " has ",
                             n, " elements, more than fit in memory (at most ", max,
                             "); use smaller extents"}));
}

[[noreturn]] TYPESHARD_COLD inline void throw_item_needs_one_element(
    std::span<const std::size_t> extents, std::size_t n) {
  throw shape_error(message({"typeshard: item() needs a one-element array, got shape ",
                             shape_string(extents), " (", n,
                             " elements); fix: reduce it first (ts::sum<>(x) gives rank 0)"}));
}

}  // namespace detail

template <class T, std::size_t Rank>
class host_tensor {
 public:
  using value_type = T;
  static constexpr std::size_t rank = Rank;

  host_tensor() = default;

  // Zero-initialised tensor of the given extents.
  explicit host_tensor(const shape<Rank>& extents)
      : extents_(extents), data_(storable_count(extents)) {}

  host_tensor(const shape<Rank>& extents, const T& fill)
      : extents_(extents), data_(storable_count(extents), fill) {}

  // Takes `values` in row-major order; their number must equal the product of extents.
  host_tensor(const shape<Rank>& extents, std::vector<T> values)
      : extents_(extents), data_(std::move(values)) {
    if (data_.size() != element_count(extents))
      detail::throw_value_count_mismatch(extents, element_count(extents), data_.size());
  }

  host_tensor(const shape<Rank>& extents, std::initializer_list<T> values)
      : host_tensor(extents, std::vector<T>(values)) {}

  const shape<Rank>& extents() const { return extents_; }
  std::size_t extent(std::size_t d) const { return extents_[d]; }
  std::size_t size() const { return data_.size(); }

  T* data() { return data_.data(); }
  const T* data() const { return data_.data(); }
  std::span<T> values() { return data_; }
  std::span<const T> values() const { return data_; }

  template <class... I>
    requires(sizeof...(I) == Rank)
  T& operator()(I... i) {
    return data_[offset({static_cast<std::size_t>(i)...})];
  }
  template <class... I>
    requires(sizeof...(I) == Rank)
  const T& operator()(I... i) const {
    return data_[offset({static_cast<std::size_t>(i)...})];
  }

  // Row-major offset of a multi-index.
  std::size_t offset(const std::array<std::size_t, Rank>& index) const {
    std::size_t o = 0;
    for (std::size_t d = 0; d < Rank; ++d) o = o * extents_[d] + index[d];
    return o;
  }

  // The one element of a one-element tensor (every rank-0 tensor), numpy's x.item();
  // shape_error when it holds another number of elements.
  T item() const {
    if (data_.size() != 1) detail::throw_item_needs_one_element(extents_, data_.size());
    return data_[0];
  }

  friend bool operator==(const host_tensor&, const host_tensor&) = default;

  // The number of elements of `extents`, or a shape_error if it overflows size_t.
  static std::size_t element_count(const shape<Rank>& extents) {
    std::size_t n = 1;
    for (std::size_t e : extents) n = detail::checked_multiply(n, e, "host_tensor");
    return n;
  }

 private:
  // element_count, or a shape_error if that many elements are more than a std::vector<T>
  // can hold (which would otherwise throw std::length_error, outside typeshard's errors).
  static std::size_t storable_count(const shape<Rank>& extents) {
    const std::size_t n = element_count(extents);
    if (n > std::vector<T>().max_size())
      detail::throw_too_many_elements(extents, n, std::vector<T>().max_size());
    return n;
  }

  shape<Rank> extents_{};
  std::vector<T> data_;
};

// arange<T>(n): [0, 1, ..., n-1], numpy's arange.
template <class T>
[[nodiscard]] host_tensor<T, 1> arange(std::size_t n) {
  host_tensor<T, 1> out({n});
  for (std::size_t i = 0; i < n; ++i) out(i) = static_cast<T>(i);
  return out;
}

// reshape(t, extents): the same values under new extents (same number of elements).
template <std::size_t NewRank, class T, std::size_t Rank>
[[nodiscard]]
host_tensor<T, NewRank> reshape(host_tensor<T, Rank> t, const shape<NewRank>& extents) {
  std::vector<T> values(t.values().begin(), t.values().end());
  return host_tensor<T, NewRank>(extents, std::move(values));
}

}  // namespace typeshard
