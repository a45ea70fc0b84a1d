// Dimension moves (rule 8) on the (2, 2) mesh: every valid spec of ranks 1 to 3 against a
// serial reference (dims_moves_common.hpp), the split/merge condition against the layout core
// by brute force, transpose through the tiled kernel, heads ([B, S, D] -> [B, H, S, Dh] and
// back, static extents, plans' describe()), unreduced values and the run-time errors.
#include "dims_moves_common.hpp"

namespace ts = typeshard;
using namespace dims_test;

TEST_CASE("dims: the split/merge condition equals the layout core's blocks, by brute force",
          "[dims]") {
  using mesh_8 = ts::mesh<ts::axis("x", 8)>;
  using mesh_2x4_ = mesh_2x4;
  for (std::size_t n = 0; n <= 48; ++n)
    for (std::size_t parts = 1; parts <= n + 1; ++parts) {
      if (n % parts != 0) continue;
      for (const ts::dim_spec& ds : {ts::dim_spec("x"), ts::axes("x", "y"), ts::axes("y", "x")}) {
        INFO("n " << n << ", parts " << parts << ", " << ts::detail::axes_string(ds));
        REQUIRE(ts::detail::split_keeps_blocks(n, parts, ts::detail::shards_of<mesh_2x4_>(ds)) ==
                blocks_agree<mesh_2x4_>(ds, n, parts));
      }
      REQUIRE(ts::detail::split_keeps_blocks(n, parts, 8) ==
              blocks_agree<mesh_8>(ts::dim_spec("x"), n, parts));
    }
}

TEST_CASE("dims: every spec on a 2x2 mesh, ranks 1 to 3, against a serial reference", "[dims]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  check_every_spec<mesh_2x2, 1>(m);
  check_every_spec<mesh_2x2, 2>(m);
  check_every_spec<mesh_2x2, 3>(m);
}

TEST_CASE("dims: transpose, a large block through the tiled kernel, float", "[dims]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  ts::host_tensor<float, 2> h({67, 45});
  for (std::size_t i = 0; i < h.size(); ++i) h.data()[i] = static_cast<float>(i);
  const auto a = ts::device_put<ts::spec<"x", "y">>(m, h);
  const auto t = ts::transpose(a);
  static_assert(std::is_same_v<decltype(t)::spec, ts::spec<"y", "x">>);
  const ts::host_tensor<float, 2> back = ts::to_host(t);
  REQUIRE(back.extents() == ts::shape<2>{45, 67});
  for (std::size_t i = 0; i < 67; ++i)
    for (std::size_t j = 0; j < 45; ++j) REQUIRE(back.data()[j * 67 + i] == h.data()[i * 45 + j]);
  // transpose(transpose(a)) is a again, and a block's transpose is still a view.
  REQUIRE(ts::to_host(ts::transpose(t)).data()[46] == 46.0f);
}

TEST_CASE("dims: heads: [B, S, D] with D over model -> [B, H, S, Dh] and back", "[dims]") {
  using mesh = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh> m{devices};
  // D = 6 heads x 4, static: the split's locality is checked at compile time.
  using E = ts::extents<ts::dyn, 5, 24>;
  const ts::host_tensor<int, 3> host = numbered(ts::shape<3>{4, 5, 24});
  const auto x = ts::device_put<ts::spec<"data", ts::none, "model">, E>(m, host);
  using split = ts::split_dim_plan_for<decltype(x), 2, 6>;
  static_assert(split::valid && !split::checked_at_run_time && ts::communication_free<split>);
  static_assert(std::is_same_v<split::out_extents, ts::extents<ts::dyn, 5, 6, 4>>);
  REQUIRE(split::describe() ==
          "local split of dimension 2: 24 -> (6, 4), no communication, no copy => "
          "PartitionSpec('data', None, 'model', None)");
  const auto h = ts::split_dim<2, 6>(x);                      // [B, S, H_model, Dh]
  const auto bhsd = ts::permute<0, 2, 1, 3>(h);               // [B, H_model, S, Dh]
  static_assert(std::is_same_v<decltype(bhsd)::spec, ts::spec<"data", "model", ts::none, ts::none>>);
  const auto back = ts::merge_dims<2>(ts::permute<0, 2, 1, 3>(bhsd));
  static_assert(std::is_same_v<decltype(back), decltype(x)>);
  check_result(back, host);
  using merge = ts::merge_dims_plan_for<decltype(h), 2>;
  REQUIRE(merge::describe() ==
          "local merge of dimensions 2 and 3: (6, 4) -> 24, no communication, no copy => "
          "PartitionSpec('data', None, 'model')");
  REQUIRE(ts::permute_plan_for<decltype(h), 0, 2, 1, 3>::describe() ==
          "local permute (0, 2, 1, 3), no communication => "
          "PartitionSpec('data', 'model', None, None)");
}

TEST_CASE("dims: moves keep a value unreduced, and dynamic extents throw with the fix",
          "[dims]") {
  ts::cpu_devices devices{4};
  ts::device_mesh<mesh_2x2> m{devices};
  ts::host_tensor<float, 2> a_host({4, 6}), b_host({6, 3});
  for (std::size_t i = 0; i < a_host.size(); ++i) a_host.data()[i] = static_cast<float>(i % 5);
  for (std::size_t i = 0; i < b_host.size(); ++i) b_host.data()[i] = static_cast<float>(i % 3);
  const auto a = ts::device_put<ts::spec<ts::none, "x">>(m, a_host);
  const auto b = ts::device_put<ts::spec<"x", ts::none>>(m, b_host);
  const auto c = ts::matmul(a, b);  // unreduced over x
  const auto t = ts::transpose(c);
  static_assert(std::is_same_v<decltype(t)::unreduced_type, ts::unreduced<"x">>);
  const auto reduced = ts::to_host(ts::reshard<ts::spec<ts::none, ts::none>>(t));
  const auto expected = ts::to_host(ts::reshard<ts::spec<ts::none, ts::none>>(c));
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 3; ++j) REQUIRE(reduced.data()[j * 4 + i] == expected.data()[i * 3 + j]);

  // 6 over x (2 shards) split into 3 parts: blocks of 3 elements, but parts of 2 x 2 (data
  // would move): the message names the fix.
  const auto v = ts::device_put<ts::spec<"x">>(m, numbered(ts::shape<1>{6}));
  try {
    (void)ts::split_dim<0, 3>(v);
    FAIL("expected a shape_error");
  } catch (const ts::shape_error& e) {
    REQUIRE_THAT(e.what(), Catch::Contains("split into a multiple of 2 parts") &&
                               Catch::Contains("reshard the dimension to ts::none first"));
  }
  REQUIRE_THROWS_WITH((ts::split_dim<0, 4>(v)), Catch::Contains("not a multiple of 4"));
  const auto w = ts::device_put<ts::spec<"x", ts::none>>(m, numbered(ts::shape<2>{3, 4}));
  REQUIRE_THROWS_WITH(ts::merge_dims<0>(w), Catch::Contains("reshard it to ts::none first"));
}
