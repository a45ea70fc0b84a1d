// tests/unit/matmul_support.hpp: what the matmul unit tests share (not a test itself).
//
// - matmul_rules.hpp: the spec enumeration and the rule expectation (compile-time);
// - put_blocks: device_put for a spec held as a value (the tests run plans chosen at run
//   time through detail::run_einsum, one instantiation for thousands of spec combinations);
// - check_result: every device's block of the result against a serial GEMM in double,
//   including unreduced results, whose per-device partial sums are checked exactly
//   (each device must hold the sum over its own block of J).
#pragma once

#include <typeshard/typeshard.hpp>
#include <typeshard/ops/matmul.hpp>

#include <catch2/catch.hpp>

#include "matmul_rules.hpp"

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

namespace matmul_test {

template <std::size_t Rank>
std::string str(const spec_array<Rank>& s) {
  return tsd::spec_string(s);
}

// A row-major host array of integers in [-3, 3] stored as T: every partial sum the tests
// form is an integer far below 2^24, so float results are exact whatever the summation
// order, and the comparison below is exact equality.
template <class T, std::size_t Rank>
ts::host_tensor<T, Rank> random_integers(const ts::shape<Rank>& s, std::mt19937_64& rng) {
  ts::host_tensor<T, Rank> t(s);
  std::uniform_int_distribution<int> d(-3, 3);
  for (T& v : t.values()) v = static_cast<T>(d(rng));
  return t;
}

// The blocks of `host` sharded by `spec` on every mesh position.
template <class Mesh, class T, std::size_t Rank>
std::vector<tsd::buffer<T>> put_blocks(const ts::host_tensor<T, Rank>& host,
                                       const spec_array<Rank>& spec) {
  std::vector<tsd::buffer<T>> out(Mesh::size);
  for (std::size_t p = 0; p < Mesh::size; ++p) {
    const ts::index_slices<Rank> ix = tsd::index_of<Mesh>(spec, host.extents(), p);
    ts::shape<Rank> origin{}, local{};
    for (std::size_t d = 0; d < Rank; ++d) {
      origin[d] = ix[d].start;
      local[d] = ix[d].size();
    }
    tsd::buffer<T> b(ts::host_tensor<T, Rank>::element_count(local));
    tsd::copy_box(host.data(), host.extents(), origin, b.data(), local, ts::shape<Rank>{}, local);
    out[p] = std::move(b);
  }
  return out;
}

template <class T>
std::vector<std::span<const T>> spans(const std::vector<tsd::buffer<T>>& blocks) {
  std::vector<std::span<const T>> out;
  for (const auto& b : blocks) out.push_back(b.span());
  return out;
}

// Serial reference: C[b..., i, k] = sum over j in [j0, j1) of A[b..., i, j] B[b..., j, k],
// in double.
template <class T, std::size_t Rank>
double reference(const ts::host_tensor<T, Rank>& a, const ts::host_tensor<T, Rank>& b,
                 const ts::shape<Rank>& c_index, std::size_t j0, std::size_t j1) {
  std::array<std::size_t, Rank> ai = c_index, bi = c_index;
  double s = 0;
  for (std::size_t j = j0; j < j1; ++j) {
    ai[Rank - 1] = j;
    bi[Rank - 2] = j;
    bi[Rank - 1] = c_index[Rank - 1];
    s += double(a.data()[a.offset(ai)]) * double(b.data()[b.offset(bi)]);
  }
  return s;
}

// Checks the blocks of a result laid out by choice.out (unreduced over choice.out_unreduced)
// on every position: a reduced block must equal the serial product; an unreduced one the
// partial sum over the device's block of J along the unreduced axes. Returns "" or the
// first mismatch.
template <class Mesh, class T, std::size_t Rank>
std::string check_result(const tsd::einsum_choice<Rank>& c, const std::vector<tsd::buffer<T>>& got,
                         const ts::host_tensor<T, Rank>& a, const ts::host_tensor<T, Rank>& b) {
  ts::shape<Rank> cg = a.extents();
  cg[Rank - 1] = b.extent(Rank - 1);
  const std::size_t J = a.extent(Rank - 1);
  for (std::size_t p = 0; p < Mesh::size; ++p) {
    const ts::index_slices<Rank> ix = tsd::index_of<Mesh>(c.out, cg, p);
    const ts::slice js =
        ts::shard_slice(J, tsd::shards_of<Mesh>(c.out_unreduced), tsd::shard_of<Mesh>(c.out_unreduced, p));
    std::size_t expected_size = 1;
    for (std::size_t d = 0; d < Rank; ++d) expected_size *= ix[d].size();
    if (got[p].size() != expected_size)
      return "position " + std::to_string(p) + " holds " + std::to_string(got[p].size()) +
             " elements, its block has " + std::to_string(expected_size);
    ts::shape<Rank> local{}, li{};
    for (std::size_t d = 0; d < Rank; ++d) local[d] = ix[d].size();
    for (std::size_t n = 0; n < expected_size; ++n) {
      std::size_t rem = n;
      for (std::size_t d = Rank; d-- > 0;) {
        li[d] = rem % local[d];
        rem /= local[d];
      }
      ts::shape<Rank> gi{};
      for (std::size_t d = 0; d < Rank; ++d) gi[d] = ix[d].start + li[d];
      const double want = reference(a, b, gi, js.start, js.stop);
      if (double(got[p].data()[n]) != want) {
        std::ostringstream o;
        o << "position " << p << " element (";
        for (std::size_t d = 0; d < Rank; ++d) o << (d ? "," : "") << gi[d];
        o << ") = " << got[p].data()[n] << ", expected " << want;
        return o.str();
      }
    }
  }
  return {};
}

}  // namespace matmul_test

namespace matmul_test {

// What the rule expectation says about a planner's choice: "" or the first difference.
template <std::size_t Rank>
std::string compare(const rule_expectation<Rank>& e, const tsd::einsum_choice<Rank>& c) {
  if (e.problem != c.problem) return "problem differs";
  if (e.problem != tsd::einsum_problem::none) return {};
  if (e.lhs_gemm != c.lhs_gemm) return "lhs_gemm " + str(c.lhs_gemm) + ", rule says " + str(e.lhs_gemm);
  if (e.rhs_gemm != c.rhs_gemm) return "rhs_gemm " + str(c.rhs_gemm) + ", rule says " + str(e.rhs_gemm);
  if (e.out != c.out) return "out " + str(c.out) + ", rule says " + str(e.out);
  if (!(e.unreduced == c.out_unreduced)) return "unreduced axes differ from the rule's";
  return {};
}

// ---- the driver: every (lhs, rhs) pair, unnamed and with output specs ----------------------

// Sanitizer builds (ASan, TSan: 5-20x slower, and the 8-device meshes oversubscribe the
// 2 cores) walk every k-th pair of the largest enumerations instead of all of them.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
inline constexpr bool sanitized = true;
#else
inline constexpr bool sanitized = false;
#endif
#else
inline constexpr bool sanitized = false;
#endif

// 1 normally; k under a sanitizer.
inline std::size_t sanitizer_stride(std::size_t k) { return sanitized ? k : 1; }

struct combo_stats {
  std::size_t pairs = 0, planned = 0, rejected = 0, named = 0;
  std::size_t one_sided = 0;  // planned pairs with a batch dimension sharded in one operand only
};

// Runs every (lhs, rhs) pair of rank-Rank specs on Mesh for the given extents: the unnamed
// plan against the rule, its result against the serial product; then with output specs:
// all of them (outs_per_pair == 0) or that many drawn at random per pair. `nominal` plans
// as a dynamic-extent plan would (all extents equal), else with the real extents. With
// pair_stride k > 1, only every k-th pair (from a random offset) runs.
template <class Mesh, class T, std::size_t Rank>
combo_stats run_all_pairs(ts::cpu_devices& devices, const ts::shape<Rank>& ga, const ts::shape<Rank>& gb,
                          std::size_t outs_per_pair, bool nominal, std::uint64_t seed,
                          std::size_t pair_stride = 1) {
  ts::device_mesh<Mesh> m{devices};
  std::mt19937_64 rng(seed);
  constexpr spec_list<Rank> specs = all_specs<Mesh, Rank>();
  const auto a = random_integers<T>(ga, rng);
  const auto b = random_integers<T>(gb, rng);
  tsd::einsum_shapes<Rank> sh{ga, gb, sizeof(T)};
  if (nominal)
    for (std::size_t d = 0; d < Rank; ++d) sh.lhs[d] = sh.rhs[d] = 4096;
  combo_stats stats;
  std::uniform_int_distribution<std::size_t> pick(0, specs.count - 1);
  const std::size_t offset = pair_stride > 1 ? rng() % pair_stride : 0;
  for (std::size_t i = 0; i < specs.count; ++i) {
    const auto& lhs = specs.specs[i];
    const auto a_blocks = put_blocks<Mesh>(a, lhs);
    for (std::size_t j = 0; j < specs.count; ++j) {
      const auto& rhs = specs.specs[j];
      if ((i * specs.count + j + offset) % pair_stride != 0) continue;
      ++stats.pairs;
      const std::string where = "lhs " + str(lhs) + " rhs " + str(rhs) + " on " + Mesh::to_string() +
                                " shapes " + ts::to_string(ga) + " . " + ts::to_string(gb) +
                                (nominal ? " (planned as dynamic)" : "") + ", seed " + std::to_string(seed);
      const auto c = tsd::plan_matmul<Mesh, Rank>(lhs, rhs, false, {}, sh);
      {
        const std::string diff = compare(expect_by_rule<Mesh>(lhs, rhs, sh.lhs, sh.rhs), c);
        INFO(where << ": " << diff);
        REQUIRE(diff.empty());
      }
      if (c.problem == tsd::einsum_problem::batch_specs_differ) {
        ++stats.rejected;
        continue;  // no plan, named or not (rule 2)
      }
      const auto b_blocks = put_blocks<Mesh>(b, rhs);
      auto run_and_check = [&](const tsd::einsum_choice<Rank>& choice, const std::string& what) {
        const auto got = tsd::run_einsum<T, Mesh, Rank>(tsd::matmul_equation<Rank>(), choice, m, spans(a_blocks), ga, spans(b_blocks), gb);
        const std::string err = check_result<Mesh>(choice, got, a, b);
        INFO(what << ": " << err);
        REQUIRE(err.empty());
      };
      if (c.problem == tsd::einsum_problem::none) {
        ++stats.planned;
        bool one_sided = false;
        for (std::size_t d = 0; d + 2 < Rank; ++d)
          one_sided = one_sided || (lhs[d].count == 0) != (rhs[d].count == 0);
        if (one_sided) {
          ++stats.one_sided;
          // No communication for the batch dimensions: the whole operand reads the block.
          for (std::size_t d = 0; d + 2 < Rank; ++d) {
            REQUIRE(c.lhs_read[d] == c.rhs_read[d]);
            REQUIRE(c.out[d] == (lhs[d].count ? lhs[d] : rhs[d]));
          }
        }
        run_and_check(c, where + " (no output spec)");
      } else {
        ++stats.rejected;
      }
      const std::size_t n_out = outs_per_pair == 0 ? specs.count : outs_per_pair;
      for (std::size_t k = 0; k < n_out; ++k) {
        const auto& out = specs.specs[outs_per_pair == 0 ? k : pick(rng)];
        const auto cn = tsd::plan_matmul<Mesh, Rank>(lhs, rhs, true, out, sh);
        const std::string w = where + " out " + str(out);
        INFO(w);
        REQUIRE(cn.problem == tsd::einsum_problem::none);
        REQUIRE(cn.out == out);
        REQUIRE(cn.out_unreduced.count == 0);
        // The cheapest wins: never worse than the unnamed plan followed by a reshard to out.
        if (c.problem == tsd::einsum_problem::none) {
          auto via_rule = c;
          via_rule.out_named = true;
          via_rule.out = out;
          via_rule.out_unreduced = {};
          REQUIRE(tsd::einsum_cost_of<Mesh>(tsd::matmul_equation<Rank>(), cn, sh).bytes <=
                  tsd::einsum_cost_of<Mesh>(tsd::matmul_equation<Rank>(), via_rule, sh).bytes);
        }
        ++stats.named;
        run_and_check(cn, w);
      }
    }
  }
  return stats;
}

}  // namespace matmul_test
