// Every collective primitive of the MPI backend (backend.hpp's all_gather, reduce_scatter,
// all_reduce, all_to_all, permute) against a serial reference computed on every rank from
// the same random inputs, and against the thread pool running the same calls: random sizes
// and layouts, equal and unequal pieces, one and several rows, groups over one mesh axis and
// over two (both orders), a group of one (np 2: an axis of size 1), element types from
// uint8 to complex<double> and an opaque struct.
//
// Integers and moves must match exactly. Float sums may differ in the last bits (MPI picks
// its own reduction order, the thread pool sums in group-rank order): they are compared
// with a tolerance, and every member of a group must still hold bitwise the same result.
#include "support.hpp"

#include <algorithm>
#include <array>
#include <complex>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <type_traits>
#include <vector>

namespace {

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x1 = ts::mesh<ts::axis("x", 2), ts::axis("y", 1)>;

// An element type the backend can only move.
struct opaque {
  std::int16_t a;
  char b[5];
  friend bool operator==(const opaque& l, const opaque& r) {
    return l.a == r.a && std::memcmp(l.b, r.b, sizeof l.b) == 0;
  }
};
static_assert(ts::element_type_of<opaque>.kind == ts::element_kind::opaque);

template <class T>
constexpr bool is_floating = std::is_floating_point_v<T> ||
                             std::is_same_v<T, std::complex<float>> ||
                             std::is_same_v<T, std::complex<double>>;
template <class T>
constexpr bool is_complex =
    std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>;

template <class T>
T random_value(std::mt19937_64& rng) {
  if constexpr (std::is_same_v<T, opaque>) {
    opaque o{};
    o.a = static_cast<std::int16_t>(rng());
    for (char& c : o.b) c = static_cast<char>(rng());
    return o;
  } else if constexpr (is_complex<T>) {
    std::uniform_real_distribution<typename T::value_type> d(-1, 1);
    return T(d(rng), d(rng));
  } else if constexpr (std::is_floating_point_v<T>) {
    return std::uniform_real_distribution<T>(-1, 1)(rng);
  } else if constexpr (std::is_signed_v<T>) {
    // Small enough that no sum of 4 overflows (signed overflow is undefined in the reference).
    return static_cast<T>(std::uniform_int_distribution<int>(-100000, 100000)(rng));
  } else {
    return static_cast<T>(rng());  // unsigned sums wrap, on every backend alike
  }
}

// The input of mesh position p for one call: depends on the seed, the call and p only, so
// every rank can compute every member's input.
template <class T>
std::vector<T> input(std::uint64_t seed, std::uint64_t call, std::size_t p, std::size_t n) {
  std::mt19937_64 rng(seed * 1000003u + call * 1009u + p);
  std::vector<T> v(n);
  for (T& x : v) x = random_value<T>(rng);
  return v;
}

template <class T>
T combine(T a, T b, ts::reduce_op op) {
  if constexpr (is_complex<T>) {
    return a + b;
  } else {
    switch (op) {
      case ts::reduce_op::max: return std::max(a, b);
      case ts::reduce_op::min: return std::min(a, b);
      case ts::reduce_op::sum: break;
    }
    return static_cast<T>(a + b);
  }
}

template <class T>
bool close(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if constexpr (is_floating<T>) {
      // At most 4 terms in [-1, 1]: any summation order is within a few ulps of 4.
      const double tol = std::is_same_v<T, float> || std::is_same_v<T, std::complex<float>>
                             ? 1e-5
                             : 1e-12;
      if (std::abs(a[i] - b[i]) > tol) return false;
    } else if (!(a[i] == b[i])) {
      return false;
    }
  }
  return true;
}

template <class T>
std::uint64_t hash_bytes(const std::vector<T>& v) {
  std::uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (std::size_t i = 0; i < v.size() * sizeof(T); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// The group of `position` over the mesh axes `axes` (indices, major first), by brute force:
// the positions agreeing on every other coordinate, ranked by their coordinates on `axes`.
template <class Mesh>
std::vector<std::size_t> brute_group(std::size_t position, const std::vector<std::size_t>& axes) {
  const auto mine = Mesh::coordinates(position);
  std::vector<std::size_t> out(Mesh::size, Mesh::size);
  std::size_t n = 0;
  for (std::size_t q = 0; q < Mesh::size; ++q) {
    const auto c = Mesh::coordinates(q);
    bool same = true;
    for (std::size_t i = 0; i < Mesh::rank; ++i)
      if (std::find(axes.begin(), axes.end(), i) == axes.end() && c[i] != mine[i]) same = false;
    if (!same) continue;
    std::size_t r = 0;
    for (std::size_t a : axes) r = r * Mesh::shape[a] + c[a];
    out[r] = q;
    ++n;
  }
  out.resize(n);
  return out;
}

std::size_t rank_in(const std::vector<std::size_t>& group, std::size_t p) {
  return static_cast<std::size_t>(std::find(group.begin(), group.end(), p) - group.begin());
}

// One primitive call: what a device computes (on any backend) and what it should get.
template <class T>
struct call_case {
  std::function<std::vector<T>(ts::backend&, const ts::collective_group&, std::size_t)> run;
  std::function<std::vector<T>(std::size_t)> expect;
};

// Runs `c` on the MPI backend and on the thread pool; this rank's result must match the
// reference and the thread pool's, and (for reductions) equal its group peers' bit for bit.
template <class T, class Mesh>
void check(ts::cpu_devices& threads, const std::vector<std::size_t>& axes, const call_case<T>& c,
           bool same_bits_in_group) {
  std::vector<std::vector<std::size_t>> groups(Mesh::size);
  for (std::size_t p = 0; p < Mesh::size; ++p) groups[p] = brute_group<Mesh>(p, axes);

  ts::device_mesh<Mesh> on_mpi{mpi_test::devices()};
  std::vector<T> mine;
  std::size_t my_position = Mesh::size;
  mpi_test::devices().run(on_mpi.devices(), [&](std::size_t p) {
    my_position = p;
    mine = c.run(mpi_test::devices(), ts::collective_group{groups[p], rank_in(groups[p], p)}, p);
  });
  REQUIRE(my_position == static_cast<std::size_t>(mpi_test::rank()));

  ts::device_mesh<Mesh> on_threads{threads};
  std::vector<std::vector<T>> theirs(Mesh::size);
  threads.run(on_threads.devices(), [&](std::size_t p) {
    theirs[p] = c.run(threads, ts::collective_group{groups[p], rank_in(groups[p], p)}, p);
  });

  const std::vector<T> expected = c.expect(my_position);
  REQUIRE(close(mine, expected));
  REQUIRE(close(mine, theirs[my_position]));
  if (same_bits_in_group) {
    std::vector<std::uint64_t> hashes(Mesh::size);
    const std::uint64_t h = hash_bytes(mine);
    MPI_Allgather(&h, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
    for (std::size_t q : groups[my_position]) REQUIRE(hashes[q] == h);
  }
}

// The random shape of one call, drawn from the seed alone (the same on every rank).
struct sizes {
  std::size_t rows = 1;
  std::vector<std::size_t> counts;  // per group rank
};

sizes random_sizes(std::mt19937_64& rng, std::size_t n, bool large) {
  sizes s;
  s.rows = std::uniform_int_distribution<std::size_t>(0, 3)(rng) == 0
               ? 1
               : std::uniform_int_distribution<std::size_t>(1, 4)(rng);
  const std::size_t top = large ? 6000 : 5;
  std::uniform_int_distribution<std::size_t> count(large ? top / 2 : 0, top);
  s.counts.assign(n, count(rng));
  if (rng() % 2)  // unequal pieces, as uneven shards give
    for (std::size_t& k : s.counts) k = count(rng);
  return s;
}

template <class T, class Mesh>
void all_gather_case(ts::cpu_devices& threads, const std::vector<std::size_t>& axes,
                     std::uint64_t seed, std::uint64_t call, std::mt19937_64& rng, bool large) {
  const std::vector<std::size_t> g0 = brute_group<Mesh>(0, axes);
  const sizes s = random_sizes(rng, g0.size(), large);
  const std::size_t total = std::accumulate(s.counts.begin(), s.counts.end(), std::size_t{0});
  auto in = [&](std::size_t p) {
    const std::size_t r = rank_in(brute_group<Mesh>(p, axes), p);
    return input<T>(seed, call, p, s.rows * s.counts[r]);
  };
  call_case<T> c;
  c.run = [&](ts::backend& b, const ts::collective_group& g, std::size_t p) {
    const std::vector<T> x = in(p);
    std::vector<T> out(s.rows * total);
    b.all_gather(g, ts::element_type_of<T>, x.data(), out.data(), s.rows, s.counts);
    return out;
  };
  c.expect = [&](std::size_t p) {
    const std::vector<std::size_t> g = brute_group<Mesh>(p, axes);
    std::vector<T> out(s.rows * total);
    std::size_t offset = 0;
    for (std::size_t j = 0; j < g.size(); ++j) {
      const std::vector<T> x = in(g[j]);
      for (std::size_t r = 0; r < s.rows; ++r)
        for (std::size_t k = 0; k < s.counts[j]; ++k)
          out[r * total + offset + k] = x[r * s.counts[j] + k];
      offset += s.counts[j];
    }
    return out;
  };
  INFO("all_gather rows " << s.rows << " counts[0] " << s.counts[0] << " total " << total);
  check<T, Mesh>(threads, axes, c, false);
}

template <class T, class Mesh>
void reduce_scatter_case(ts::cpu_devices& threads, const std::vector<std::size_t>& axes,
                         std::uint64_t seed, std::uint64_t call, std::mt19937_64& rng,
                         ts::reduce_op op, bool large) {
  const std::vector<std::size_t> g0 = brute_group<Mesh>(0, axes);
  const sizes s = random_sizes(rng, g0.size(), large);
  const std::size_t total = std::accumulate(s.counts.begin(), s.counts.end(), std::size_t{0});
  auto in = [&](std::size_t p) { return input<T>(seed, call, p, s.rows * total); };
  call_case<T> c;
  c.run = [&](ts::backend& b, const ts::collective_group& g, std::size_t p) {
    const std::vector<T> x = in(p);
    std::vector<T> out(s.rows * s.counts[g.rank]);
    b.reduce_scatter(g, ts::element_type_of<T>, op, x.data(), out.data(), s.rows, s.counts);
    return out;
  };
  c.expect = [&](std::size_t p) {
    const std::vector<std::size_t> g = brute_group<Mesh>(p, axes);
    const std::size_t me = rank_in(g, p);
    std::size_t offset = 0;
    for (std::size_t j = 0; j < me; ++j) offset += s.counts[j];
    std::vector<T> out(s.rows * s.counts[me]);
    for (std::size_t j = 0; j < g.size(); ++j) {
      const std::vector<T> x = in(g[j]);
      for (std::size_t r = 0; r < s.rows; ++r)
        for (std::size_t k = 0; k < s.counts[me]; ++k) {
          T& o = out[r * s.counts[me] + k];
          const T v = x[r * total + offset + k];
          o = j == 0 ? v : combine(o, v, op);
        }
    }
    return out;
  };
  INFO("reduce_scatter op " << static_cast<int>(op) << " rows " << s.rows << " total " << total);
  check<T, Mesh>(threads, axes, c, false);
}

template <class T, class Mesh>
void all_reduce_case(ts::cpu_devices& threads, const std::vector<std::size_t>& axes,
                     std::uint64_t seed, std::uint64_t call, std::mt19937_64& rng,
                     ts::reduce_op op, bool large) {
  const std::size_t n = std::uniform_int_distribution<std::size_t>(0, large ? 50000 : 40)(rng);
  const bool in_place = rng() % 2;
  auto in = [&](std::size_t p) { return input<T>(seed, call, p, n); };
  call_case<T> c;
  c.run = [&](ts::backend& b, const ts::collective_group& g, std::size_t p) {
    std::vector<T> x = in(p);
    if (in_place) {
      b.all_reduce(g, ts::element_type_of<T>, op, x.data(), x.data(), n);
      return x;
    }
    std::vector<T> out(n);
    b.all_reduce(g, ts::element_type_of<T>, op, x.data(), out.data(), n);
    return out;
  };
  c.expect = [&](std::size_t p) {
    const std::vector<std::size_t> g = brute_group<Mesh>(p, axes);
    std::vector<T> out = in(g[0]);
    for (std::size_t j = 1; j < g.size(); ++j) {
      const std::vector<T> x = in(g[j]);
      for (std::size_t i = 0; i < n; ++i) out[i] = combine(out[i], x[i], op);
    }
    return out;
  };
  INFO("all_reduce op " << static_cast<int>(op) << " n " << n << " in place " << in_place);
  check<T, Mesh>(threads, axes, c, true);
}

// A random layout of `n` pieces of `elements` each: interleaved (pieces side by side within
// each row, as a split along an inner dimension gives) or blocked (piece after piece).
ts::strided_pieces random_layout(std::mt19937_64& rng, std::size_t n, std::size_t elements) {
  std::vector<std::size_t> divisors;
  for (std::size_t d = 1; d <= elements; ++d)
    if (elements % d == 0) divisors.push_back(d);
  const std::size_t rows = divisors[rng() % divisors.size()];
  const std::size_t run = elements / rows;
  if (rng() % 2) return {rows, run, n * run, run};
  return {rows, run, run, elements};
}

std::size_t layout_length(const ts::strided_pieces& l, std::size_t n) {
  return (n - 1) * l.member_stride + (l.rows - 1) * l.stride + l.run;
}

// Element k (row-major) of piece i of a layout.
std::size_t piece_at(const ts::strided_pieces& l, std::size_t i, std::size_t k) {
  return i * l.member_stride + (k / l.run) * l.stride + k % l.run;
}

template <class T, class Mesh>
void all_to_all_case(ts::cpu_devices& threads, const std::vector<std::size_t>& axes,
                     std::uint64_t seed, std::uint64_t call, std::mt19937_64& rng, bool large) {
  const std::size_t n = brute_group<Mesh>(0, axes).size();
  const std::size_t elements =
      std::uniform_int_distribution<std::size_t>(1, large ? 4000 : 12)(rng);
  const ts::strided_pieces sp = random_layout(rng, n, elements);
  const ts::strided_pieces rp = random_layout(rng, n, elements);
  auto in = [&](std::size_t p) { return input<T>(seed, call, p, layout_length(sp, n)); };
  call_case<T> c;
  c.run = [&](ts::backend& b, const ts::collective_group& g, std::size_t p) {
    const std::vector<T> x = in(p);
    std::vector<T> out(layout_length(rp, n));
    b.all_to_all(g, ts::element_type_of<T>, x.data(), out.data(), sp, rp);
    return out;
  };
  c.expect = [&](std::size_t p) {
    const std::vector<std::size_t> g = brute_group<Mesh>(p, axes);
    const std::size_t me = rank_in(g, p);
    std::vector<T> out(layout_length(rp, n));
    for (std::size_t i = 0; i < n; ++i) {
      const std::vector<T> x = in(g[i]);
      for (std::size_t k = 0; k < elements; ++k) out[piece_at(rp, i, k)] = x[piece_at(sp, me, k)];
    }
    return out;
  };
  INFO("all_to_all elements " << elements << " send (" << sp.rows << ", " << sp.run << ", "
                              << sp.stride << ", " << sp.member_stride << ") recv (" << rp.rows
                              << ", " << rp.run << ", " << rp.stride << ", " << rp.member_stride
                              << ")");
  check<T, Mesh>(threads, axes, c, false);
}

template <class T, class Mesh>
void permute_case(ts::cpu_devices& threads, const std::vector<std::size_t>& axes,
                  std::uint64_t seed, std::uint64_t call, std::mt19937_64& rng) {
  const std::size_t n = brute_group<Mesh>(0, axes).size();
  // A partial permutation of the group ranks: j sends to to[j] (or nobody), cnt[j] elements.
  std::vector<std::size_t> to(n), cnt(n), from(n, ts::no_peer);
  std::iota(to.begin(), to.end(), std::size_t{0});
  std::shuffle(to.begin(), to.end(), rng);
  for (std::size_t j = 0; j < n; ++j) {
    if (rng() % 4 == 0) to[j] = ts::no_peer;
    cnt[j] = std::uniform_int_distribution<std::size_t>(0, 6)(rng);
    if (to[j] != ts::no_peer) from[to[j]] = j;
  }
  const std::size_t unsourced = 3;  // what a member with no source expects: zeros
  auto in = [&](std::size_t p) {
    return input<T>(seed, call, p, cnt[rank_in(brute_group<Mesh>(p, axes), p)]);
  };
  auto expects = [&](std::size_t r) { return from[r] == ts::no_peer ? unsourced : cnt[from[r]]; };
  call_case<T> c;
  c.run = [&](ts::backend& b, const ts::collective_group& g, std::size_t p) {
    const std::vector<T> x = in(p);
    std::mt19937_64 garbage(call + p);  // a local engine: run() bodies are concurrent
    std::vector<T> out(expects(g.rank), random_value<T>(garbage));  // overwritten, or zeroed
    b.permute(g, ts::element_type_of<T>, x.data(), x.size(), to[g.rank], out.data(), out.size(),
              from[g.rank]);
    return out;
  };
  c.expect = [&](std::size_t p) {
    const std::vector<std::size_t> g = brute_group<Mesh>(p, axes);
    const std::size_t me = rank_in(g, p);
    if (from[me] == ts::no_peer) return std::vector<T>(unsourced, T{});
    return in(g[from[me]]);
  };
  INFO("permute");
  check<T, Mesh>(threads, axes, c, false);
}

template <class T, class Mesh>
void all_primitives(ts::cpu_devices& threads, std::uint64_t seed, int trials) {
  constexpr bool reducible = !std::is_same_v<T, opaque>;
  const std::vector<std::vector<std::size_t>> axis_sets = {{0}, {1}, {0, 1}, {1, 0}};
  std::mt19937_64 rng(seed);
  std::uint64_t call = 0;
  for (int t = 0; t < trials; ++t) {
    const bool large = t == trials - 1;  // one round of messages past the eager limit
    for (const auto& axes : axis_sets) {
      INFO("seed " << seed << " trial " << t << " group axes " << axes[0]
                   << (axes.size() > 1 ? " " : "")
                   << (axes.size() > 1 ? std::to_string(axes[1]) : std::string()));
      all_gather_case<T, Mesh>(threads, axes, seed, ++call, rng, large);
      all_to_all_case<T, Mesh>(threads, axes, seed, ++call, rng, large);
      permute_case<T, Mesh>(threads, axes, seed, ++call, rng);
      if constexpr (reducible) {
        std::vector<ts::reduce_op> ops{ts::reduce_op::sum};
        if (!is_complex<T>) ops = {ts::reduce_op::sum, ts::reduce_op::max, ts::reduce_op::min};
        for (ts::reduce_op op : ops) {
          reduce_scatter_case<T, Mesh>(threads, axes, seed, ++call, rng, op, large);
          all_reduce_case<T, Mesh>(threads, axes, seed, ++call, rng, op, large);
        }
      }
    }
  }
}

template <class Mesh>
void all_types(std::uint64_t seed) {
  ts::cpu_devices threads{Mesh::size};
  all_primitives<std::int32_t, Mesh>(threads, seed, 4);
  all_primitives<float, Mesh>(threads, seed + 1, 4);
  all_primitives<double, Mesh>(threads, seed + 2, 2);
  all_primitives<std::uint8_t, Mesh>(threads, seed + 3, 2);
  all_primitives<std::int64_t, Mesh>(threads, seed + 4, 2);
  all_primitives<std::complex<double>, Mesh>(threads, seed + 5, 2);
  all_primitives<opaque, Mesh>(threads, seed + 6, 2);
}

}  // namespace

TEST_CASE("MPI backend: every primitive matches a serial reference and the thread pool",
          "[mpi][backend]") {
  const std::uint64_t seed = mpi_test::shared_seed();
  INFO("seed " << seed);
  if (mpi_test::size() == 4) {
    all_types<mesh_2x2>(seed);
  } else if (mpi_test::size() == 2) {
    all_types<mesh_2x1>(seed);
  } else {
    WARN("run with 2 or 4 ranks; nothing checked with " << mpi_test::size());
  }
}

TEST_CASE("MPI backend: collectives outside a per-device function are refused",
          "[mpi][backend]") {
  std::vector<std::size_t> members{0};
  int x = 1;
  REQUIRE_THROWS_AS(mpi_test::devices().all_reduce(ts::collective_group{members, 0},
                                                   ts::element_type_of<int>, ts::reduce_op::sum,
                                                   &x, &x, 1),
                    ts::usage_error);
}
