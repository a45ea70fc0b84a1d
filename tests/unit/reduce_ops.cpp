// Reductions (ts::sum, mean, max, min) against a serial loop over the same host data: every
// valid spec of ranks 1 and 2 and every second one of rank 3 (sampled to keep the compile
// within budget) on the (2,2) and (2,4) meshes, each with a reduced-dimension set
// chosen by rotation (every set of every rank occurs on each mesh) and all four reductions,
// on an even shape (every extent a multiple of its shards), an uneven one and a random one
// (0 and fewer elements than shards included). Values are small integers in doubles, so
// every sum is exact whatever the order; mean must divide by the GLOBAL count. The result's
// type is checked against the rules: sum and mean unreduced over the reduced dimensions'
// axes, max and min replicated over them (their plan all-reduces). Plus: ts::keep_dims,
// a named output spec (the plan reduces), negative dimension numbers, static extents,
// and sum / mean of an unreduced value staying unreduced (rule 3: linear).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <random>
#include <type_traits>
#include <vector>

#include <typeshard/typeshard.hpp>

#include "support/foundation.hpp"

namespace {

namespace ts = typeshard;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;

// ---- the serial reference (values, not templates: one instantiation per rank) -------------

template <std::size_t Rank>
std::vector<double> reference(ts::reduction op, const ts::host_tensor<double, Rank>& x,
                              const std::array<bool, Rank>& mask) {
  ts::shape<Rank> out_shape = x.extents();
  double count = 1;
  for (std::size_t d = 0; d < Rank; ++d)
    if (mask[d]) {
      out_shape[d] = 1;
      count *= static_cast<double>(x.extent(d));
    }
  std::size_t n = 1;
  for (std::size_t e : out_shape) n *= e;
  const double init = op == ts::reduction::max   ? -INFINITY
                      : op == ts::reduction::min ? INFINITY
                                                 : 0.0;
  std::vector<double> out(n, init);
  std::array<std::size_t, Rank> idx{};
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::size_t o = 0;
    for (std::size_t d = 0; d < Rank; ++d) o = o * out_shape[d] + (mask[d] ? 0 : idx[d]);
    const double v = x.values()[i];
    switch (op) {
      case ts::reduction::sum:
      case ts::reduction::mean: out[o] += v; break;
      case ts::reduction::max: out[o] = std::max(out[o], v); break;
      case ts::reduction::min: out[o] = std::min(out[o], v); break;
    }
    for (std::size_t d = Rank; d-- > 0;) {
      if (++idx[d] < x.extent(d)) break;
      idx[d] = 0;
    }
  }
  if (op == ts::reduction::mean)
    for (double& v : out) v *= 1.0 / count;
  return out;
}

void compare(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool same = (std::isnan(got[i]) && std::isnan(want[i])) || got[i] == want[i] ||
                      std::abs(got[i] - want[i]) <= 1e-12 * std::max(1.0, std::abs(want[i]));
    if (!same) {
      CAPTURE(i, got[i], want[i]);
      FAIL("reduction differs from the serial loop");
    }
  }
}

template <std::size_t Rank>
ts::host_tensor<double, Rank> small_ints(std::mt19937_64& rng, const ts::shape<Rank>& s) {
  ts::host_tensor<double, Rank> t(s);
  std::uniform_int_distribution<int> v(-8, 8);
  for (double& e : t.values()) e = v(rng);
  return t;
}

// ---- one spec: every reduction over one dimension set -------------------------------------

// The dimension sets of a rank, numbered: bit d of the number says dimension d is reduced;
// 0 stands for "no Dims" (every dimension).
template <std::size_t Rank, std::size_t Set, class F>
void with_dims(F&& f) {
  if constexpr (Set == 0) {
    f.template operator()<>();
  } else if constexpr (Rank == 1) {
    f.template operator()<0>();
  } else if constexpr (Rank == 2) {
    if constexpr (Set == 1) f.template operator()<0>();
    if constexpr (Set == 2) f.template operator()<-1>();  // dimension 1, counted from the last
    if constexpr (Set == 3) f.template operator()<1, 0>();
  } else {
    if constexpr (Set == 1) f.template operator()<0>();
    if constexpr (Set == 2) f.template operator()<1>();
    if constexpr (Set == 3) f.template operator()<0, 1>();
    if constexpr (Set == 4) f.template operator()<2>();
    if constexpr (Set == 5) f.template operator()<0, -1>();
    if constexpr (Set == 6) f.template operator()<1, 2>();
    if constexpr (Set == 7) f.template operator()<2, 1, 0>();
  }
}

template <std::size_t Rank, int... Dims>
constexpr std::array<bool, Rank> mask_of() {
  std::array<bool, Rank> m{};
  if constexpr (sizeof...(Dims) == 0) m.fill(true);
  for (int d : std::array<int, sizeof...(Dims)>{Dims...})
    m[static_cast<std::size_t>(d < 0 ? d + static_cast<int>(Rank) : d)] = true;
  return m;
}

// The axes of the reduced dimensions, as the unreduced type they must leave.
template <class X, int... Dims>
using partial_of =
    typename ts::reduce_plan_for<ts::reduction::sum, X, Dims...>::out_unreduced;

template <class T, std::size_t Rank>
std::vector<double> values_of(const ts::host_tensor<T, Rank>& t) {
  return std::vector<double>(t.values().begin(), t.values().end());
}

template <class Mesh, class Spec, std::size_t Rank, std::size_t Set>
void check_spec_case(const ts::device_mesh<Mesh>& m, std::mt19937_64& rng) {
  using layout = ts::layout<Mesh, Spec, Rank>;
  std::vector<ts::shape<Rank>> shapes(3);
  for (std::size_t d = 0; d < Rank; ++d) {
    const std::size_t k = layout::shards_along(d);
    shapes[0][d] = k * (1 + d % 2);        // even
    shapes[1][d] = k > 1 ? 2 * k - 1 : 3;  // uneven where sharded
  }
  shapes[2] = ts_test::random_shape<layout>(rng, 200);
  for (const ts::shape<Rank>& s : shapes) {
    INFO("mesh " << Mesh::to_string() << " spec " << Spec::to_string() << " shape "
                 << ts::to_string(s) << " dimension set " << Set);
    const ts::host_tensor<double, Rank> host = small_ints(rng, s);
    const auto x = ts::device_put<Spec>(m, host);
    using X = std::remove_cvref_t<decltype(x)>;
    with_dims<Rank, Set>([&]<int... Dims>() {
      constexpr std::array<bool, Rank> mask = mask_of<Rank, Dims...>();
      using partial = partial_of<X, Dims...>;
      // sum and mean: unreduced over the reduced dimensions' axes, no communication.
      static_assert(ts::communication_free<ts::reduce_plan_for<ts::reduction::sum, X, Dims...>>);
      const auto sum = ts::sum<Dims...>(x);
      static_assert(std::is_same_v<typename decltype(sum)::unreduced_type, partial>);
      compare(values_of(ts::to_host(ts::reshard<typename decltype(sum)::spec>(sum))),
              reference(ts::reduction::sum, host, mask));
      const auto mean = ts::mean<Dims...>(x);
      static_assert(std::is_same_v<decltype(mean), decltype(sum)>);
      compare(values_of(ts::to_host(ts::reshard<typename decltype(mean)::spec>(mean))),
              reference(ts::reduction::mean, host, mask));
      // max and min: all-reduced over those axes, so fully reduced, same spec as the sum.
      const auto max = ts::max<Dims...>(x);
      using max_type = std::remove_cvref_t<decltype(max)>;
      static_assert(max_type::unreduced_type::empty);
      static_assert(std::is_same_v<typename max_type::spec, typename decltype(sum)::spec>);
      static_assert(ts::communication_free<ts::reduce_plan_for<ts::reduction::max, X, Dims...>> ==
                    partial::empty);
      compare(values_of(ts::to_host(max)), reference(ts::reduction::max, host, mask));
      compare(values_of(ts::to_host(ts::min<Dims...>(x))),
              reference(ts::reduction::min, host, mask));
    });
  }
}

// Every spec (Stride 1), or every Stride-th (to keep the compile within budget).
template <class Mesh, std::size_t Rank, std::size_t Stride = 1>
void check_mesh_rank(ts::cpu_devices& devices, std::mt19937_64& rng) {
  const ts::device_mesh<Mesh> m{devices};
  ts_test::for_each_spec_sampled<Mesh, Rank, Stride>([&]<class Spec, std::size_t I>() {
    // The dimension set rotates with the spec's number (and differs between the meshes).
    constexpr std::size_t sets = std::size_t{1} << Rank;
    check_spec_case<Mesh, Spec, Rank, (I + Mesh::size) % sets>(m, rng);
  });
}

}  // namespace

TEST_CASE("every reduction agrees with a serial loop, every spec of ranks 1 to 3",
          "[reduce][property]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{8};
  check_mesh_rank<mesh_2x2, 1>(devices, rng);
  check_mesh_rank<mesh_2x2, 2>(devices, rng);
  check_mesh_rank<mesh_2x2, 3, 2>(devices, rng);  // 10 of its 19 specs
  check_mesh_rank<mesh_2x4, 1>(devices, rng);
  check_mesh_rank<mesh_2x4, 2>(devices, rng);
  check_mesh_rank<mesh_2x4, 3, 2>(devices, rng);  // 10 of its 19 specs
}

TEST_CASE("reductions: keep_dims, a named output spec, static extents, unreduced inputs",
          "[reduce]") {
  INFO(ts_test::seed_message());
  std::mt19937_64 rng(ts_test::seed());
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x4> m{devices};
  const ts::host_tensor<double, 3> host = small_ints(rng, ts::shape<3>{3, 5, 7});  // uneven everywhere
  const auto x = ts::device_put<ts::spec<"x", ts::none, "y">>(m, host);

  SECTION("keep_dims keeps the reduced dimensions with extent 1 and spec none") {
    const auto s = ts::sum<0, 2>(x, ts::keep_dims);
    static_assert(std::is_same_v<decltype(s)::spec, ts::spec<ts::none, ts::none, ts::none>>);
    static_assert(std::is_same_v<decltype(s)::unreduced_type, ts::unreduced<"x", "y">>);
    CHECK(s.extents() == ts::shape<3>{1, 5, 1});
    const auto r = ts::to_host(ts::reshard<ts::spec<>>(s));
    CHECK(r.extents() == ts::shape<3>{1, 5, 1});
    compare(values_of(r), reference(ts::reduction::sum, host, {true, false, true}));
    const auto mx = ts::max<-1>(x, ts::keep_dims);
    static_assert(std::is_same_v<decltype(mx)::spec, ts::spec<"x", ts::none, ts::none>>);
    compare(values_of(ts::to_host(mx)), reference(ts::reduction::max, host, {false, false, true}));
  }
  SECTION("a named output spec: the plan reduces (psum_scatter where the spec shards)") {
    const auto s = ts::sum<ts::spec<ts::none, "y">, 2>(x);
    static_assert(std::is_same_v<decltype(s)::spec, ts::spec<ts::none, "y">>);
    static_assert(decltype(s)::unreduced_type::empty);
    compare(values_of(ts::to_host(s)), reference(ts::reduction::sum, host, {false, false, true}));
    const auto mean = ts::mean<0>(ts::spec<"y", "x">{}, x);  // the spelling with a value
    static_assert(std::is_same_v<decltype(mean)::spec, ts::spec<"y", "x">>);
    compare(values_of(ts::to_host(mean)), reference(ts::reduction::mean, host, {true, false, false}));
    const auto mn = ts::min<ts::spec<"x">>(x, ts::keep_dims);  // every dimension, kept
    CHECK(mn.extents() == ts::shape<3>{1, 1, 1});
    compare(values_of(ts::to_host(mn)), reference(ts::reduction::min, host, {true, true, true}));
  }
  SECTION("every dimension without keep_dims: a rank-0 array") {
    const auto total = ts::mean(x);
    static_assert(decltype(total)::rank == 0);
    static_assert(std::is_same_v<decltype(total)::extents_type, ts::extents<>>);
    compare(values_of(ts::to_host(ts::reshard<ts::spec<>>(total))),
            reference(ts::reduction::mean, host, {true, true, true}));
  }
  SECTION("static extents stay static where kept") {
    const auto s = ts::device_put<ts::spec<"x", "y">, ts::extents<4, 6>>(
        m, small_ints(rng, ts::shape<2>{4, 6}));
    const auto r = ts::max<0>(s);
    static_assert(std::is_same_v<decltype(r)::extents_type, ts::extents<6>>);
    const auto k = ts::min<0>(s, ts::keep_dims);
    static_assert(std::is_same_v<decltype(k)::extents_type, ts::extents<1, 6>>);
    CHECK(k.extents() == ts::shape<2>{1, 6});
  }
  SECTION("sum and mean of an unreduced value stay unreduced (linear, rule 3)") {
    const auto rows = ts::sum<2>(x);  // unreduced over "y"
    const auto both = ts::sum<0>(rows);  // and over "x"
    static_assert(std::is_same_v<decltype(both)::unreduced_type, ts::unreduced<"y", "x">>);
    compare(values_of(ts::to_host(ts::reshard<ts::spec<>>(both))),
            reference(ts::reduction::sum, host, {true, false, true}));
    const auto m2 = ts::mean<0>(rows);
    compare(values_of(ts::to_host(ts::reshard<ts::spec<>>(m2))),
            reference(ts::reduction::mean,
                      ts::host_tensor<double, 2>({3, 5}, [&] {
                        const auto r = reference(ts::reduction::sum, host, {false, false, true});
                        return std::vector<double>(r.begin(), r.end());
                      }()),
                      {true, false}));
  }
}
