// tests/unit/reliability_properties.hpp: random programs against a serial reference, shared
// by tests/unit/reliability_properties_*.cpp (each runs it over its own list of meshes, so
// that no translation unit instantiates everything; not a test itself).
//
// Each case draws a mesh (from the executable's compile-time list; together: 1, 2 and 3
// axes, odd sizes, a size-1 axis), a rank (1 to 3), extents (even for every spec, or
// arbitrary: uneven, sometimes 0), a random subset of the pool's devices in random order, a
// spec from the mesh's menu, and then runs a short random program of device_put (from a host
// tensor or a per-device callback), elementwise operations, reshard (also onto a reordering
// of the devices), matmul (a named output spec, or the plan's own, reduced afterwards by
// reshard or the global psum) and shard_map programs built from collectives (psum, pmean,
// pmax, all_gather, psum_scatter, all_to_all, shift, ppermute) and local matmuls. After every
// step each shard of the result (replicas included) must equal the serial reference's slice
// bit for bit (the values are small integers, so every order of summation gives the same
// doubles). Steps that must fail (a shard_map over extents its blocks do not divide, an
// all_to_all or psum_scatter the group does not divide) must throw the documented error and
// leave the state as it was.
//
// Time-bounded: each executable runs cases for TYPESHARD_PROPERTY_SECONDS (default 5). A
// failure prints the case's seed, the executable and the program; TYPESHARD_PROPERTY_SEED=
// <seed> replays exactly that case; TYPESHARD_PROPERTY_VERBOSE=1 prints every program.
//
// Compile time: every type-level choice is a menu (2 to 5 specs per mesh and rank, a sample
// of the shard_map programs per spec), so a TU instantiates reshard for each pair of a menu,
// matmul for each compatible pair, and shard_map for each program that applies to a spec.
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
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <typeshard/typeshard.hpp>

#include "reliability_support.hpp"

namespace ts = typeshard;

namespace prop {

using T = double;

// ---- meshes and menus --------------------------------------------------------------------------

using mesh_1 = ts::mesh<ts::axis("i", 3)>;
using mesh_2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_3 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2), ts::axis("z", 2)>;
using mesh_s = ts::mesh<ts::axis("a", 2), ts::axis("b", 1), ts::axis("c", 3)>;

template <class... M>
struct mesh_list {
  static constexpr std::size_t size = sizeof...(M);
};

template <class... S>
struct menu {
  static constexpr std::size_t size = sizeof...(S);
};

using ts::none;
template <class Mesh, std::size_t R>
struct menu_of;

template <> struct menu_of<mesh_1, 1> { using type = menu<ts::spec<none>, ts::spec<"i">>; };
template <> struct menu_of<mesh_1, 2> {
  using type = menu<ts::spec<"i", none>, ts::spec<none, "i">, ts::spec<none, none>>;
};
template <> struct menu_of<mesh_1, 3> {
  using type = menu<ts::spec<"i", none, none>, ts::spec<none, none, "i">, ts::spec<none, "i", none>>;
};

template <> struct menu_of<mesh_2, 1> {
  using type = menu<ts::spec<none>, ts::spec<"x">, ts::spec<ts::axes("y", "x")>>;
};
template <> struct menu_of<mesh_2, 2> {
  using type = menu<ts::spec<"x", "y">, ts::spec<"y", none>, ts::spec<none, ts::axes("x", "y")>,
                    ts::spec<none, none>, ts::spec<"y", "x">>;
};
template <> struct menu_of<mesh_2, 3> {
  using type = menu<ts::spec<"x", none, "y">, ts::spec<none, "y", none>, ts::spec<"x", "y", none>>;
};

template <> struct menu_of<mesh_3, 1> {
  using type = menu<ts::spec<ts::axes("x", "y", "z")>, ts::spec<"z">, ts::spec<none>>;
};
template <> struct menu_of<mesh_3, 2> {
  using type = menu<ts::spec<"x", ts::axes("z", "y")>, ts::spec<ts::axes("y", "x"), none>,
                    ts::spec<none, "z">, ts::spec<"z", "x">, ts::spec<none, none>>;
};
template <> struct menu_of<mesh_3, 3> {
  using type = menu<ts::spec<"x", "y", "z">, ts::spec<"y", none, none>, ts::spec<none, "x", none>>;
};

template <> struct menu_of<mesh_s, 1> { using type = menu<ts::spec<ts::axes("c", "a")>, ts::spec<"b">>; };
template <> struct menu_of<mesh_s, 2> {
  using type = menu<ts::spec<"c", "a">, ts::spec<ts::axes("a", "b"), none>, ts::spec<none, "c">,
                    ts::spec<none, none>>;
};
template <> struct menu_of<mesh_s, 3> {
  using type = menu<ts::spec<"a", none, "c">, ts::spec<none, "c", none>, ts::spec<"a", "b", none>>;
};

// with_index<List>(j, f): f.template operator()<j-th element>(); j < List::size.
template <template <class...> class L, class... X, class F>
void with_index(L<X...>*, std::size_t j, F& f) {
  std::size_t k = 0;
  ((k++ == j ? (f.template operator()<X>(), void()) : void()), ...);
}
template <class List, class F>
void with_index(std::size_t j, F&& f) {
  with_index(static_cast<List*>(nullptr), j, f);
}

// ---- spec arithmetic at compile time -----------------------------------------------------------

constexpr ts::dim_spec single(ts::detail::axis_name a) {
  ts::dim_spec d{};
  d.axes[0] = a;
  d.count = 1;
  return d;
}

// with_dim<S, D, New>: S with dimension D's entry replaced by New.
template <class S, std::size_t D, ts::dim_spec New, class = std::make_index_sequence<S::size>>
struct with_dim;
template <class S, std::size_t D, ts::dim_spec New, std::size_t... I>
struct with_dim<S, D, New, std::index_sequence<I...>> {
  using type = ts::spec<(I == D ? New : S::dims[I])...>;
};

// The name of mesh axis A (a variable template: lambdas use it without capturing).
template <class Mesh, std::size_t A>
inline constexpr ts::detail::axis_name axis_at = Mesh::axes[A].name;

// The dimension of S sharded over mesh axis a, or R.
template <class Mesh, class S, std::size_t R>
constexpr std::size_t dim_of_axis(std::size_t a) {
  for (std::size_t d = 0; d < R; ++d)
    if (S::dims[d].uses(Mesh::axes[a].name)) return d;
  return R;
}

// ---- shard_map programs ----------------------------------------------------------------------

enum class prog : int {
  psum_free,       // psum over an axis the spec does not use: x * size
  pmean_free,      // pmean over it: x
  pmax_free,       // pmax over it: x
  psum_two_free,   // psum over two unused axes at once: x * size * size2
  psum_scatter,    // psum_scatter over an unused axis along a replicated dimension
  all_to_all,      // an axis that alone shards dim d moves to a replicated dim d2
  shift,           // ring shift along a used axis
  ppermute_one,    // ppermute (0 -> 1) along a used axis: zeros elsewhere
  gather_slice,    // all_gather a sharded dimension, then keep this device's slice: x
  local_matmul,    // x . W with W replicated (the last dimension unsharded)
};

struct prog_desc {
  prog kind = prog::psum_free;
  std::size_t axis = 0;
  std::size_t axis2 = 0;
  std::size_t dim = 0;
  std::size_t dim2 = 0;
};

struct prog_list {
  std::array<prog_desc, 64> items{};
  std::size_t n = 0;
  constexpr void add(prog_desc p) { items[n++] = p; }
};

// The programs that apply to spec S (a sample, to keep the instantiations few: every kind of
// collective, over every axis where it matters).
template <class Mesh, class S, std::size_t R>
constexpr prog_list programs_for() {
  prog_list l;
  std::size_t last_none = R;  // the last replicated dimension, or R
  for (std::size_t e = 0; e < R; ++e)
    if (S::dims[e].is_none()) last_none = e;
  bool first_unused = true, first_used = true;
  for (std::size_t a = 0; a < Mesh::rank; ++a) {
    const std::size_t d = dim_of_axis<Mesh, S, R>(a);
    if (d == R) {
      l.add({prog::psum_free, a});
      if (last_none < R) l.add({prog::psum_scatter, a, 0, last_none});
      if (first_unused) {
        l.add({prog::pmean_free, a});
        l.add({prog::pmax_free, a});
        for (std::size_t a2 = a + 1; a2 < Mesh::rank; ++a2)
          if (dim_of_axis<Mesh, S, R>(a2) == R) {
            l.add({prog::psum_two_free, a, a2});
            break;
          }
      }
      first_unused = false;
    } else {
      l.add({prog::shift, a, 0, d});
      if (first_used && Mesh::axes[a].size >= 2) l.add({prog::ppermute_one, a, 0, d});
      if (S::dims[d].count == 1 && last_none < R) l.add({prog::all_to_all, a, 0, d, last_none});
      first_used = false;
    }
  }
  for (std::size_t d = 0; d < R; ++d)
    if (!S::dims[d].is_none()) l.add({prog::gather_slice, 0, 0, d});
  if (R >= 2 && S::dims[R - 1].is_none()) l.add({prog::local_matmul});
  return l;
}

// ---- host reference --------------------------------------------------------------------------

template <std::size_t R>
using host = ts::host_tensor<T, R>;

template <std::size_t R, class F>
void for_each_index(const ts::shape<R>& s, F f) {
  for (std::size_t e : s)
    if (e == 0) return;
  std::array<std::size_t, R> i{};
  for (;;) {
    f(i);
    std::size_t d = R;
    for (;;) {
      if (d == 0) return;
      --d;
      if (++i[d] < s[d]) break;
      i[d] = 0;
    }
  }
}

template <std::size_t R>
std::size_t flat(const ts::shape<R>& s, const std::array<std::size_t, R>& i) {
  std::size_t o = 0;
  for (std::size_t d = 0; d < R; ++d) o = o * s[d] + i[d];
  return o;
}

inline T clamp(T v) { return std::fmod(v, 11.0); }

template <std::size_t R, class F>
host<R> map_host(host<R> h, F f) {
  for (T& v : h.values()) v = f(v);
  return h;
}

// C[b..., i, k] = sum_j A[b..., i, j] W[b..., j, k]; W of rank 2 is shared by every batch.
template <std::size_t R, std::size_t RW>
host<R> matmul_host(const host<R>& a, const host<RW>& w) {
  ts::shape<R> s = a.extents();
  s[R - 1] = w.extent(RW - 1);
  host<R> c(s);
  const std::size_t k = a.extent(R - 1);
  for_each_index(s, [&](const std::array<std::size_t, R>& i) {
    T acc = 0;
    std::array<std::size_t, R> ai = i;
    std::array<std::size_t, RW> wi{};
    for (std::size_t d = 0; d + 2 < RW; ++d) wi[d] = i[d + (R - RW)];
    wi[RW - 1] = i[R - 1];
    for (std::size_t j = 0; j < k; ++j) {
      ai[R - 1] = j;
      wi[RW - 2] = j;
      acc += a.data()[flat(a.extents(), ai)] * w.data()[flat(w.extents(), wi)];
    }
    c.data()[flat(s, i)] = acc;
  });
  return c;
}

// Shards along dimension d of spec S, and the stride of axis a within that dimension's
// axis list (the product of the sizes of the axes after it).
template <class Mesh, class S>
std::size_t shards_along(std::size_t d) {
  std::size_t n = 1;
  for (std::size_t j = 0; j < S::dims[d].count; ++j) n *= Mesh::size_of(S::dims[d].axes[j]);
  return n;
}
template <class Mesh, class S>
std::size_t stride_of(std::size_t d, std::size_t a) {
  std::size_t stride = 1;
  bool after = false;
  for (std::size_t j = 0; j < S::dims[d].count; ++j) {
    if (after) stride *= Mesh::size_of(S::dims[d].axes[j]);
    if (S::dims[d].axes[j] == Mesh::axes[a].name) after = true;
  }
  return stride;
}

// The blocks along dimension d move: block b receives block source(b), or zeros if none.
template <class Mesh, class S, std::size_t R, class Source>
host<R> move_blocks(const host<R>& h, std::size_t d, Source source) {
  const std::size_t blk = h.extent(d) / shards_along<Mesh, S>(d);
  host<R> out(h.extents());
  for_each_index(h.extents(), [&](std::array<std::size_t, R> i) {
    const std::size_t o = flat(h.extents(), i);
    const std::size_t b = i[d] / blk;
    const std::optional<std::size_t> from = source(b);
    if (!from) return;
    i[d] = *from * blk + i[d] % blk;
    out.data()[o] = h.data()[flat(h.extents(), i)];
  });
  return out;
}

// ---- comparing an array with the reference ------------------------------------------------------

template <class A, std::size_t R>
std::string mismatch(const A& a, const host<R>& ref) {
  std::ostringstream out;
  if (a.extents() != ref.extents()) {
    out << "extents " << ts::to_string(a.extents()) << ", reference " << ts::to_string(ref.extents());
    return out.str();
  }
  for (const auto& s : a.addressable_shards()) {
    std::size_t n = 0;
    bool bad = false;
    for_each_index(s.shape, [&](const std::array<std::size_t, R>& i) {
      if (bad) return;
      std::array<std::size_t, R> g{};
      for (std::size_t d = 0; d < R; ++d) g[d] = s.index[d].start + i[d];
      const T want = ref.data()[flat(ref.extents(), g)];
      const T have = s.data[n++];
      if (std::memcmp(&want, &have, sizeof(T)) != 0) {
        out << "shard at mesh position " << s.mesh_position << " (device " << s.device.id
            << ", index " << ts::to_string(s.index) << "): element " << ts::to_string(ts::shape<R>(i))
            << " is " << have << ", the reference has " << want;
        bad = true;
      }
    });
    if (bad) return out.str();
    if (n != s.data.size()) return "a shard holds more elements than its shape";
  }
  if (!reliability::same_bits(ts::to_host(a), ref)) return "to_host differs from the reference";
  return {};
}

// ---- one case ----------------------------------------------------------------------------------

struct failure {
  std::string what;
};

struct case_stats {
  std::size_t steps = 0;
  std::size_t expected_errors = 0;
};

template <class Mesh, std::size_t R>
struct runner {
  using M = typename menu_of<Mesh, R>::type;
  template <class S>
  using arr = ts::sharded_array<T, Mesh, S, ts::dextents<R>>;

  template <class L>
  struct variant_of;
  template <class... S>
  struct variant_of<menu<S...>> {
    using type = std::variant<arr<S>...>;
  };
  using state_t = typename variant_of<M>::type;

  ts::cpu_devices& devices;
  std::mt19937_64& rng;
  std::ostringstream& trace;
  case_stats& stats;
  std::vector<ts::device_id> ids;    // the devices of the mesh, in mesh order
  std::vector<ts::device_id> other;  // the same devices in another order
  std::optional<ts::device_mesh<Mesh>> m, m_other;
  host<R> ref;
  std::optional<state_t> state;

  std::size_t pick(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng); }
  bool coin() { return pick(2) == 0; }

  template <std::size_t Q>
  host<Q> random_host(const ts::shape<Q>& s) {
    host<Q> h(s);
    std::uniform_int_distribution<int> v(-3, 3);
    for (T& x : h.values()) x = v(rng);
    return h;
  }

  std::size_t random_extent(bool even) {
    const std::size_t cap = R == 3 ? Mesh::size + 1 : 2 * Mesh::size + 2;
    if (even) return Mesh::size * (1 + pick(R == 3 ? 1 : 2));  // even for any spec
    return pick(cap + 1);  // uneven for some specs, sometimes 0
  }

  [[noreturn]] void fail(const std::string& what) { throw failure{what}; }

  template <class A>
  void check(const A& a, const char* after) {
    const std::string bad = mismatch(a, ref);
    if (!bad.empty()) fail(std::string("after ") + after + ": " + bad);
  }

  // A result whose spec is S (perhaps spelled as another type) becomes the state.
  template <class S, class A>
  void set_state(const A& a) {
    static_assert(std::is_same_v<typename A::spec, typename arr<S>::spec>);
    static_assert(A::unreduced_type::empty);
    if constexpr (std::is_same_v<A, arr<S>>)
      state.emplace(a);
    else
      state.emplace(arr<S>(ts::adopt_shards, a.device_mesh(), a.extents(), a.shared_shards()));
  }

  template <class F>
  void with_state(F&& f) {
    std::visit(f, *state);
  }

  template <class S>
  static constexpr std::size_t menu_index() {
    std::size_t k = 0, found = M::size;
    [&]<class... X>(menu<X...>*) { ((std::is_same_v<X, S> ? (found = k, ++k) : ++k), ...); }(static_cast<M*>(nullptr));
    return found;
  }

  // An operation that must throw E with `part` in its message, leaving the state alone.
  template <class E, class A, class Op>
  void expect_error(const A& a, const char* what, const char* part, Op op) {
    bool threw = false;
    try {
      op();
    } catch (const E& e) {
      threw = std::string(e.what()).find(part) != std::string::npos;
      if (!threw) fail(std::string(what) + ": the message '" + e.what() + "' lacks '" + part + "'");
    } catch (const std::exception& e) {
      fail(std::string(what) + ": wrong exception: " + e.what());
    }
    if (!threw) fail(std::string(what) + ": no exception");
    ++stats.expected_errors;
    check(a, what);  // untouched
  }

  // ---- the steps ----

  void put() {
    ts::shape<R> s{};
    const bool even = coin();
    for (std::size_t d = 0; d < R; ++d) s[d] = random_extent(even);
    ref = random_host(s);
    const std::size_t j = pick(M::size);
    const bool callback = coin();
    const ts::device_mesh<Mesh>& mesh = coin() ? *m : *m_other;
    with_index<M>(j, [&]<class S>() {
      trace << "  device_put<" << S::to_string() << ">(" << ts::to_string(s)
            << (callback ? ", make_block" : "") << ")\n";
      if (callback) {
        set_state<S>(ts::device_put<S>(mesh, s, [&](const ts::index_slices<R>& ix) {
          ts::shape<R> local{};
          for (std::size_t d = 0; d < R; ++d) local[d] = ix[d].size();
          host<R> b(local);
          for_each_index(local, [&](std::array<std::size_t, R> i) {
            const std::size_t o = flat(local, i);
            for (std::size_t d = 0; d < R; ++d) i[d] += ix[d].start;
            b.data()[o] = ref.data()[flat(ref.extents(), i)];
          });
          return b;
        }));
      } else {
        set_state<S>(ts::device_put<S>(mesh, ref));
      }
    });
    with_state([&](const auto& a) { check(a, "device_put"); });
  }

  void unary() {
    const std::size_t k = pick(5);
    static constexpr const char* names[] = {"x * 2", "-x", "relu(x)", "clamp(x)", "clamp(x * x)"};
    trace << "  " << names[k] << "\n";
    with_state([&]<class A>(const A& a) {
      using S = typename A::spec;
      switch (k) {
        case 0: set_state<S>(a * 2.0); ref = map_host(ref, [](T v) { return v * 2; }); break;
        case 1: set_state<S>(-a); ref = map_host(ref, [](T v) { return -v; }); break;
        case 2: set_state<S>(ts::relu(a)); ref = map_host(ref, [](T v) { return v < 0 ? 0.0 : v; }); break;
        case 3: set_state<S>(ts::map(a, clamp)); ref = map_host(ref, clamp); break;
        default:
          set_state<S>(ts::map(a * a, clamp));
          ref = map_host(ref, [](T v) { return clamp(v * v); });
      }
    });
    with_state([&](const auto& a) { check(a, names[k]); });
  }

  void binary() {
    const std::size_t k = pick(4);
    static constexpr const char* names[] = {"x + y", "x - y", "clamp(x * y)", "maximum(x, y)"};
    trace << "  " << names[k] << " (y fresh, same spec and devices)\n";
    with_state([&]<class A>(const A& a) {
      using S = typename A::spec;
      const host<R> hy = random_host(ref.extents());
      const auto y = ts::device_put<S>(a.device_mesh(), hy);
      host<R> r = ref;
      for (std::size_t i = 0; i < r.size(); ++i) {
        const T x = ref.data()[i], v = hy.data()[i];
        r.data()[i] = k == 0 ? x + v : k == 1 ? x - v : k == 2 ? clamp(x * v) : std::max(x, v);
      }
      switch (k) {
        case 0: set_state<S>(a + y); break;
        case 1: set_state<S>(a - y); break;
        case 2: set_state<S>(ts::map(a * y, clamp)); break;
        default: set_state<S>(ts::maximum(a, y));
      }
      ref = r;
    });
    with_state([&](const auto& a) { check(a, names[k]); });
  }

  void reshard(bool onto_other_devices) {
    const std::size_t j = pick(M::size);
    with_state([&]<class A>(const A& a) {
      with_index<M>(j, [&]<class S>() {
        if (onto_other_devices) {
          const ts::device_mesh<Mesh>& target = a.device_mesh() == *m ? *m_other : *m;
          trace << "  reshard<" << S::to_string() << ">(x, " << target.to_string() << ")\n";
          set_state<S>(ts::reshard<S>(a, target));
        } else {
          trace << "  reshard<" << S::to_string() << ">(x)\n";
          set_state<S>(ts::reshard<S>(a));
        }
      });
    });
    with_state([&](const auto& a) { check(a, "reshard"); });
  }

  // The rhs specs of the menu whose batch dimensions match S's.
  template <class S, class Rhs>
  static constexpr bool batch_compatible() {
    for (std::size_t d = 0; d + 2 < R; ++d)
      if (!(S::dims[d] == Rhs::dims[d])) return false;
    return true;
  }

  void matmul(bool named) {
    if constexpr (R >= 2) {
      const std::size_t j = pick(M::size);
      with_state([&]<class A>(const A& a) {
        using S = typename A::spec;
        with_index<M>(j, [&]<class Rhs>() {
          if constexpr (!batch_compatible<S, Rhs>()) {
            return;  // not a valid pairing (rule 2): no step
          } else {
            ts::shape<R> ws = a.extents();
            ws[R - 2] = a.extent(R - 1);
            ws[R - 1] = random_extent(coin());
            const host<R> hw = random_host(ws);
            const auto w = ts::device_put<Rhs>(a.device_mesh(), hw);
            const host<R> want = map_host(matmul_host(ref, hw), clamp);
            if (named) {
              trace << "  clamp(matmul<" << S::to_string() << ">(x, w: " << Rhs::to_string() << " "
                    << ts::to_string(ws) << "))\n";
              set_state<S>(ts::map(ts::matmul<S>(a, w), clamp));
            } else {
              using plan = ts::matmul_plan_for<A, decltype(w)>;
              if constexpr (plan::choice.problem != ts::detail::einsum_problem::none) {
                trace << "  (matmul with " << Rhs::to_string() << " needs an output spec: skipped)\n";
                return;
              } else {
                using U = typename plan::out_unreduced;
                trace << "  matmul(x, w: " << Rhs::to_string() << " " << ts::to_string(ws)
                      << ") -> " << plan::out_spec::to_string() << U::to_string();
                const auto c = ts::matmul(a, w);
                if constexpr (!U::empty) {
                  // Reduce with the global psum over the unreduced axes, or with reshard.
                  if (coin()) {
                    trace << ", psum, reshard<" << S::to_string() << ">, clamp\n";
                    const auto reduced = [&]<std::size_t... I>(std::index_sequence<I...>) {
                      return ts::psum<U::axes[I]...>(c);
                    }(std::make_index_sequence<U::size>{});
                    set_state<S>(ts::map(ts::reshard<S>(reduced), clamp));
                  } else {
                    trace << ", reshard<" << S::to_string() << ">, clamp\n";
                    set_state<S>(ts::map(ts::reshard<S>(c), clamp));
                  }
                } else {
                  trace << ", reshard<" << S::to_string() << ">, clamp\n";
                  set_state<S>(ts::map(ts::reshard<S>(c), clamp));
                }
              }
            }
            ref = want;
          }
        });
      });
      with_state([&](const auto& a) { check(a, "matmul"); });
    }
  }

  // ---- shard_map programs ----

  template <class B>
  static B slice_back(const B& like, const auto& g, std::size_t d, std::size_t start) {
    B out(like.context(), like.extents());
    std::size_t rows = 1, inner = 1;
    for (std::size_t e = 0; e < d; ++e) rows *= like.extent(e);
    for (std::size_t e = d + 1; e < R; ++e) inner *= like.extent(e);
    const std::size_t n = like.extent(d), gn = g.extent(d);
    T* o = out.data();
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t k = 0; k < n; ++k)
        std::copy_n(g.data() + (r * gn + start + k) * inner, inner, o + (r * n + k) * inner);
    return out;
  }

  template <class S, prog_desc P>
  void run_program(const arr<S>& a) {
    constexpr ts::detail::axis_name A1 = axis_at<Mesh, P.axis>;  // for the trace
    constexpr ts::detail::axis_name A2 = axis_at<Mesh, P.axis2>;
    const std::size_t size1 = Mesh::axes[P.axis].size, size2 = Mesh::axes[P.axis2].size;
    bool even = true;
    for (std::size_t d = 0; d < R; ++d) even = even && a.extent(d) % shards_along<Mesh, S>(d) == 0;
    auto expect_uneven = [&](auto f) {
      trace << " -> uneven blocks: expect a shape_error\n";
      expect_error<ts::shape_error>(a, "shard_map over uneven blocks", "not divisible by its", [&] { (void)f(a); });
    };

    if constexpr (P.kind == prog::psum_free || P.kind == prog::pmean_free || P.kind == prog::pmax_free ||
                  P.kind == prog::psum_two_free) {
      const auto f = ts::shard_map<Mesh, S, S>([](const auto& b) {
        if constexpr (P.kind == prog::psum_free) return ts::psum<axis_at<Mesh, P.axis>>(b);
        else if constexpr (P.kind == prog::pmean_free) return ts::pmean<axis_at<Mesh, P.axis>>(b);
        else if constexpr (P.kind == prog::pmax_free) return ts::pmax<axis_at<Mesh, P.axis>>(b);
        else return ts::psum<axis_at<Mesh, P.axis>, axis_at<Mesh, P.axis2>>(b);
      });
      trace << "  shard_map<" << S::to_string() << ">: "
            << (P.kind == prog::psum_free ? "psum" : P.kind == prog::pmean_free ? "pmean"
                : P.kind == prog::pmax_free ? "pmax" : "psum")
            << "<" << A1.view() << (P.kind == prog::psum_two_free ? std::string(", ") + std::string(A2.view()) : "")
            << ">";
      if (!even) return expect_uneven(f);
      trace << "\n";
      const T factor = P.kind == prog::psum_free ? T(size1) : P.kind == prog::psum_two_free ? T(size1 * size2) : 1;
      set_state<S>(f(a));
      ref = map_host(ref, [&](T v) { return v * factor; });
    } else if constexpr (P.kind == prog::psum_scatter) {
      using Out = typename with_dim<S, P.dim, single(A1)>::type;
      const auto f = ts::shard_map<Mesh, S, Out>([](const auto& b) { return ts::psum_scatter<axis_at<Mesh, P.axis>>(b, P.dim); });
      trace << "  shard_map<" << S::to_string() << " -> " << Out::to_string() << ">: psum_scatter<"
            << A1.view() << ">(dim " << P.dim << ")";
      if (!even) return expect_uneven(f);
      if (a.extent(P.dim) % size1 != 0) {
        trace << " -> slices of unequal size: expect a shape_error\n";
        return expect_error<ts::shape_error>(a, "psum_scatter into unequal slices", "equal shape",
                                             [&] { (void)f(a); });
      }
      trace << ", reshard back\n";
      const auto r = f(a);
      ref = map_host(ref, [&](T v) { return v * T(size1); });
      check(r, "psum_scatter");
      set_state<S>(ts::reshard<S>(r));
    } else if constexpr (P.kind == prog::all_to_all) {
      using Mid = typename with_dim<S, P.dim, ts::dim_spec{}>::type;
      using Out = typename with_dim<Mid, P.dim2, single(A1)>::type;
      const auto f = ts::shard_map<Mesh, S, Out>([](const auto& b) { return ts::all_to_all<axis_at<Mesh, P.axis>>(b, P.dim2, P.dim); });
      trace << "  shard_map<" << S::to_string() << " -> " << Out::to_string() << ">: all_to_all<"
            << A1.view() << ">(split " << P.dim2 << ", concat " << P.dim << ")";
      if (!even) return expect_uneven(f);
      if (a.extent(P.dim2) % size1 != 0) {
        trace << " -> split extent not divisible: expect a device_error\n";
        return expect_error<ts::device_error>(a, "all_to_all of an indivisible extent",
                                              "not divisible by the group size", [&] { (void)f(a); });
      }
      trace << ", reshard back\n";
      const auto r = f(a);
      check(r, "all_to_all");
      set_state<S>(ts::reshard<S>(r));
    } else if constexpr (P.kind == prog::shift || P.kind == prog::ppermute_one) {
      const std::size_t k = 1 + pick(std::max<std::size_t>(size1, 2) - 1);
      const auto f = ts::shard_map<Mesh, S, S>([k](const auto& b) {
        if constexpr (P.kind == prog::shift) {
          return ts::shift<axis_at<Mesh, P.axis>>(b, static_cast<std::ptrdiff_t>(k));
        } else {
          (void)k;
          return ts::ppermute<axis_at<Mesh, P.axis>>(b, {{0, 1}});
        }
      });
      trace << "  shard_map<" << S::to_string() << ">: "
            << (P.kind == prog::shift ? "shift<" : "ppermute<") << A1.view()
            << (P.kind == prog::shift ? ">(" + std::to_string(k) + ")" : ">({0, 1})");
      if (!even) return expect_uneven(f);
      trace << "\n";
      set_state<S>(f(a));
      const std::size_t stride = stride_of<Mesh, S>(P.dim, P.axis);
      ref = move_blocks<Mesh, S, R>(ref, P.dim, [&](std::size_t b) -> std::optional<std::size_t> {
        const std::size_t c = b / stride % size1;
        if constexpr (P.kind == prog::shift) {
          const std::size_t from = (c + size1 - k % size1) % size1;
          return b - c * stride + from * stride;
        } else {
          if (c != 1) return std::nullopt;
          return b - stride;
        }
      });
    } else if constexpr (P.kind == prog::gather_slice) {
      const auto f = ts::shard_map<Mesh, S, S>([](const auto& b) {
        return [&]<std::size_t... J>(std::index_sequence<J...>) {
          const auto g = ts::all_gather<S::dims[P.dim].axes[J]...>(b, P.dim);
          const std::size_t r = ts::axis_index<S::dims[P.dim].axes[J]...>(b);
          using B = std::remove_cvref_t<decltype(b)>;
          return slice_back<B>(b, g, P.dim, r * b.extent(P.dim));
        }(std::make_index_sequence<S::dims[P.dim].count>{});
      });
      trace << "  shard_map<" << S::to_string() << ">: all_gather(dim " << P.dim << "), keep own slice";
      if (!even) return expect_uneven(f);
      trace << "\n";
      set_state<S>(f(a));
    } else if constexpr (P.kind == prog::local_matmul) {
      using W = ts::spec<none, none>;
      const ts::shape<2> ws{a.extent(R - 1), random_extent(coin())};
      const host<2> hw = random_host(ws);
      const auto w = ts::device_put<W>(a.device_mesh(), hw);
      const auto f = ts::shard_map<Mesh, ts::specs<S, W>, S>(
          [](const auto& b, const auto& wb) { return ts::map(ts::matmul(b, wb), clamp); });
      trace << "  shard_map<" << S::to_string() << ", replicated w " << ts::to_string(ws)
            << ">: clamp(local matmul)";
      if (!even) return expect_uneven([&](const auto& x) { return f(x, w); });
      trace << "\n";
      set_state<S>(f(a, w));
      ref = map_host(matmul_host(ref, hw), clamp);
    }
  }

  void shard_map() {
    with_state([&]<class A>(const A& a) {
      using S = typename A::spec;
      static constexpr prog_list progs = programs_for<Mesh, S, R>();
      if constexpr (progs.n == 0) {
        return;
      } else {
        const std::size_t i = pick(progs.n);
        [&]<std::size_t... I>(std::index_sequence<I...>) {
          ((I == i ? run_program<S, progs.items[I]>(a) : void()), ...);
        }(std::make_index_sequence<progs.n>{});
      }
    });
    with_state([&](const auto& a) { check(a, "shard_map"); });
  }

  void run() {
    // The mesh's devices: a random subset of the pool in random order, and a reordering.
    std::vector<ts::device_id> all(devices.device_count());
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    ids.assign(all.begin(), all.begin() + Mesh::size);
    other = ids;
    std::shuffle(other.begin(), other.end(), rng);
    m.emplace(devices, ids);
    m_other.emplace(devices, other);
    trace << "mesh " << m->to_string() << " (reordered: " << m_other->to_string() << "), rank " << R << "\n";

    put();
    const std::size_t steps = 3 + pick(6);
    for (std::size_t s = 0; s < steps; ++s) {
      ++stats.steps;
      switch (pick(R >= 2 ? 9 : 7)) {
        case 0: put(); break;
        case 1: unary(); break;
        case 2: binary(); break;
        case 3: reshard(false); break;
        case 4: reshard(true); break;
        case 5:
        case 6: shard_map(); break;
        case 7: matmul(true); break;
        default: matmul(false); break;
      }
    }
  }
};

// Runs the case of one seed; returns an empty string, or the failure with the program.
template <class Meshes>
std::string run_case(ts::cpu_devices& devices, std::uint64_t seed, case_stats& stats, bool verbose) {
  std::mt19937_64 rng(seed);
  std::ostringstream trace;
  const std::size_t mesh_index = std::uniform_int_distribution<std::size_t>(0, Meshes::size - 1)(rng);
  const std::size_t rank = 1 + std::uniform_int_distribution<std::size_t>(0, 2)(rng);
  try {
    with_index<Meshes>(mesh_index, [&]<class Mesh>() {
      auto go = [&]<std::size_t R>() {
        runner<Mesh, R> r{devices, rng, trace, stats, {}, {}, {}, {}, {}, {}};
        r.run();
      };
      if (rank == 1) go.template operator()<1>();
      else if (rank == 2) go.template operator()<2>();
      else go.template operator()<3>();
    });
  } catch (const failure& f) {
    return "program:\n" + trace.str() + "failure: " + f.what;
  } catch (const std::exception& e) {
    return "program:\n" + trace.str() + "unexpected exception: " + e.what();
  }
  if (verbose) std::printf("seed %llu\n%s", static_cast<unsigned long long>(seed), trace.str().c_str());
  return {};
}

// The property test over the meshes of `Meshes` (one executable per list keeps each
// translation unit's compile time down).
template <class Meshes>
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
    const std::string failed = run_case<Meshes>(devices, seed, stats, verbose);
    ++cases;
    if (!failed.empty())
      FAIL("case seed " << seed << " failed; replay it with TYPESHARD_PROPERTY_SEED=" << seed << " "
                        << executable << "\n" << failed);
  } while (!replay && std::chrono::duration<double>(clock::now() - start).count() < seconds);
  std::printf("%s: %zu cases, %zu steps (%zu expected errors) in %.1f s; seeds %llu to %llu\n", executable,
              cases, stats.steps, stats.expected_errors,
              std::chrono::duration<double>(clock::now() - start).count(),
              static_cast<unsigned long long>(base), static_cast<unsigned long long>(base + cases - 1));
  CHECK(cases >= 1);
}

}  // namespace prop
