// Shared by tests/unit/dims_moves_*.cpp: dimension moves (rule 8), ts::permute,
// ts::split_dim and ts::merge_dims, on every valid spec of ranks 1 to 3 of a mesh, with even,
// uneven and empty extents, each result checked shard by shard against a serial computation
// on the same data. Where a split or merge cannot keep the devices' blocks, the expected
// shape_error is predicted by brute force from the layout core (every device's flat index
// range before and after), independently of the plan's closed-form condition.
//
// Compile time: the results are checked through one value-level checker per (mesh, rank)
// (check_shards), not to_host per result type, and no Catch macro sits in a template of an
// array type; still, each spec instantiates its operations, so the two meshes are two TUs.
#pragma once

#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <functional>
#include <span>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include <typeshard/typeshard.hpp>

#include "support/foundation.hpp"

namespace ts = typeshard;

namespace dims_test {

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;

template <std::size_t R>
std::size_t count(const ts::shape<R>& s) {
  std::size_t n = 1;
  for (std::size_t e : s) n *= e;
  return n;
}

// Distinct values, so a misplaced element shows.
template <std::size_t R>
ts::host_tensor<int, R> numbered(const ts::shape<R>& s) {
  ts::host_tensor<int, R> t(s);
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = static_cast<int>(i * 7 + 3);
  return t;
}

// The serial permute: out[i] = in[j] with j[perm[k]] = i[k].
template <std::size_t R>
ts::host_tensor<int, R> permuted(const ts::host_tensor<int, R>& in, const std::array<std::size_t, R>& perm) {
  ts::shape<R> os{};
  for (std::size_t k = 0; k < R; ++k) os[k] = in.extents()[perm[k]];
  ts::host_tensor<int, R> out(os);
  std::array<std::size_t, R> i{};
  for (std::size_t flat = 0; flat < out.size(); ++flat) {
    std::size_t rest = flat;
    for (std::size_t k = R; k-- > 0;) {
      i[k] = rest % os[k];
      rest /= os[k];
    }
    std::size_t src = 0;
    for (std::size_t d = 0; d < R; ++d) {
      std::size_t at = 0;
      for (std::size_t k = 0; k < R; ++k)
        if (perm[k] == d) at = i[k];
      src = src * in.extents()[d] + at;
    }
    out.data()[flat] = in.data()[src];
  }
  return out;
}

// The same elements, reshaped (a split or a merge is NumPy's reshape).
template <std::size_t R2, std::size_t R>
ts::host_tensor<int, R2> reshaped(const ts::host_tensor<int, R>& in, const ts::shape<R2>& s) {
  REQUIRE(count(s) == in.size());
  return ts::host_tensor<int, R2>(s, std::vector<int>(in.data(), in.data() + in.size()));
}

// Every device's block of `ref` sharded by `entries` equals `blocks[p]`.
template <class Mesh, std::size_t R>
void check_shards(const ts::detail::spec_array<R>& entries, const ts::shape<R>& extents,
                  const ts::host_tensor<int, R>& ref,
                  const std::vector<std::span<const int>>& blocks, const std::string& what) {
  INFO(what);
  REQUIRE(extents == ref.extents());
  for (std::size_t p = 0; p < Mesh::size; ++p) {
    const ts::index_slices<R> ix = ts::detail::index_of<Mesh>(entries, ref.extents(), p);
    const ts::shape<R> local = ts::detail::local_shape_of<Mesh>(entries, ref.extents(), p);
    INFO("position " << p << ", spec " << ts::detail::spec_string(entries) << ", extents "
                     << ts::to_string(ref.extents()));
    REQUIRE(blocks[p].size() == count(local));
    std::array<std::size_t, R> i{};
    for (std::size_t flat = 0; flat < blocks[p].size(); ++flat) {
      std::size_t rest = flat, src = 0;
      for (std::size_t k = R; k-- > 0;) {
        i[k] = rest % local[k];
        rest /= local[k];
      }
      for (std::size_t d = 0; d < R; ++d) src = src * ref.extents()[d] + ix[d].start + i[d];
      REQUIRE(blocks[p][flat] == ref.data()[src]);
    }
  }
}

// (No Catch macro in the templates of array types: each would be expanded once per type.)
template <class Arr>
[[gnu::noinline]] void check_result(const Arr& r, const ts::host_tensor<int, Arr::rank>& ref,
                                    const std::string& what = "") {
  std::vector<std::span<const int>> blocks;
  for (std::size_t p = 0; p < Arr::mesh_type::size; ++p) blocks.push_back(r.local_data(p));
  check_shards<typename Arr::mesh_type, Arr::rank>(
      ts::detail::spec_array_of<typename Arr::spec, Arr::rank>(), r.extents(), ref, blocks, what);
}

// Brute force, from the layout core: whether splitting a dimension of extent n sharded by
// `ds` into (parts, n / parts), the major part keeping `ds`, leaves every device the same
// flat range of it. Also the merge of (parts, n / parts) back.
template <class Mesh>
bool blocks_agree(const ts::dim_spec& ds, std::size_t n, std::size_t parts) {
  const std::size_t k = ts::detail::shards_of<Mesh>(ds), minor = n / parts;
  for (std::size_t p = 0; p < Mesh::size; ++p) {
    const std::size_t i = ts::detail::shard_of<Mesh>(ds, p);
    const ts::slice flat = ts::shard_slice(n, k, i), major = ts::shard_slice(parts, k, i);
    if (flat.start != major.start * minor || flat.stop != major.stop * minor) return false;
  }
  return true;
}

// One Catch expansion for every expected shape_error and check (not one per array type).
[[gnu::noinline]] inline void expect_shape_error(const std::function<void()>& f, const std::string& what) {
  INFO(what);
  REQUIRE_THROWS_AS(f(), ts::shape_error);
}
[[gnu::noinline]] inline void expect(bool ok, const std::string& what) {
  INFO(what);
  REQUIRE(ok);
}

template <std::size_t R>
std::vector<ts::shape<R>> extents_for() {
  if constexpr (R == 1)
    return {{16}, {12}, {5}, {0}};
  else if constexpr (R == 2)
    return {{8, 4}, {6, 3}, {5, 7}, {0, 3}};
  else
    return {{4, 8, 8}, {6, 5, 4}, {3, 2, 7}};
}

template <std::size_t... P>
using perm = std::index_sequence<P...>;
template <std::size_t R>
constexpr auto permutations() {
  if constexpr (R == 1)
    return std::tuple<perm<0>>{};
  else if constexpr (R == 2)
    return std::tuple<perm<0, 1>, perm<1, 0>>{};
  else
    return std::tuple<perm<0, 1, 2>, perm<0, 2, 1>, perm<1, 0, 2>, perm<1, 2, 0>, perm<2, 0, 1>,
                      perm<2, 1, 0>>{};
}

template <class A, std::size_t... P>
[[gnu::noinline]] void check_permute(const A& a, const ts::host_tensor<int, A::rank>& host, perm<P...>) {
  using plan = ts::permute_plan_for<A, P...>;
  static_assert(plan::valid && ts::communication_free<plan> && plan::steps.size() == 0);
  const auto r = ts::permute<P...>(a);
  static_assert(std::is_same_v<typename decltype(r)::spec, typename plan::out_spec>);
  check_result(r, permuted(host, std::array<std::size_t, A::rank>{P...}),
               "permute of " + ts::to_string(host.extents()) + " " + A::spec::to_string());
}

template <std::size_t Dim, std::size_t Parts, class A>
[[gnu::noinline]] void check_split(const A& a, const ts::host_tensor<int, A::rank>& host) {
  using plan = ts::split_dim_plan_for<A, Dim, Parts>;
  static_assert(plan::valid && plan::checked_at_run_time && ts::communication_free<plan>);
  const std::size_t n = host.extents()[Dim];
  const ts::dim_spec ds = A::spec::dim(Dim);
  const std::string what = "split_dim<" + std::to_string(Dim) + ", " + std::to_string(Parts) +
                           "> of " + ts::to_string(host.extents()) + " " + A::spec::to_string();
  if (n % Parts != 0 || !blocks_agree<typename A::mesh_type>(ds, n, Parts)) {
    expect_shape_error([&] { (void)ts::split_dim<Dim, Parts>(a); }, what);
    return;
  }
  const auto r = ts::split_dim<Dim, Parts>(a);
  using R = decltype(r);
  static_assert(R::rank == A::rank + 1 && R::spec::dim(Dim) == A::spec::dim(Dim) &&
                R::spec::dim(Dim + 1).is_none());
  expect(r.shared_shards() == a.shared_shards(), what + ": no copy");
  check_result(r, reshaped(host, plan::out_shape(host.extents())), what);
}

template <std::size_t Dim, class A>
[[gnu::noinline]] void check_merge(const A& a, const ts::host_tensor<int, A::rank>& host) {
  using plan = ts::merge_dims_plan_for<A, Dim>;
  if constexpr (!A::spec::dim(Dim + 1).is_none()) {
    static_assert(plan::problem == ts::detail::dims_problem::merge_minor_sharded);
  } else {
    static_assert(plan::valid && ts::communication_free<plan>);
    const std::size_t major = host.extents()[Dim], minor = host.extents()[Dim + 1];
    const std::string what = "merge_dims<" + std::to_string(Dim) + "> of " +
                             ts::to_string(host.extents()) + " " + A::spec::to_string();
    if (major * minor != 0 &&
        !blocks_agree<typename A::mesh_type>(A::spec::dim(Dim), major * minor, major)) {
      expect_shape_error([&] { (void)ts::merge_dims<Dim>(a); }, what);
      return;
    }
    const auto r = ts::merge_dims<Dim>(a);
    expect(r.shared_shards() == a.shared_shards(), what + ": no copy");
    check_result(r, reshaped(host, plan::out_shape(host.extents())), what);
  }
}

template <class Mesh, std::size_t R>
void check_every_spec(const ts::device_mesh<Mesh>& m) {
  ts_test::for_each_spec<Mesh, R>([&]<class Spec, std::size_t I>() {
    for (const ts::shape<R>& e : extents_for<R>()) {
      const ts::host_tensor<int, R> host = numbered(e);
      const auto a = ts::device_put<Spec>(m, host);
      // Ranks 1 and 2: every permutation and split. Rank 3 (19 or more specs): two of the
      // six permutations and one of the two splits per dimension, rotating with the spec's
      // number I, so that each is still run on several specs of every kind.
      constexpr auto perms = permutations<R>();
      constexpr std::size_t np = std::tuple_size_v<decltype(perms)>;
      if constexpr (R < 3) {
        std::apply([&](auto... p) { (check_permute(a, host, p), ...); }, perms);
      } else {
        check_permute(a, host, std::get<I % np>(perms));
        check_permute(a, host, std::get<(I + 3) % np>(perms));
      }
      [&]<std::size_t... D>(std::index_sequence<D...>) {
        if constexpr (R < 3) {
          (check_split<D, 2>(a, host), ...);
          (check_split<D, 4>(a, host), ...);
        } else {
          (check_split<D, (I + D) % 2 == 0 ? 2 : 4>(a, host), ...);
        }
      }(std::make_index_sequence<R>{});
      if constexpr (R >= 2)
        [&]<std::size_t... D>(std::index_sequence<D...>) {
          (check_merge<D>(a, host), ...);
        }(std::make_index_sequence<R - 1>{});
    }
  });
}

}  // namespace dims_test
