// Shared by tests/unit/collectives_*.cpp: serial reference implementations of the tiled
// collectives on host tensors, and brute-force mesh groups, written independently of the
// library's own arithmetic (no detail:: helpers).
#pragma once

#include <array>
#include <cstddef>
#include <random>
#include <utility>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace collectives_test {

namespace ts = typeshard;

// The mesh positions grouped with `position` over the mesh axes `axes` (indices, major
// first), in rank order: every position agreeing on all other coordinates, ordered by its
// coordinates on `axes` read as a mixed-radix number.
template <class Mesh>
std::vector<std::size_t> brute_group(std::size_t position, const std::vector<std::size_t>& axes) {
  const auto mine = Mesh::coordinates(position);
  std::vector<std::pair<std::size_t, std::size_t>> ranked;  // (rank, position)
  for (std::size_t q = 0; q < Mesh::size; ++q) {
    const auto c = Mesh::coordinates(q);
    bool same = true;
    for (std::size_t i = 0; i < Mesh::rank; ++i) {
      bool in_axes = false;
      for (std::size_t a : axes) in_axes = in_axes || a == i;
      if (!in_axes && c[i] != mine[i]) same = false;
    }
    if (!same) continue;
    std::size_t rank = 0;
    for (std::size_t a : axes) rank = rank * Mesh::shape[a] + c[a];
    ranked.emplace_back(rank, q);
  }
  std::vector<std::size_t> out(ranked.size());
  for (const auto& [rank, q] : ranked) out[rank] = q;
  return out;
}

template <class T, std::size_t Rank>
std::size_t flat(const ts::shape<Rank>& s, const std::array<std::size_t, Rank>& i) {
  std::size_t o = 0;
  for (std::size_t d = 0; d < Rank; ++d) o = o * s[d] + i[d];
  return o;
}

// Calls f(index) for every multi-index of shape s, row-major.
template <std::size_t Rank, class F>
void for_each_index(const ts::shape<Rank>& s, F f) {
  for (std::size_t e : s)
    if (e == 0) return;
  std::array<std::size_t, Rank> i{};
  for (;;) {
    f(i);
    std::size_t d = Rank;
    for (;;) {
      if (d == 0) return;
      --d;
      if (++i[d] < s[d]) break;
      i[d] = 0;
    }
  }
}

// t restricted to [start, stop) along dimension dim.
template <class T, std::size_t Rank>
ts::host_tensor<T, Rank> slice_along(const ts::host_tensor<T, Rank>& t, std::size_t dim,
                                     std::size_t start, std::size_t stop) {
  ts::shape<Rank> s = t.extents();
  s[dim] = stop - start;
  ts::host_tensor<T, Rank> out(s);
  for_each_index(s, [&](std::array<std::size_t, Rank> i) {
    std::array<std::size_t, Rank> j = i;
    j[dim] += start;
    out.data()[flat<T>(s, i)] = t.data()[flat<T>(t.extents(), j)];
  });
  return out;
}

// The tensors concatenated along dim.
template <class T, std::size_t Rank>
ts::host_tensor<T, Rank> concat_along(const std::vector<ts::host_tensor<T, Rank>>& parts,
                                      std::size_t dim) {
  ts::shape<Rank> s = parts.at(0).extents();
  s[dim] = 0;
  for (const auto& p : parts) s[dim] += p.extent(dim);
  ts::host_tensor<T, Rank> out(s);
  std::size_t offset = 0;
  for (const auto& p : parts) {
    for_each_index(p.extents(), [&](std::array<std::size_t, Rank> i) {
      std::array<std::size_t, Rank> j = i;
      j[dim] += offset;
      out.data()[flat<T>(s, j)] = p.data()[flat<T>(p.extents(), i)];
    });
    offset += p.extent(dim);
  }
  return out;
}

template <class T, std::size_t Rank, class F>
ts::host_tensor<T, Rank> combine(const std::vector<ts::host_tensor<T, Rank>>& parts, F f) {
  ts::host_tensor<T, Rank> out = parts.at(0);
  for (std::size_t j = 1; j < parts.size(); ++j)
    for (std::size_t i = 0; i < out.size(); ++i) out.data()[i] = f(out.data()[i], parts[j].data()[i]);
  return out;
}

template <class T, std::size_t Rank>
ts::host_tensor<T, Rank> random_tensor(const ts::shape<Rank>& s, std::mt19937& rng) {
  ts::host_tensor<T, Rank> t(s);
  std::uniform_int_distribution<int> v(-100, 100);
  for (T& x : t.values()) x = static_cast<T>(v(rng));
  return t;
}

}  // namespace collectives_test
