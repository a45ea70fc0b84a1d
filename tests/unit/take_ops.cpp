// ts::take (ops/take.hpp), the embedding lookup, against a serial lookup over the same host
// data: the table sharded over the vocabulary (uneven: each device adds the rows it holds,
// the result unreduced over those axes), over the model dimension, replicated; the ids
// sharded or replicated, ranks 1 and 2; the (2,2) and (2,4) meshes. Its gradient (the
// scatter-add, unreduced over the ids' axes) against finite differences and the replicated
// run; an id out of range is a shape_error.
#include <cstddef>
#include <random>

#include "grad_check.hpp"

namespace {

using namespace grad_test;

using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;

template <std::size_t Rank>
ts::host_tensor<int, Rank> random_ids(const ts::shape<Rank>& s, std::size_t vocab,
                                      unsigned seed) {
  ts::host_tensor<int, Rank> t(s);
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> u(0, static_cast<int>(vocab) - 1);
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = u(gen);
  return t;
}

template <class TableSpec, class IdsSpec, std::size_t Rank, class Mesh>
void forward_case(const ts::device_mesh<Mesh>& m, std::size_t vocab, std::size_t dim,
                  const ts::shape<Rank>& ids_shape, unsigned seed) {
  INFO("table " << TableSpec::to_string() << " ids " << IdsSpec::to_string() << " V " << vocab
                << " D " << dim << " ids " << ts::to_string(ids_shape));
  const auto ht = random_tensor(ts::shape<2>{vocab, dim}, seed);
  const auto hi = random_ids(ids_shape, vocab, seed + 1);
  const auto e = ts::take(ts::device_put<TableSpec>(m, ht), ts::device_put<IdsSpec>(m, hi));
  const auto h = ts::to_host(ts::reshard<typename decltype(e)::spec>(e));
  REQUIRE(h.size() == hi.size() * dim);
  for (std::size_t i = 0; i < hi.size(); ++i)
    for (std::size_t k = 0; k < dim; ++k)
      CHECK(h.data()[i * dim + k] == ht(static_cast<std::size_t>(hi.data()[i]), k));
}

TEST_CASE("take: vocabulary-parallel, model-parallel, replicated; (2,2) and (2,4)", "[ops]") {
  ts::cpu_devices devices{8};
  const ts::device_mesh<mesh_2x2> m22{devices};
  const ts::device_mesh<mesh_2x4> m24{devices};
  using none = ts::spec<>;
  // vocabulary over x (7 rows over 2: uneven): unreduced over x, psum on reshard
  forward_case<ts::spec<"x", ts::none>, ts::spec<"y">>(m22, 7, 3, ts::shape<1>{5}, 1);
  using vocab_x = ts::spec<"x", ts::none>;
  static_assert(std::is_same_v<
                decltype(ts::take(std::declval<ts::sharded_array<double, mesh_2x2, vocab_x,
                                                                 ts::dextents<2>>>(),
                                  std::declval<ts::sharded_array<int, mesh_2x2, ts::spec<"y">,
                                                                 ts::dextents<1>>>()))::unreduced_type,
                ts::unreduced<"x">>);
  // the model dimension over y, ids over x (rank 2): no communication
  forward_case<ts::spec<ts::none, "y">, ts::spec<"x", ts::none>>(m22, 6, 5, ts::shape<2>{3, 4}, 2);
  // both table dimensions sharded, ids replicated
  forward_case<ts::spec<"y", "x">, none>(m24, 9, 5, ts::shape<2>{2, 3}, 3);
  forward_case<ts::spec<ts::axes("x", "y"), ts::none>, none>(m24, 11, 2, ts::shape<1>{6}, 4);
  forward_case<none, ts::spec<ts::axes("y", "x")>>(m24, 4, 3, ts::shape<1>{13}, 5);
  forward_case<ts::spec<ts::none, "x">, ts::spec<"y", ts::none>>(m24, 5, 3, ts::shape<2>{7, 2}, 6);
}

TEST_CASE("take: an id out of range is a shape_error naming it", "[ops]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const auto t = ts::device_put<ts::spec<"x", ts::none>>(m, random_tensor(ts::shape<2>{4, 2}, 1));
  const auto ids = ts::device_put<ts::spec<"y">>(m, ts::host_tensor<int, 1>({2}, {1, 4}));
  CHECK_THROWS_WITH(ts::take(t, ids), Catch::Contains("id 4 is outside the table's 4 rows"));
}

TEST_CASE("grad: take's scatter-add, every table layout", "[grad]") {
  ts::cpu_devices devices{4};
  const ts::device_mesh<mesh_2x2> m{devices};
  const auto ht = random_tensor(ts::shape<2>{7, 3}, 11);
  // repeated ids: their rows' cotangents add up
  const auto ids = ts::device_put<ts::spec<"y">>(m, ts::host_tensor<int, 1>({5}, {3, 0, 3, 6, 1}));
  const auto f = [&ids](auto table) { return sin_sum(ts::take(table, ids) * 2.0); };
  check_gradients<ts::spec<"x", ts::none>>("vocabulary over x", f, m, ht);
  check_gradients<ts::spec<ts::none, "x">>("model dimension over x", f, m, ht);
  const auto ids2 = ts::device_put<ts::spec<"x", ts::none>>(
      m, random_ids(ts::shape<2>{3, 2}, 7, 12));
  const auto f2 = [&ids2](auto table) { return sin_sum(ts::take(ts::sin(table), ids2)); };
  check_gradients<ts::spec<ts::none, "y">>("ids over x, an intermediate table", f2, m, ht);
  // the gradient's type: unreduced over the ids' axes (rule 9), for the update to reduce
  const auto t = ts::device_put<ts::spec<ts::none, "x">>(m, ht);
  const auto g = ts::grad<0>(f)(t);
  static_assert(std::is_same_v<decltype(g)::unreduced_type, ts::unreduced<"y">>);
}

}  // namespace
