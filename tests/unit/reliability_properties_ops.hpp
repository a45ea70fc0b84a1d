// tests/unit/reliability_properties_ops.hpp: random programs chaining issue 15's global-view
// ops against a serial reference, shared by tests/unit/reliability_properties_ops_*.cpp (each
// runs it on one mesh; not a test itself). The collectives, matmul and shard_map programs are
// reliability_properties.hpp's; this harness draws the ops that came after it.
//
// Each case draws a rank (1 to 3), extents (even for every spec, or arbitrary: uneven,
// extents smaller than the shard count included), a random order of the pool's devices and a
// spec from the menu below, then runs a short random program of:
//   - einsum with a fresh operand (equations over 1 to 3 letters per operand: contractions,
//     batch letters, outer products, letters summed locally), the operand replicated or
//     sharded like x on the letters they share (so a contracting letter sharded alike gives
//     an unreduced result); an output spec is named where the planner asks for one;
//   - sum / mean / max / min over one dimension or all, with and without ts::keep_dims, or
//     with a named output spec (the plan reduces);
//   - broadcasting binary ops (+, -, *, maximum) with a fresh operand of lower rank or with
//     extent-1 dimensions, on either side, and scalars on either side of + - * /;
//   - softmax and log_softmax along a dimension;
//   - permute / transpose / split_dim / merge_dims (a move the layout cannot make must throw
//     shape_error and leave the state alone);
//   - reshard to another spec of the menu.
// Unreduced results (sum or mean over a sharded dimension, a contraction over a letter sharded
// alike) go through a random linear op (scalings and a negation added up, a contraction with
// a replicated matrix, a sum over a dimension, a transpose or permute) before ts::reshard
// reduces them, and are checked then. A result whose spec is off the menu is resharded to a menu spec.
//
// Checks: after every step, every shard of the result (replicas included) and to_host equal
// the serial computation on the same input data. Mean, softmax and einsum of non-integers
// round differently in another summation order, so each element may differ from the
// reference by 1e-10 times the sum of the magnitudes of its terms (0 for integer data: the
// values start as small integers, and scaling by powers of two keeps them exact). The next
// step starts from the checked result, so errors cannot build up unseen.
//
// Compile time: the choices are made at run time over a fixed menu of 11 (rank, spec) types
// per mesh; each step instantiates a few variants per state type, picked at compile time so
// that together the menu covers every dimension, reduction, keep_dims and move.
//
// Time-bounded: each executable runs cases for TYPESHARD_PROPERTY_SECONDS (default 5). A
// failure prints the case's seed, the executable and the program; TYPESHARD_PROPERTY_SEED=
// <seed> replays exactly that case; TYPESHARD_PROPERTY_VERBOSE=1 prints every program.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <typeshard/typeshard.hpp>

#include "reliability_support.hpp"

namespace ts = typeshard;

namespace prop_ops {

using T = double;
using ts::none;

// ---- the serial reference: dynamic-rank tensors ------------------------------------------------

// Values, and per element the sum of the magnitudes of the terms that made it (the scale of
// its rounding error; data put on the devices: its own magnitude). Every reference op adds
// up its inputs' magnitudes, so a chain inside one step (an unreduced value through linear
// ops) carries the scale of its inputs' rounding too.
struct dyn {
  std::vector<std::size_t> shape;
  std::vector<T> v, mag;

  static dyn zeros(std::vector<std::size_t> s) {
    dyn d;
    d.shape = std::move(s);
    std::size_t n = 1;
    for (std::size_t e : d.shape) n *= e;
    d.v.assign(n, 0);
    d.mag.assign(n, 0);
    return d;
  }
  std::size_t rank() const { return shape.size(); }
  std::size_t size() const { return v.size(); }
};

inline std::string shape_string(const std::vector<std::size_t>& s) {
  std::string out = "(";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

// Row-major strides.
inline std::vector<std::size_t> strides(const std::vector<std::size_t>& s) {
  std::vector<std::size_t> st(s.size(), 1);
  for (std::size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

// Calls f(index) for every index of shape s, row-major.
template <class F>
void each_index(const std::vector<std::size_t>& s, F f) {
  for (std::size_t e : s)
    if (e == 0) return;
  std::vector<std::size_t> i(s.size(), 0);
  for (;;) {
    f(i);
    std::size_t d = s.size();
    for (;;) {
      if (d == 0) return;
      --d;
      if (++i[d] < s[d]) break;
      i[d] = 0;
    }
  }
}

template <std::size_t R>
dyn to_dyn(const ts::host_tensor<T, R>& h) {
  dyn d = dyn::zeros(std::vector<std::size_t>(h.extents().begin(), h.extents().end()));
  std::copy(h.values().begin(), h.values().end(), d.v.begin());
  for (std::size_t i = 0; i < d.size(); ++i) d.mag[i] = std::abs(d.v[i]);
  return d;
}

template <std::size_t R>
ts::host_tensor<T, R> to_host_tensor(const dyn& d) {
  ts::shape<R> s{};
  for (std::size_t k = 0; k < R; ++k) s[k] = d.shape[k];
  ts::host_tensor<T, R> h(s);
  std::copy(d.v.begin(), d.v.end(), h.data());
  return h;
}

// einsum "ab,bc->ac" of a and b (an empty output: shape (1,)).
inline dyn ref_einsum(std::string_view eq, const dyn& a, const dyn& b) {
  const std::size_t comma = eq.find(','), arrow = eq.find("->");
  const std::string_view la = eq.substr(0, comma), lb = eq.substr(comma + 1, arrow - comma - 1),
                         lo = eq.substr(arrow + 2);
  std::string letters;
  std::array<std::size_t, 128> ext{};
  for (std::size_t k = 0; k < la.size(); ++k) ext[std::size_t(la[k])] = a.shape[k];
  for (std::size_t k = 0; k < lb.size(); ++k) ext[std::size_t(lb[k])] = b.shape[k];
  for (char c : std::string(la) + std::string(lb))
    if (letters.find(c) == std::string::npos) letters += c;
  std::vector<std::size_t> out_shape, all_shape;
  for (char c : lo) out_shape.push_back(ext[std::size_t(c)]);
  for (char c : letters) all_shape.push_back(ext[std::size_t(c)]);
  dyn out = dyn::zeros(out_shape.empty() ? std::vector<std::size_t>{1} : out_shape);
  const auto sa = strides(a.shape), sb = strides(b.shape), so = strides(out_shape);
  std::array<std::size_t, 128> pos{};
  each_index(all_shape, [&](const std::vector<std::size_t>& i) {
    for (std::size_t k = 0; k < letters.size(); ++k) pos[std::size_t(letters[k])] = i[k];
    std::size_t oa = 0, ob = 0, oo = 0;
    for (std::size_t k = 0; k < la.size(); ++k) oa += pos[std::size_t(la[k])] * sa[k];
    for (std::size_t k = 0; k < lb.size(); ++k) ob += pos[std::size_t(lb[k])] * sb[k];
    for (std::size_t k = 0; k < lo.size(); ++k) oo += pos[std::size_t(lo[k])] * so[k];
    out.v[oo] += a.v[oa] * b.v[ob];
    out.mag[oo] += a.mag[oa] * std::abs(b.v[ob]) + std::abs(a.v[oa]) * b.mag[ob];
  });
  return out;
}

enum class red : int { sum, mean, max, min };
inline const char* red_name(red k) {
  return k == red::sum ? "sum" : k == red::mean ? "mean" : k == red::max ? "max" : "min";
}

// The reduction over the dimensions marked in `reduced` (keep: with extent 1).
inline dyn ref_reduce(red k, const dyn& a, const std::vector<bool>& reduced, bool keep) {
  std::vector<std::size_t> out_shape, kept_shape(a.rank());
  std::size_t count = 1;
  for (std::size_t d = 0; d < a.rank(); ++d) {
    kept_shape[d] = reduced[d] ? 1 : a.shape[d];
    if (reduced[d]) count *= a.shape[d];
    if (!reduced[d] || keep) out_shape.push_back(kept_shape[d]);
  }
  dyn out = dyn::zeros(out_shape.empty() ? std::vector<std::size_t>{1} : out_shape);
  const T init = k == red::max ? -std::numeric_limits<T>::infinity()
                 : k == red::min ? std::numeric_limits<T>::infinity() : 0;
  std::fill(out.v.begin(), out.v.end(), init);
  const auto sk = strides(kept_shape);
  std::size_t n = 0;
  each_index(a.shape, [&](const std::vector<std::size_t>& i) {
    std::size_t o = 0;
    for (std::size_t d = 0; d < a.rank(); ++d) o += (reduced[d] ? 0 : i[d]) * sk[d];
    const T x = a.v[n++];
    if (k == red::max) out.v[o] = std::max(out.v[o], x);
    else if (k == red::min) out.v[o] = std::min(out.v[o], x);
    else out.v[o] += x;
    if (k == red::max || k == red::min) out.mag[o] = std::max(out.mag[o], a.mag[n - 1]);
    else out.mag[o] += a.mag[n - 1];
  });
  if (k == red::mean)
    for (std::size_t i = 0; i < out.size(); ++i) {
      out.v[i] /= T(count);
      out.mag[i] /= T(count);
    }
  return out;
}

// NumPy broadcasting of f over a and b.
template <class F>
dyn ref_broadcast(const dyn& a, const dyn& b, F f) {
  const std::size_t r = std::max(a.rank(), b.rank());
  std::vector<std::size_t> s(r);
  for (std::size_t d = 0; d < r; ++d) {
    const std::size_t ea = d + a.rank() >= r ? a.shape[d + a.rank() - r] : 1;
    const std::size_t eb = d + b.rank() >= r ? b.shape[d + b.rank() - r] : 1;
    s[d] = ea == 1 ? eb : ea;
  }
  dyn out = dyn::zeros(s);
  const auto sa = strides(a.shape), sb = strides(b.shape);
  std::size_t n = 0;
  each_index(s, [&](const std::vector<std::size_t>& i) {
    std::size_t oa = 0, ob = 0;
    for (std::size_t d = 0; d < a.rank(); ++d) oa += (a.shape[d] == 1 ? 0 : i[d + r - a.rank()]) * sa[d];
    for (std::size_t d = 0; d < b.rank(); ++d) ob += (b.shape[d] == 1 ? 0 : i[d + r - b.rank()]) * sb[d];
    out.v[n] = f(a.v[oa], b.v[ob]);
    out.mag[n] = a.mag[oa] + b.mag[ob];
    ++n;
  });
  return out;
}

// softmax (or log_softmax) along dimension dim.
inline dyn ref_softmax(const dyn& a, std::size_t dim, bool log) {
  dyn out = dyn::zeros(a.shape);
  const auto st = strides(a.shape);
  std::vector<std::size_t> rows = a.shape;
  rows[dim] = 1;
  const std::size_t n = a.shape[dim];
  each_index(rows, [&](const std::vector<std::size_t>& i) {
    std::size_t o = 0;
    for (std::size_t d = 0; d < a.rank(); ++d) o += i[d] * st[d];
    T m = -std::numeric_limits<T>::infinity(), s = 0;
    for (std::size_t k = 0; k < n; ++k) m = std::max(m, a.v[o + k * st[dim]]);
    for (std::size_t k = 0; k < n; ++k) s += std::exp(a.v[o + k * st[dim]] - m);
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t e = o + k * st[dim];
      const T z = a.v[e] - m;
      out.v[e] = log ? z - std::log(s) : std::exp(z) / s;
      out.mag[e] = log ? std::abs(z) + std::abs(std::log(s)) + T(n) + a.mag[e]
                       : (std::exp(z) / s) * (std::abs(z) + T(n) + a.mag[e]);
    }
  });
  return out;
}

// Output dimension i is input dimension perm[i].
inline dyn ref_permute(const dyn& a, const std::vector<std::size_t>& perm) {
  std::vector<std::size_t> s(a.rank());
  for (std::size_t i = 0; i < a.rank(); ++i) s[i] = a.shape[perm[i]];
  dyn out = dyn::zeros(s);
  const auto sa = strides(a.shape);
  std::size_t n = 0;
  each_index(s, [&](const std::vector<std::size_t>& i) {
    std::size_t o = 0;
    for (std::size_t k = 0; k < a.rank(); ++k) o += i[k] * sa[perm[k]];
    out.v[n] = a.v[o];
    out.mag[n] = a.mag[o];
    ++n;
  });
  return out;
}

inline dyn ref_map(dyn a, T scale, T shift) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    a.v[i] = a.v[i] * scale + shift;
    a.mag[i] = a.mag[i] * std::abs(scale) + std::abs(a.v[i]) + std::abs(shift);
  }
  return a;
}

// ---- the menu ------------------------------------------------------------------------------

template <class... S>
struct menu {
  static constexpr std::size_t size = sizeof...(S);
};
template <class M, std::size_t J>
struct menu_at;
template <class... S, std::size_t J>
struct menu_at<menu<S...>, J> {
  using type = std::tuple_element_t<J, std::tuple<S...>>;
};

using menu_1 = menu<ts::spec<none>, ts::spec<"x">, ts::spec<"y">>;
using menu_2 = menu<ts::spec<"x", none>, ts::spec<none, ts::axes("y", "x")>, ts::spec<"x", "y">,
                    ts::spec<none, none>>;
using menu_3 = menu<ts::spec<"x", none, "y">, ts::spec<none, "y", none>, ts::spec<"y", "x", none>,
                    ts::spec<none, none, none>>;
template <std::size_t R>
using menu_for = std::conditional_t<R == 1, menu_1, std::conditional_t<R == 2, menu_2, menu_3>>;

template <class Mesh, class S, std::size_t R>
using arr = ts::sharded_array<T, Mesh, S, ts::dextents<R>>;

template <class Mesh, class M1, class M2, class M3>
struct state_of;
template <class Mesh, class... A, class... B, class... C>
struct state_of<Mesh, menu<A...>, menu<B...>, menu<C...>> {
  using type = std::variant<arr<Mesh, A, 1>..., arr<Mesh, B, 2>..., arr<Mesh, C, 3>...>;
};

// The index of spec S (as an array of rank R spells it) in the menu of rank R, or its size.
template <class Mesh, class S, std::size_t R>
constexpr std::size_t menu_index() {
  std::size_t k = 0, found = menu_for<R>::size;
  [&]<class... X>(menu<X...>*) {
    ((std::is_same_v<typename arr<Mesh, X, R>::spec, S> ? (found = found == menu_for<R>::size ? k : found, ++k)
                                                        : ++k),
     ...);
  }(static_cast<menu_for<R>*>(nullptr));
  return found;
}

// with_index<Menu>(j, f): f.template operator()<j-th spec>().
template <class... X, class F>
void with_index(menu<X...>*, std::size_t j, F& f) {
  std::size_t k = 0;
  ((k++ == j ? (f.template operator()<X>(), void()) : void()), ...);
}
template <class Menu, class F>
void with_index(std::size_t j, F&& f) {
  with_index(static_cast<Menu*>(nullptr), j, f);
}

// dispatch<N>(i, f): f.template operator()<i>() for a run-time i < N.
template <std::size_t N, class F>
void dispatch(std::size_t i, F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((I == i ? (f.template operator()<I>(), void()) : void()), ...);
  }(std::make_index_sequence<N>{});
}

// A spec of rank R whose entries are S's at the dimensions `from` names (R entries; an entry
// of R or more: ts::none).
template <class S, std::array<std::size_t, 3> From, std::size_t R, class = std::make_index_sequence<R>>
struct picked_spec;
template <class S, std::array<std::size_t, 3> From, std::size_t R, std::size_t... I>
struct picked_spec<S, From, R, std::index_sequence<I...>> {
  using type = ts::spec<(From[I] < S::size ? S::dims[From[I]] : ts::dim_spec{})...>;
};
template <std::size_t R, class = std::make_index_sequence<R>>
struct replicated_spec;
template <std::size_t R, std::size_t... I>
struct replicated_spec<R, std::index_sequence<I...>> {
  using type = ts::spec<((void)I, ts::dim_spec{})...>;
};

// The number of shards along dimension d of an array of spec S on Mesh.
template <class Mesh, class S>
std::size_t shards_along(std::size_t d) {
  std::size_t n = 1;
  for (std::size_t j = 0; j < S::dims[d].count; ++j) n *= Mesh::size_of(S::dims[d].axes[j]);
  return n;
}

// ---- comparing an array with the reference -------------------------------------------------

inline bool close(T have, T want, T mag) {
  if (have == want) return true;
  return std::abs(have - want) <= 1e-10 * mag;
}

template <class A>
std::string mismatch(const A& a, const dyn& ref) {
  constexpr std::size_t R = A::rank;
  std::ostringstream out;
  if (ref.rank() != R || !std::equal(ref.shape.begin(), ref.shape.end(), a.extents().begin())) {
    out << "extents " << ts::to_string(a.extents()) << ", reference " << shape_string(ref.shape);
    return out.str();
  }
  const auto st = strides(ref.shape);
  for (const auto& s : a.addressable_shards()) {
    std::size_t n = 0;
    std::string bad;
    each_index(std::vector<std::size_t>(s.shape.begin(), s.shape.end()), [&](const std::vector<std::size_t>& i) {
      if (!bad.empty()) return;
      std::size_t o = 0;
      for (std::size_t d = 0; d < R; ++d) o += (s.index[d].start + i[d]) * st[d];
      const T have = s.data[n++];
      if (!close(have, ref.v[o], ref.mag[o])) {
        std::ostringstream e;
        e.precision(17);
        e << "shard at mesh position " << s.mesh_position << " (device " << s.device.id << ", index "
          << ts::to_string(s.index) << "): element " << shape_string(i) << " is " << have
          << ", the reference has " << ref.v[o] << " (tolerance " << 1e-10 * ref.mag[o] << ")";
        bad = e.str();
      }
    });
    if (!bad.empty()) return bad;
    if (n != s.data.size()) return "a shard holds more elements than its shape";
  }
  const auto h = ts::to_host(a);
  for (std::size_t i = 0; i < ref.size(); ++i)
    if (!close(h.data()[i], ref.v[i], ref.mag[i])) return "to_host differs from the reference";
  return {};
}

// ---- one case ------------------------------------------------------------------------------

struct failure {
  std::string what;
};

struct case_stats {
  std::size_t steps = 0;
  std::size_t expected_errors = 0;
  std::size_t unreduced = 0;
};

template <class Mesh>
struct runner {
  using state_t = typename state_of<Mesh, menu_1, menu_2, menu_3>::type;
  template <class S, std::size_t R>
  using array = arr<Mesh, S, R>;

  ts::cpu_devices& devices;
  std::mt19937_64& rng;
  std::ostringstream& trace;
  case_stats& stats;
  std::optional<ts::device_mesh<Mesh>> m;
  dyn ref;
  std::optional<state_t> state;

  std::size_t pick(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); }
  bool coin() { return pick(2) == 0; }

  [[noreturn]] void fail(const std::string& what) { throw failure{what}; }

  dyn random_dyn(std::vector<std::size_t> s) {
    dyn d = dyn::zeros(std::move(s));
    std::uniform_int_distribution<int> v(-3, 3);
    for (std::size_t i = 0; i < d.size(); ++i) {
      d.v[i] = v(rng);
      d.mag[i] = std::abs(d.v[i]);
    }
    return d;
  }
  template <std::size_t R, class S>
  auto put_dyn(const dyn& d) {
    return ts::device_put<S>(*m, to_host_tensor<R>(d));
  }

  // An extent: a multiple of the mesh size (even for any spec), or 1 to 2 * size + 1.
  std::size_t random_extent(bool even, std::size_t rank) {
    if (even) return Mesh::size * (1 + pick(rank == 3 ? 1 : 2));
    return 1 + pick(rank == 3 ? Mesh::size + 1 : 2 * Mesh::size + 1);
  }

  template <class A>
  void check(const A& a, const dyn& want, const std::string& after) {
    const std::string bad = mismatch(a, want);
    if (!bad.empty()) fail("after " + after + ": " + bad);
  }

  template <class F>
  void with_state(F&& f) {
    std::visit(f, *state);
  }

  // a as the state (of type array<Target, R>: a static extent, such as keep_dims' 1, becomes
  // dynamic).
  template <class Target, class A>
  void adopt(const A& a) {
    constexpr std::size_t R = A::rank;
    if constexpr (std::is_same_v<A, array<Target, R>>)
      state.emplace(a);
    else
      state.emplace(array<Target, R>(ts::adopt_shards, a.device_mesh(), a.extents(), a.shared_shards()));
  }
  template <class S>
  static constexpr std::size_t off_menu_choice() {
    std::size_t h = S::size;
    for (std::size_t d = 0; d < S::size; ++d) h += (d + 1) * S::dims[d].count;
    return h;
  }

  // A checked result becomes the state (resharded to a menu spec if its spec is off the
  // menu), and the reference continues from its data.
  // a with dynamic extents (a static one, such as keep_dims' 1, becomes dynamic): results
  // of every op then share one instantiation of the checks per (spec, rank, unreduced).
  template <class A>
  static auto as_dynamic(const A& a) {
    using D = ts::sharded_array<T, Mesh, typename A::spec, ts::dextents<A::rank>, typename A::unreduced_type>;
    if constexpr (std::is_same_v<A, D>) return a;
    else return D(ts::adopt_shards, a.device_mesh(), a.extents(), a.shared_shards());
  }

  template <class A>
  void set_state(const A& a, const dyn& want, const std::string& what) {
    if constexpr (!std::is_same_v<A, decltype(as_dynamic(a))>) set_state(as_dynamic(a), want, what);
    else store(a, want, what);
  }
  template <class A>
  void store(const A& a, const dyn& want, const std::string& what) {
    static_assert(A::unreduced_type::empty);
    constexpr std::size_t R = A::rank;
    using S = typename A::spec;
    check(a, want, what);
    constexpr std::size_t j = menu_index<Mesh, S, R>();
    if constexpr (j < menu_for<R>::size) {
      adopt<typename menu_at<menu_for<R>, j>::type>(a);
    } else {
      // Off the menu: a fixed menu spec of the same rank (which one depends on S).
      using Target = typename menu_at<menu_for<R>, off_menu_choice<S>() % menu_for<R>::size>::type;
      trace << "    (" << S::to_string() << " is off the menu: reshard<" << Target::to_string() << ">)\n";
      const auto r = ts::reshard<Target>(a);
      check(r, want, what + ", reshard off the menu");
      adopt<Target>(r);
    }
    with_state([&](const auto& x) { ref = to_dyn(ts::to_host(x)); });
  }

  // Values grow through products: past 2^20 the state is scaled by 2^-20 (exact).
  void tame() {
    T top = 0;
    for (T v : ref.v) top = std::max(top, std::abs(v));
    if (top <= T(1 << 20)) return;
    trace << "    (scaled by 2^-20)\n";
    const T s = std::ldexp(T(1), -20);
    with_state([&](const auto& a) { set_state(a * s, ref_map(ref, s, 0), "scaling"); });
  }

  // The position of A in the state variant: varies each type's compile-time choices.
  template <class A>
  static constexpr std::size_t salt() {
    return []<class... X>(std::variant<X...>*) {
      std::size_t k = 0, found = 0;
      ((std::is_same_v<X, A> ? (found = k, ++k) : ++k), ...);
      return found;
    }(static_cast<state_t*>(nullptr)) + Mesh::size;  // other choices on another mesh
  }

  // ---- device_put ----

  void put() {
    const std::size_t r = 1 + pick(3);
    const bool even = coin();
    std::vector<std::size_t> s(r);
    for (auto& e : s) e = random_extent(even, r);
    const dyn d = random_dyn(s);
    const std::size_t j = pick(4);
    dispatch<3>(r - 1, [&]<std::size_t I>() {
      constexpr std::size_t R = I + 1;
      with_index<menu_for<R>>(j % menu_for<R>::size, [&]<class S>() {
        trace << "  x = device_put<" << S::to_string() << ">" << shape_string(s) << "\n";
        set_state(put_dyn<R, S>(d), d, "device_put");
      });
    });
  }

  // ---- scalars on either side ----

  void scalar() {
    const std::size_t k = pick(5);
    const T c = T(1 + pick(3));
    static constexpr const char* names[] = {"x + c", "c - x", "c * x", "x / 2", "x * c"};
    const std::string what = std::string(names[k]) + " (c = " + std::to_string(int(c)) + ")";
    trace << "  " << what << "\n";
    with_state([&](const auto& a) {
      switch (k) {
        case 0: set_state(a + c, ref_map(ref, 1, c), what); break;
        case 1: set_state(c - a, ref_map(ref, -1, c), what); break;
        case 2: set_state(c * a, ref_map(ref, c, 0), what); break;
        case 3: set_state(a / T(2), ref_map(ref, 0.5, 0), what); break;
        default: set_state(a * c, ref_map(ref, c, 0), what);
      }
    });
  }

  // ---- broadcasting binary ops ----

  void broadcast() {
    with_state([&]<class A>(const A& a) {
      constexpr std::size_t R = A::rank;
      using S = typename A::spec;
      const std::size_t form = pick(R >= 2 ? 5 : 3);
      if (form < 3) {
        // y: rank R, replicated, some dimensions of extent 1 (they stretch).
        using Y = typename replicated_spec<R>::type;
        std::vector<std::size_t> ys = ref.shape;
        for (auto& e : ys)
          if (coin()) e = 1;
        const dyn hy = random_dyn(ys);
        const auto y = put_dyn<R, Y>(hy);
        static constexpr const char* names[] = {"x + y", "y - x", "maximum(x, y)"};
        const std::string what = std::string(names[form]) + " (y " + Y::to_string() + " " + shape_string(ys) + ")";
        trace << "  " << what << "\n";
        if (form == 0) set_state(a + y, ref_broadcast(ref, hy, [](T u, T v) { return u + v; }), what);
        else if (form == 1) set_state(y - a, ref_broadcast(hy, ref, [](T u, T v) { return u - v; }), what);
        else set_state(ts::maximum(a, y), ref_broadcast(ref, hy, [](T u, T v) { return std::max(u, v); }), what);
      } else if constexpr (R >= 2) {
        // y: x's trailing R - 1 dimensions, sharded alike (an unsharded one may be 1).
        using Y = typename picked_spec<S, std::array<std::size_t, 3>{1, 2, 3}, R - 1>::type;
        std::vector<std::size_t> ys(ref.shape.begin() + 1, ref.shape.end());
        for (std::size_t d = 0; d + 1 < R; ++d)
          if (S::dims[d + 1].is_none() && pick(3) == 0) ys[d] = 1;
        const dyn hy = random_dyn(ys);
        const auto y = put_dyn<R - 1, Y>(hy);
        const std::string what = std::string(form == 3 ? "x * y" : "y - x") + " (y " + Y::to_string() + " " +
                                 shape_string(ys) + ")";
        trace << "  " << what << "\n";
        if (form == 3) set_state(a * y, ref_broadcast(ref, hy, [](T u, T v) { return u * v; }), what);
        else set_state(y - a, ref_broadcast(hy, ref, [](T u, T v) { return u - v; }), what);
      }
    });
  }

  // ---- unreduced values: a linear op, then reshard reduces ----

  template <class U>
  void absorb(const U& u, const dyn& want, const std::string& what) {
    constexpr std::size_t R = U::rank;
    using S = typename U::spec;
    ++stats.unreduced;
    const std::size_t k = pick(R >= 2 ? 6 : 4);
    trace << "    unreduced over " << U::unreduced_type::to_string() << ": ";
    if (k == 1 || k == 2) {
      trace << "-u * 2 + u * 0.5, reshard\n";
      set_state(ts::reshard<S>(-u * T(2) + u * T(0.5)), ref_map(want, -1.5, 0), what + ", -u * 2 + u * 0.5, reshard");
    } else if (k == 3) {
      // Linear in each operand: a contraction with a fresh replicated matrix.
      constexpr ts::einsum_subscripts E = R == 1 ? ts::einsum_subscripts("i,ij->j")
                                          : R == 2 ? ts::einsum_subscripts("ij,jk->ik")
                                                   : ts::einsum_subscripts("bij,jk->bik");
      using W = ts::spec<none, none>;
      const dyn hw = random_dyn({want.shape[R - 1], 1 + pick(4)});
      const auto w = put_dyn<2, W>(hw);
      if constexpr (ts::einsum_valid<E, U, std::remove_cvref_t<decltype(w)>>) {
        const auto c = ts::einsum<E>(u, w);
        using C = std::remove_cvref_t<decltype(c)>;
        trace << "einsum<\"" << std::string_view(E.chars, E.length) << "\">(u, w " << shape_string(hw.shape)
              << ") -> " << C::spec::to_string() << C::unreduced_type::to_string() << ", reshard\n";
        set_state(ts::reshard<typename C::spec>(c), ref_einsum(std::string_view(E.chars, E.length), want, hw),
                  what + ", einsum with w, reshard");
      } else {
        trace << "reshard\n";
        set_state(ts::reshard<S>(u), want, what + ", reshard");
      }
    } else if constexpr (R >= 2) {
      if (k == 4) {
        const auto t = [&] {
          if constexpr (R == 2) return ts::transpose(u);
          else return ts::permute<2, 0, 1>(u);
        }();
        using P = std::remove_cvref_t<decltype(t)>;
        static_assert(std::is_same_v<typename P::unreduced_type, typename U::unreduced_type>);
        trace << (R == 2 ? "transpose" : "permute<2, 0, 1>") << ", reshard\n";
        set_state(ts::reshard<typename P::spec>(t),
                  ref_permute(want, R == 2 ? std::vector<std::size_t>{1, 0} : std::vector<std::size_t>{2, 0, 1}),
                  what + ", permute, reshard");
      } else if (k == 5) {
        const auto t = ts::sum<0>(u);
        using P = std::remove_cvref_t<decltype(t)>;
        std::vector<bool> dims(R, false);
        dims[0] = true;
        trace << "sum<0> -> " << P::spec::to_string() << P::unreduced_type::to_string() << ", reshard\n";
        set_state(ts::reshard<typename P::spec>(t), ref_reduce(red::sum, want, dims, false),
                  what + ", sum<0>, reshard");
      } else {
        trace << "reshard\n";
        set_state(ts::reshard<S>(u), want, what + ", reshard");
      }
    } else {
      trace << "reshard\n";
      set_state(ts::reshard<S>(u), want, what + ", reshard");
    }
  }

  // A result: unreduced ones go through absorb; a rank-0 one (a reduction over every
  // dimension) is checked, on every shard and through item(), and the state stays.
  template <class A>
  void result(const A& a, const dyn& want, const std::string& what) {
    if constexpr (A::rank == 0) {
      const auto full = [&] {
        if constexpr (A::unreduced_type::empty) return a;
        else return ts::reshard<ts::spec<>>(a);  // the psum
      }();
      for (const auto& s : full.addressable_shards())
        if (s.data.size() != 1 || !close(s.data[0], want.v[0], want.mag[0]))
          fail("after " + what + ": a shard of the rank-0 result differs from the reference");
      if (!close(full.item(), want.v[0], want.mag[0]))
        fail("after " + what + ": the rank-0 result's item() differs from the reference");
    } else if constexpr (A::unreduced_type::empty) {
      set_state(a, want, what);
    } else {
      absorb(as_dynamic(a), want, what);
    }
  }

  // ---- reductions ----

  template <red K, bool Keep, int... D, class A>
  static auto reduce_call(const A& a) {
    if constexpr (K == red::sum) {
      if constexpr (Keep) return ts::sum<D...>(a, ts::keep_dims);
      else return ts::sum<D...>(a);
    } else if constexpr (K == red::mean) {
      if constexpr (Keep) return ts::mean<D...>(a, ts::keep_dims);
      else return ts::mean<D...>(a);
    } else if constexpr (K == red::max) {
      if constexpr (Keep) return ts::max<D...>(a, ts::keep_dims);
      else return ts::max<D...>(a);
    } else {
      if constexpr (Keep) return ts::min<D...>(a, ts::keep_dims);
      else return ts::min<D...>(a);
    }
  }

  void reduce() {
    with_state([&]<class A>(const A& a) {
      constexpr std::size_t R = A::rank;
      constexpr std::size_t codes = 8 * (R + 1);  // kind x (each dimension or all) x keep
      const std::size_t j = pick(4);
      dispatch<4>(j, [&]<std::size_t J>() {
        if constexpr (J == 3) {
          // A named output spec: the plan reduces (psum, or psum_scatter into it).
          constexpr int D = int(salt<A>() % R);
          constexpr std::size_t OR = R > 1 ? R - 1 : 1;  // rank 1: a rank-0 result, spec<>
          using Out = std::conditional_t<
              R == 1, ts::spec<>, typename menu_at<menu_for<OR>, salt<A>() % menu_for<OR>::size>::type>;
          constexpr bool mean = salt<A>() % 2 == 1;
          std::vector<bool> dims(R, false);
          dims[D] = true;
          trace << "  " << (mean ? "mean<" : "sum<") << Out::to_string() << ", " << D << ">(x)\n";
          const auto r = [&] {
            if constexpr (mean) return ts::mean<Out, D>(a);
            else return ts::sum<Out, D>(a);
          }();
          result(r, ref_reduce(mean ? red::mean : red::sum, ref, dims, false), "a reduction to a named spec");
        } else {
          constexpr std::size_t code = (salt<A>() * 7 + J * 5) % codes;
          constexpr red K = red(code % 4);
          constexpr std::size_t dim = code / 4 % (R + 1);  // R: every dimension
          constexpr bool keep = code / (4 * (R + 1)) == 1;
          std::vector<bool> dims(R, dim == R);
          if (dim < R) dims[dim] = true;
          const std::string what = std::string(red_name(K)) + "<" + (dim < R ? std::to_string(dim) : "") + ">(x" +
                                   (keep ? ", keep_dims)" : ")");
          trace << "  " << what << "\n";
          const auto r = [&] {
            if constexpr (dim == R) return reduce_call<K, keep>(a);
            else return reduce_call<K, keep, int(dim)>(a);
          }();
          result(r, ref_reduce(K, ref, dims, keep), what);
        }
      });
    });
  }

  // ---- softmax ----

  void softmax() {
    const bool log = coin();
    with_state([&]<class A>(const A& a) {
      constexpr std::size_t R = A::rank;
      if (log) {
        constexpr int D = int((salt<A>() + 1) % R);
        trace << "  log_softmax<" << D << ">(x)\n";
        set_state(ts::log_softmax<D>(a), ref_softmax(ref, D, true), "log_softmax");
      } else {
        constexpr int D = int(salt<A>() % R);
        trace << "  softmax<" << D << ">(x)\n";
        set_state(ts::softmax<D>(a), ref_softmax(ref, D, false), "softmax");
      }
    });
  }

  // ---- dimension moves ----

  // A move that the layout cannot make must throw shape_error and leave x alone.
  template <class A, class Op>
  void expect_shape_error(const A& a, const std::string& what, Op op) {
    trace << " -> the blocks would move: expect a shape_error\n";
    bool threw = false;
    try {
      (void)op();
    } catch (const ts::shape_error& e) {
      // The message names the call ("typeshard: split_dim<1, 2>: ...") and the fix.
      const std::string text = e.what();
      threw = text.rfind("typeshard: " + what + "<", 0) == 0 && text.find("; ") != std::string::npos;
      if (!threw) fail(what + ": the message '" + text + "' does not name the call and a fix");
    } catch (const std::exception& e) {
      fail(what + ": wrong exception: " + e.what());
    }
    if (!threw) fail(what + ": no exception");
    ++stats.expected_errors;
    check(a, ref, what + " (must leave x alone)");
  }

  // ceil(n / k) == ceil(parts / k) * (n / parts), parts dividing n: the doc's condition.
  static bool keeps(std::size_t n, std::size_t parts, std::size_t k) {
    return n % parts == 0 && (n + k - 1) / k == (parts + k - 1) / k * (n / parts);
  }

  void move() {
    with_state([&]<class A>(const A& a) {
      constexpr std::size_t R = A::rank;
      using S = typename A::spec;
      const std::size_t k = pick(2);
      if (k == 0 && R >= 2) {
        if constexpr (R == 2) {
          trace << "  transpose(x)\n";
          set_state(ts::transpose(a), ref_permute(ref, {1, 0}), "transpose");
        } else if constexpr (R == 3) {
          constexpr std::size_t q = salt<A>() % 3;
          constexpr std::array<std::size_t, 3> p = q == 0 ? std::array<std::size_t, 3>{2, 0, 1}
                                                   : q == 1 ? std::array<std::size_t, 3>{1, 0, 2}
                                                            : std::array<std::size_t, 3>{0, 2, 1};
          trace << "  permute<" << p[0] << ", " << p[1] << ", " << p[2] << ">(x)\n";
          set_state(ts::permute<p[0], p[1], p[2]>(a), ref_permute(ref, {p[0], p[1], p[2]}), "permute");
        }
      } else if (R <= 2 && (R == 1 || coin())) {
        constexpr std::size_t D = salt<A>() % R;
        constexpr std::size_t Parts = salt<A>() % 3 == 2 ? 4 : 2;
        const std::size_t n = ref.shape[D];
        trace << "  split_dim<" << D << ", " << Parts << ">(x)";
        if constexpr (R <= 2) {
          if (!keeps(n, Parts, shards_along<Mesh, S>(D)))
            return expect_shape_error(a, "split_dim", [&] { return ts::split_dim<D, Parts>(a); });
          trace << "\n";
          dyn want = ref;
          want.shape.insert(want.shape.begin() + D + 1, n / Parts);
          want.shape[D] = Parts;
          set_state(ts::split_dim<D, Parts>(a), want, "split_dim");
        }
      } else if constexpr (R >= 2) {
        // merge_dims<D> with D + 1 unsharded: the first such D, if any.
        constexpr std::size_t D = !S::dims[1].is_none() && R == 3 ? 1 : 0;
        if constexpr (!S::dims[D + 1].is_none()) {
          trace << "  (merge_dims: no unsharded minor dimension in " << S::to_string() << ")\n";
        } else {
          const std::size_t major = ref.shape[D], minor = ref.shape[D + 1];
          const std::size_t shards = shards_along<Mesh, S>(D);
          trace << "  merge_dims<" << D << ">(x)";
          if (minor != 1 && major % shards != 0 && !keeps(major * minor, major, shards))
            return expect_shape_error(a, "merge_dims", [&] { return ts::merge_dims<D>(a); });
          trace << "\n";
          dyn want = ref;
          want.shape[D] = major * minor;
          want.shape.erase(want.shape.begin() + D + 1);
          set_state(ts::merge_dims<D>(a), want, "merge_dims");
        }
      }
    });
  }

  // ---- einsum ----

  template <ts::einsum_subscripts E>
  struct equation {
    static constexpr std::string_view text{E.chars, E.length};
    static constexpr std::string_view lhs = text.substr(0, text.find(','));
    static constexpr std::string_view rhs = text.substr(text.find(',') + 1, text.find("->") - text.find(',') - 1);
    static constexpr std::size_t w_rank = rhs.size();
    static constexpr std::size_t out_rank = text.size() - text.find("->") - 2;
    // For each letter of w: its position in x's letters, or 3 (w's own: unsharded).
    static constexpr std::array<std::size_t, 3> from = [] {
      std::array<std::size_t, 3> f{3, 3, 3};
      for (std::size_t k = 0; k < rhs.size(); ++k) {
        const std::size_t at = lhs.find(rhs[k]);
        f[k] = at == std::string_view::npos ? 3 : at;
      }
      return f;
    }();
  };

  template <ts::einsum_subscripts E, bool Aligned, class A>
  void einsum_with(const A& a) {
    using eq = equation<E>;
    constexpr std::size_t WR = eq::w_rank;
    using W = std::conditional_t<Aligned, typename picked_spec<typename A::spec, eq::from, WR>::type,
                                 typename replicated_spec<WR>::type>;
    std::vector<std::size_t> ws(WR);
    for (std::size_t k = 0; k < WR; ++k)
      ws[k] = eq::from[k] < 3 ? ref.shape[eq::from[k]] : random_extent(coin(), 2);
    const dyn hw = random_dyn(ws);
    const auto w = put_dyn<WR, W>(hw);
    using WA = std::remove_cvref_t<decltype(w)>;
    const std::string what = "einsum<\"" + std::string(eq::text) + "\">(x, w " + W::to_string() + " " +
                             shape_string(ws) + ")";
    trace << "  " << what;
    const dyn want = ref_einsum(eq::text, ref, hw);
    if constexpr (ts::einsum_valid<E, A, WA>) {
      const auto c = ts::einsum<E>(a, w);
      using C = std::remove_cvref_t<decltype(c)>;
      trace << " -> " << C::spec::to_string() << C::unreduced_type::to_string() << "\n";
      result(c, want, what);
    } else {
      using Out = typename replicated_spec<eq::out_rank>::type;
      static_assert(ts::einsum_valid<E, A, WA, Out>);
      trace << ": needs an output spec, " << Out::to_string() << "\n";
      set_state(ts::einsum<E, Out>(a, w), want, what + " to " + Out::to_string());
    }
  }

  void einsum() {
    const std::size_t j = pick(3);
    with_state([&]<class A>(const A& a) {
      constexpr std::size_t R = A::rank;
      dispatch<3>(j, [&]<std::size_t J>() {
        // Two equations per type (the menu covers all three), one with both operand kinds.
        constexpr std::size_t e = (salt<A>() + J / 2) % 3;
        constexpr bool aligned = J != 1;
        if constexpr (R == 1) {
          if constexpr (e == 0) einsum_with<"i,ij->j", aligned>(a);
          else if constexpr (e == 1) einsum_with<"i,j->ij", aligned>(a);
          else einsum_with<"i,i->i", aligned>(a);
        } else if constexpr (R == 2) {
          if constexpr (e == 0) einsum_with<"ij,jk->ik", aligned>(a);
          else if constexpr (e == 1) einsum_with<"ij,kj->ki", aligned>(a);
          else einsum_with<"ij,j->i", aligned>(a);
        } else {
          if constexpr (e == 0) einsum_with<"bij,bjk->bik", aligned>(a);
          else if constexpr (e == 1) einsum_with<"bij,jk->bik", aligned>(a);
          else einsum_with<"bij,jk->ik", aligned>(a);
        }
      });
    });
  }

  // ---- reshard ----

  void reshard() {
    const std::size_t j = pick(4);
    with_state([&]<class A>(const A& a) {
      constexpr std::size_t R = A::rank;
      with_index<menu_for<R>>(j % menu_for<R>::size, [&]<class S>() {
        trace << "  reshard<" << S::to_string() << ">(x)\n";
        set_state(ts::reshard<S>(a), ref, "reshard");
      });
    });
  }

  void run() {
    // The mesh's devices: a random subset of the pool in random order.
    std::vector<ts::device_id> all(devices.device_count());
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    m.emplace(devices, std::vector<ts::device_id>(all.begin(), all.begin() + Mesh::size));
    trace << "mesh " << m->to_string() << "\n";
    put();
    const std::size_t steps = 3 + pick(6);
    for (std::size_t s = 0; s < steps; ++s) {
      ++stats.steps;
      switch (pick(10)) {
        case 0: put(); break;
        case 1: scalar(); break;
        case 2: broadcast(); break;
        case 3:
        case 4: reduce(); break;
        case 5: softmax(); break;
        case 6: move(); break;
        case 7:
        case 8: einsum(); break;
        default: reshard();
      }
      tame();
    }
  }
};

// Runs the case of one seed; returns an empty string, or the failure with the program.
template <class Mesh>
std::string run_case(ts::cpu_devices& devices, std::uint64_t seed, case_stats& stats, bool verbose) {
  std::mt19937_64 rng(seed);
  std::ostringstream trace;
  try {
    runner<Mesh> r{devices, rng, trace, stats, {}, {}, {}};
    r.run();
  } catch (const failure& f) {
    return "program:\n" + trace.str() + "failure: " + f.what;
  } catch (const std::exception& e) {
    return "program:\n" + trace.str() + "unexpected exception: " + e.what();
  }
  if (verbose) std::printf("seed %llu\n%s", static_cast<unsigned long long>(seed), trace.str().c_str());
  return {};
}

// The property test on Mesh, run by the executable named `executable`.
template <class Mesh>
void property_test(const char* executable) {
  using clock = std::chrono::steady_clock;
  ts::cpu_devices devices{8};
  double seconds = 5;
  if (const char* env = std::getenv("TYPESHARD_PROPERTY_SECONDS")) seconds = std::stod(env);
  std::optional<std::uint64_t> replay;
  if (const char* env = std::getenv("TYPESHARD_PROPERTY_SEED")) replay = std::stoull(env);
  const bool verbose = std::getenv("TYPESHARD_PROPERTY_VERBOSE") != nullptr;

  const std::uint64_t base =
      replay ? *replay : (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  reliability::watchdog dog("property cases", std::chrono::seconds(static_cast<long>(seconds) + 600));
  case_stats stats;
  std::size_t cases = 0;
  const auto start = clock::now();
  do {
    const std::uint64_t seed = replay ? *replay : base + cases;
    const std::string failed = run_case<Mesh>(devices, seed, stats, verbose);
    ++cases;
    if (!failed.empty())
      FAIL("case seed " << seed << " failed; replay it with TYPESHARD_PROPERTY_SEED=" << seed << " "
                        << executable << "\n" << failed);
  } while (!replay && std::chrono::duration<double>(clock::now() - start).count() < seconds);
  std::printf("%s: %zu cases, %zu steps (%zu expected errors, %zu unreduced results) in %.1f s; seeds %llu to %llu\n",
              executable, cases, stats.steps, stats.expected_errors, stats.unreduced,
              std::chrono::duration<double>(clock::now() - start).count(),
              static_cast<unsigned long long>(base), static_cast<unsigned long long>(base + cases - 1));
  CHECK(cases >= 1);
}

}  // namespace prop_ops
