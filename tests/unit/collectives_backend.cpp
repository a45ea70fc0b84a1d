// The thread-pool backend's collective primitives on raw buffers, as an MPI backend would
// be called: every element kind, sum / max / min, in-place all_reduce, zero counts,
// tiled rows with uneven per-member counts, all_to_all between differently cut layouts,
// permute, the types that cannot be reduced, and an element_type spelled by hand.
#include <catch2/catch.hpp>

#include <complex>
#include <cstdint>
#include <random>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

namespace {

std::vector<std::size_t> everyone(std::size_t n) {
  std::vector<std::size_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

// all_reduce over n devices of values v(i, k) (device i, element k), in place when asked.
template <class T, class V, class Op>
void check_all_reduce(ts::cpu_devices& d, std::size_t n, std::size_t count, ts::reduce_op op,
                      V value, Op combine, bool in_place) {
  const auto ids = everyone(n);
  std::vector<std::vector<T>> in(n, std::vector<T>(count)), out(n, std::vector<T>(count));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < count; ++k) in[i][k] = value(i, k);
  const auto original = in;
  d.run(ids, [&](std::size_t i) {
    T* dst = in_place ? in[i].data() : out[i].data();
    d.all_reduce({ids, i}, ts::element_type_of<T>, op, in[i].data(), dst, count);
  });
  for (std::size_t k = 0; k < count; ++k) {
    T expect = original[0][k];
    for (std::size_t i = 1; i < n; ++i) expect = combine(expect, original[i][k]);
    for (std::size_t i = 0; i < n; ++i) REQUIRE((in_place ? in : out)[i][k] == expect);
  }
}

}  // namespace

TEST_CASE("backend: all_reduce over every element kind, out of place and in place", "[collectives][backend]") {
  ts::cpu_devices d{5};
  auto plus = [](auto a, auto b) { return static_cast<decltype(a)>(a + b); };
  auto max = [](auto a, auto b) { return a < b ? b : a; };
  auto min = [](auto a, auto b) { return b < a ? b : a; };
  for (bool in_place : {false, true}) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{5000}}) {
      INFO("count " << count << (in_place ? " in place" : ""));
      auto small = [](std::size_t i, std::size_t k) { return static_cast<int>((i * 7 + k * 3) % 23) - 11; };
      check_all_reduce<std::int8_t>(d, 5, count, ts::reduce_op::sum, small, plus, in_place);
      check_all_reduce<std::uint8_t>(d, 5, count, ts::reduce_op::max, small, max, in_place);
      check_all_reduce<std::int16_t>(d, 5, count, ts::reduce_op::min, small, min, in_place);
      check_all_reduce<std::uint16_t>(d, 5, count, ts::reduce_op::sum, small, plus, in_place);
      check_all_reduce<std::int32_t>(d, 5, count, ts::reduce_op::sum, small, plus, in_place);
      check_all_reduce<std::uint32_t>(d, 5, count, ts::reduce_op::max, small, max, in_place);
      check_all_reduce<std::int64_t>(d, 5, count, ts::reduce_op::min, small, min, in_place);
      check_all_reduce<std::uint64_t>(d, 5, count, ts::reduce_op::sum, small, plus, in_place);
      // Small integers in floating point: exact, whatever the order.
      check_all_reduce<float>(d, 5, count, ts::reduce_op::sum, small, plus, in_place);
      check_all_reduce<double>(d, 5, count, ts::reduce_op::max, small, max, in_place);
      check_all_reduce<std::complex<float>>(
          d, 5, count, ts::reduce_op::sum,
          [&](std::size_t i, std::size_t k) { return std::complex<float>(float(small(i, k)), float(i)); },
          plus, in_place);
      check_all_reduce<std::complex<double>>(
          d, 5, count, ts::reduce_op::sum,
          [&](std::size_t i, std::size_t k) { return std::complex<double>(double(k), double(small(i, k))); },
          plus, in_place);
    }
  }
}

TEST_CASE("backend: floating-point sums run in rank order, the same bits everywhere", "[collectives][backend]") {
  ts::cpu_devices d{4};
  const auto ids = everyone(4);
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.0f, 1e3f);
  std::vector<std::vector<float>> in(4, std::vector<float>(3000)), out = in;
  for (auto& v : in)
    for (float& x : v) x = n(rng);
  d.run(ids, [&](std::size_t i) {
    d.all_reduce({ids, i}, ts::element_type_of<float>, ts::reduce_op::sum, in[i].data(), out[i].data(), 3000);
  });
  for (std::size_t k = 0; k < 3000; ++k) {
    const float expect = ((in[0][k] + in[1][k]) + in[2][k]) + in[3][k];
    for (std::size_t i = 0; i < 4; ++i) REQUIRE(out[i][k] == expect);
  }
}

TEST_CASE("backend: all_gather and reduce_scatter with rows and uneven counts", "[collectives][backend]") {
  ts::cpu_devices d{3};
  const auto ids = everyone(3);
  const std::vector<std::size_t> counts{3, 0, 2};
  const std::size_t rows = 4, total = 5;
  // all_gather: member j's row r holds 100 j + 10 r + c.
  std::vector<std::vector<long>> send(3), gathered(3, std::vector<long>(rows * total));
  for (std::size_t j = 0; j < 3; ++j)
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < counts[j]; ++c) send[j].push_back(long(100 * j + 10 * r + c));
  d.run(ids, [&](std::size_t i) {
    d.all_gather({ids, i}, ts::element_type_of<long>, send[i].data(), gathered[i].data(), rows, counts);
  });
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t r = 0; r < rows; ++r) {
      std::size_t col = 0;
      for (std::size_t j = 0; j < 3; ++j)
        for (std::size_t c = 0; c < counts[j]; ++c, ++col)
          REQUIRE(gathered[i][r * total + col] == long(100 * j + 10 * r + c));
    }
  // reduce_scatter: member i sends [rows][total] of i + r * total + col; member j keeps
  // its columns, summed over members.
  std::vector<std::vector<long>> full(3, std::vector<long>(rows * total)), mine(3);
  for (std::size_t i = 0; i < 3; ++i) {
    for (std::size_t k = 0; k < rows * total; ++k) full[i][k] = long(i + k);
    mine[i].resize(rows * counts[i]);
  }
  d.run(ids, [&](std::size_t i) {
    d.reduce_scatter({ids, i}, ts::element_type_of<long>, ts::reduce_op::sum, full[i].data(),
                     mine[i].data(), rows, counts);
  });
  std::size_t offset = 0;
  for (std::size_t j = 0; j < 3; ++j) {
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < counts[j]; ++c)
        REQUIRE(mine[j][r * counts[j] + c] == long(3 * (r * total + offset + c) + 0 + 1 + 2));
    offset += counts[j];
  }
}

TEST_CASE("backend: all_to_all between layouts cut into different runs", "[collectives][backend]") {
  // Each of 2 members sends a [3][4] block split by columns (pieces [3][2]) and receives
  // them stacked by rows ([6][2]): the tiled all_to_all(split 1, concat 0).
  ts::cpu_devices d{2};
  const auto ids = everyone(2);
  std::vector<std::vector<int>> send(2, std::vector<int>(12)), recv(2, std::vector<int>(12));
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t k = 0; k < 12; ++k) send[i][k] = int(100 * i + k);
  const ts::strided_pieces s{3, 2, 4, 2}, r{1, 6, 12, 6};
  d.run(ids, [&](std::size_t i) {
    d.all_to_all({ids, i}, ts::element_type_of<int>, send[i].data(), recv[i].data(), s, r);
  });
  for (std::size_t j = 0; j < 2; ++j)      // receiver
    for (std::size_t i = 0; i < 2; ++i)    // sender
      for (std::size_t row = 0; row < 3; ++row)
        for (std::size_t c = 0; c < 2; ++c)
          REQUIRE(recv[j][i * 6 + row * 2 + c] == int(100 * i + row * 4 + j * 2 + c));
}

TEST_CASE("backend: permute, with a device nobody sends to", "[collectives][backend]") {
  ts::cpu_devices d{4};
  const auto ids = everyone(4);
  // 0 -> 2, 2 -> 1, 1 -> 0; 3 sends nothing and receives nothing (zeros).
  const std::size_t to[] = {2, 0, 1, ts::no_peer};
  const std::size_t from[] = {1, 2, 0, ts::no_peer};
  std::vector<std::vector<double>> send(4, std::vector<double>(5)), recv(4, std::vector<double>(5, -1));
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t k = 0; k < 5; ++k) send[i][k] = double(10 * i + k);
  d.run(ids, [&](std::size_t i) {
    d.permute({ids, i}, ts::element_type_of<double>, send[i].data(), to[i] == ts::no_peer ? 0 : 5,
              to[i], recv[i].data(), 5, from[i]);
  });
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t k = 0; k < 5; ++k)
      REQUIRE(recv[i][k] == (from[i] == ts::no_peer ? 0.0 : send[from[i]][k]));
}

TEST_CASE("backend: opaque elements move but do not reduce; complex has no max", "[collectives][backend]") {
  struct pair_of {
    int a;
    short b;
  };
  ts::cpu_devices d{2};
  const auto ids = everyone(2);
  std::vector<pair_of> send{{1, 2}, {3, 4}};
  std::vector<std::vector<pair_of>> recv(2, std::vector<pair_of>(2));
  const std::vector<std::size_t> counts{1, 1};
  d.run(ids, [&](std::size_t i) {
    d.all_gather({ids, i}, ts::element_type_of<pair_of>, &send[i], recv[i].data(), 1, counts);
  });
  for (const auto& r : recv) {
    CHECK((r[0].a == 1 && r[0].b == 2 && r[1].a == 3 && r[1].b == 4));
  }
  pair_of x{1, 1};
  CHECK_THROWS_AS(d.run(ids, [&](std::size_t i) {
    pair_of y = x;
    d.all_reduce({ids, i}, ts::element_type_of<pair_of>, ts::reduce_op::sum, &y, &y, 1);
  }), ts::device_error);
  std::complex<float> z{1, 1};
  CHECK_THROWS_WITH(d.run(ids, [&](std::size_t i) {
    std::complex<float> w = z;
    d.all_reduce({ids, i}, ts::element_type_of<std::complex<float>>, ts::reduce_op::max, &w, &w, 1);
  }), Catch::Contains("complex: sum only"));
}

TEST_CASE("backend: an element_type spelled by hand moves but has no loop for the pool to reduce with",
          "[collectives][backend]") {
  // element_type_of<T> carries T's reduction loop; equality is the kind and size alone.
  const ts::element_type by_hand{ts::element_kind::float32, sizeof(float)};
  // (A run-time check: under AddressSanitizer GCC does not fold a function's address.)
  CHECK(ts::element_type_of<float>.reduce != nullptr);
  STATIC_REQUIRE(ts::element_type_of<float> == ts::element_type{ts::element_kind::float32, 4});
  CHECK(by_hand.reduce == nullptr);
  ts::cpu_devices d{2};
  const auto ids = everyone(2);
  std::vector<std::vector<float>> in{{1, 2}, {3, 4}}, out(2, std::vector<float>(4));
  const std::vector<std::size_t> counts{2, 2};
  d.run(ids, [&](std::size_t i) { d.all_gather({ids, i}, by_hand, in[i].data(), out[i].data(), 1, counts); });
  CHECK(out[1] == std::vector<float>{1, 2, 3, 4});
  for (ts::reduce_op op : {ts::reduce_op::sum, ts::reduce_op::max}) {
    CHECK_THROWS_WITH(d.run(ids, [&](std::size_t i) {
      d.all_reduce({ids, i}, by_hand, op, in[i].data(), in[i].data(), 2);
    }), Catch::Contains("without their reduction loop") && Catch::Contains("element_type_of<T>"));
  }
  CHECK_THROWS_WITH(d.run(ids, [&](std::size_t i) {
    d.reduce_scatter({ids, i}, by_hand, ts::reduce_op::sum, in[i].data(), out[i].data(), 1,
                     std::vector<std::size_t>{1, 1});
  }), Catch::Contains("float32"));
  CHECK(in == std::vector<std::vector<float>>{{1, 2}, {3, 4}});  // nothing written
}

TEST_CASE("backend: all_reduce of a large array (streaming stores), in place and not", "[collectives][backend]") {
  ts::cpu_devices d{3};
  const auto ids = everyone(3);
  const std::size_t count = (std::size_t{12} << 20) / sizeof(float) + 5;  // above the threshold, odd
  for (bool in_place : {false, true}) {
    std::vector<std::vector<float>> in(3, std::vector<float>(count)), out(3, std::vector<float>(count));
    for (std::size_t i = 0; i < 3; ++i)
      for (std::size_t k = 0; k < count; ++k) in[i][k] = static_cast<float>((k * (i + 1)) % 1000);
    std::vector<float> expect(count);
    for (std::size_t k = 0; k < count; ++k) expect[k] = (in[0][k] + in[1][k]) + in[2][k];
    d.run(ids, [&](std::size_t i) {
      float* dst = in_place ? in[i].data() : out[i].data();
      d.all_reduce({ids, i}, ts::element_type_of<float>, ts::reduce_op::sum, in[i].data(), dst, count);
    });
    for (std::size_t i = 0; i < 3; ++i) CHECK((in_place ? in : out)[i] == expect);
  }
}
