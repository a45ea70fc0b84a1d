// Unreduced values (DTensor's Partial, the book's {U_X}) in the sharded array's type:
// reshard<Spec> reduces them (psum where the target is replicated over the axis,
// psum_scatter where it shards a dimension over it), psum<"x"> reduces some axes only,
// linear operations keep them. Checked against the serial sum of the partials for every
// source spec that leaves the unreduced axes free and every target spec, on 2x2 and 4x2
// meshes, even and uneven extents.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include <typeshard/typeshard.hpp>

#include "reshard_pairs_common.hpp"

namespace ts = typeshard;
using reshard_test::spec_at;
using reshard_test::specs_of;

namespace {

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_4x2 = ts::mesh<ts::axis("x", 4), ts::axis("y", 2)>;

unsigned seed() {
  static const unsigned s = std::random_device{}();
  return s;
}

// A value unreduced over U: random partial blocks on every device, and their sum over
// U's groups (what the value stands for).
template <class Mesh, class Spec, class U>
struct partial_value {
  using array = ts::sharded_array<int, Mesh, Spec, ts::dextents<2>, U>;
  array value;
  ts::host_tensor<int, 2> sum;
};

template <class Mesh, class Spec, class U>
partial_value<Mesh, Spec, U> make_partial(const ts::device_mesh<Mesh>& m, const ts::shape<2>& extents,
                                          std::mt19937& rng) {
  using array = typename partial_value<Mesh, Spec, U>::array;
  std::uniform_int_distribution<int> v(-50, 50);
  std::vector<ts::detail::buffer<int>> blocks;
  ts::host_tensor<int, 2> sum(extents);
  for (std::size_t p = 0; p < Mesh::size; ++p) {
    const auto ix = array::layout_type::index(extents, p);
    ts::detail::buffer<int> b(ix[0].size() * ix[1].size());
    for (std::size_t i = 0; i < b.size(); ++i) b.data()[i] = v(rng);
    blocks.push_back(std::move(b));
  }
  // Devices differing only in U's coordinates hold different partials of the same
  // elements; devices differing in an axis neither Spec nor U uses hold copies of one
  // partial: make the copies equal, and add each partial once.
  for (std::size_t p = 0; p < Mesh::size; ++p) {
    auto c = Mesh::coordinates(p);
    bool primary = true;
    for (std::size_t i = 0; i < Mesh::rank; ++i) {
      const ts::axis_name n = Mesh::axes[i].name;
      if (!Spec::uses(n) && !U::contains(n) && c[i] != 0) {
        primary = false;
        c[i] = 0;
      }
    }
    const std::size_t source = Mesh::position(c);
    if (!primary) {
      std::copy_n(blocks[source].data(), blocks[p].size(), blocks[p].data());
      continue;
    }
    const auto ix = array::layout_type::index(extents, p);
    for (std::size_t i = 0; i < ix[0].size(); ++i)
      for (std::size_t j = 0; j < ix[1].size(); ++j)
        sum(ix[0].start + i, ix[1].start + j) += blocks[p].data()[i * ix[1].size() + j];
  }
  return {array(ts::adopt_shards, m, extents, std::move(blocks)), std::move(sum)};
}

template <class Mesh, class U, std::size_t From, std::size_t To>
void check_reduce(const ts::device_mesh<Mesh>& m, std::mt19937& rng) {
  using from = spec_at<Mesh, 2, From>;
  using to = spec_at<Mesh, 2, To>;
  if constexpr (!ts::detail::unreduced_sharding_axis<from, U>().empty()) {
    return;  // a partial sum over an axis cannot also be sharded over it
  } else {
    for (bool even : {true, false}) {
      std::uniform_int_distribution<std::size_t> k(1, 2), e(1, 7);
      const ts::shape<2> extents{even ? Mesh::size * k(rng) : e(rng), even ? Mesh::size * k(rng) : e(rng)};
      const auto u = make_partial<Mesh, from, U>(m, extents, rng);
      const auto r = ts::reshard<to>(u.value);
      static_assert(decltype(r)::unreduced_type::empty);
      using plan = ts::reshard_plan_for<typename partial_value<Mesh, from, U>::array, to>;
      INFO(plan::describe() << "extents " << ts::to_string(extents));
      REQUIRE(ts::to_host(r) == u.sum);
    }
  }
}

template <class Mesh, class U, std::size_t... P>
void check_all(const ts::device_mesh<Mesh>& m, std::mt19937& rng, std::index_sequence<P...>) {
  constexpr std::size_t n = specs_of<Mesh, 2>.count;
  using check = void (*)(const ts::device_mesh<Mesh>&, std::mt19937&);
  static constexpr check checks[] = {&check_reduce<Mesh, U, P / n, P % n>...};
  for (check c : checks) c(m, rng);
}

template <class Mesh, class U>
void check_all(const ts::device_mesh<Mesh>& m, std::mt19937& rng) {
  constexpr std::size_t n = specs_of<Mesh, 2>.count;
  check_all<Mesh, U>(m, rng, std::make_index_sequence<n * n>{});
}

}  // namespace

TEST_CASE("unreduced: reshard reduces to every spec, on 2x2 and 4x2 meshes", "[unreduced][reshard]") {
  INFO("seed " << seed());
  std::mt19937 rng(seed());
  ts::cpu_devices devices{8};
  ts::device_mesh<mesh_2x2> m22{devices};
  check_all<mesh_2x2, ts::unreduced<"x">>(m22, rng);
  check_all<mesh_2x2, ts::unreduced<"y">>(m22, rng);
  check_all<mesh_2x2, ts::unreduced<"x", "y">>(m22, rng);
  ts::device_mesh<mesh_4x2> m42{devices};
  check_all<mesh_4x2, ts::unreduced<"x">>(m42, rng);
  check_all<mesh_4x2, ts::unreduced<"y", "x">>(m42, rng);
}

TEST_CASE("unreduced: the plan reduces by psum or psum_scatter, as the target asks", "[unreduced]") {
  using E = ts::extents<8, 8>;
  using U = ts::unreduced<"x">;
  using to_replicated = ts::reshard_plan<mesh_2x2, ts::spec<ts::none, ts::none>,
                                         ts::spec<ts::none, ts::none>, E, U>;
  static_assert(to_replicated::steps.size() == 1);
  static_assert(to_replicated::steps[0].kind == ts::step_kind::all_reduce);
  using to_rows = ts::reshard_plan<mesh_2x2, ts::spec<ts::none, ts::none>, ts::spec<"x", ts::none>, E, U>;
  static_assert(to_rows::steps.size() == 1);
  static_assert(to_rows::steps[0].kind == ts::step_kind::reduce_scatter);
  static_assert(to_rows::steps[0].dim == 0);
  using to_cols = ts::reshard_plan<mesh_2x2, ts::spec<"y", ts::none>, ts::spec<"y", "x">, E, U>;
  static_assert(to_cols::steps.size() == 1);
  static_assert(to_cols::steps[0].kind == ts::step_kind::reduce_scatter);
  static_assert(to_cols::steps[0].dim == 1);
  // Uneven static extents: psum_scatter still, onto a dimension not yet sharded.
  using uneven = ts::reshard_plan<mesh_2x2, ts::spec<ts::none, ts::none>, ts::spec<"x", ts::none>,
                                  ts::extents<5, 3>, U>;
  static_assert(uneven::evenness == ts::shard_evenness::uneven);
  static_assert(uneven::steps.size() == 1);
  static_assert(uneven::steps[0].kind == ts::step_kind::reduce_scatter);
  SUCCEED(to_rows::describe());
}

TEST_CASE("unreduced: linear operations keep the axes; psum<\"x\"> reduces only x", "[unreduced]") {
  INFO("seed " << seed());
  std::mt19937 rng(seed() + 1);
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  using rows = ts::spec<"x", ts::none>;
  const auto a = make_partial<mesh_2x2, ts::spec<ts::none, ts::none>, ts::unreduced<"x", "y">>(m, {6, 5}, rng);
  const auto b = make_partial<mesh_2x2, ts::spec<ts::none, ts::none>, ts::unreduced<"x", "y">>(m, {6, 5}, rng);

  const auto c = (a.value + b.value) * 3 - (-a.value);  // 3 (a + b) + a
  static_assert(std::is_same_v<decltype(c)::unreduced_type, ts::unreduced<"x", "y">>);
  auto expect = a.sum;
  for (std::size_t i = 0; i < expect.size(); ++i)
    expect.data()[i] = 3 * (a.sum.data()[i] + b.sum.data()[i]) + a.sum.data()[i];
  CHECK(ts::to_host(ts::reshard<rows>(c)) == expect);

  const auto over_y = ts::psum<"x">(c);
  static_assert(std::is_same_v<decltype(over_y)::unreduced_type, ts::unreduced<"y">>);
  static_assert(std::is_same_v<decltype(over_y)::spec, ts::spec<ts::none, ts::none>>);
  const auto full = ts::psum<"y">(over_y);
  static_assert(decltype(full)::unreduced_type::empty);
  CHECK(ts::to_host(full) == expect);
  CHECK(ts::to_host(ts::psum<"y", "x">(c)) == expect);
}
