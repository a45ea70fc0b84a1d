// ts::einsum against a serial einsum, for every (lhs spec, rhs spec) pair on the (2,2) and
// (2,4) meshes (the plan by rule, unreduced results checked per device as the partial sums
// they are), and output specs named (every one for small pairs, a deterministic sample
// otherwise): "ij,jk->ik", "bij,bjk->bik", "bsd,df->bsf", "bhqd,bhkd->bhqk", "ij,j->i",
// "i,j->ij", "i,i->", "ij,jk->k" (a summed letter), even and uneven extents. Plans are made
// as values (detail::plan_einsum) and run through detail::run_einsum, one instantiation per
// (mesh, plan rank), so the thousands of combinations cost no templates. The data are small
// integers, so float results are exact and compared with ==. The "ij,jk->ik" and
// "bij,bjk->bik" plans by rule are also compared with matmul's planner: the same rules.
#include <typeshard/typeshard.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cstddef>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {
namespace ts = typeshard;
namespace tsd = typeshard::detail;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;

template <std::size_t R>
using specs = std::vector<tsd::spec_array<R>>;

// Every spec of an array of rank n (<= R, padded with none to R) on Mesh.
template <class Mesh, std::size_t R>
void enumerate(specs<R>& out, tsd::spec_array<R>& cur, std::size_t dim, std::size_t n,
               std::array<bool, Mesh::rank>& used) {
  if (dim == n) {
    out.push_back(cur);
    return;
  }
  enumerate<Mesh, R>(out, cur, dim + 1, n, used);
  for (std::size_t a = 0; a < Mesh::rank; ++a) {
    if (used[a]) continue;
    used[a] = true;
    cur[dim].axes[cur[dim].count++] = Mesh::axes[a].name;
    enumerate<Mesh, R>(out, cur, dim, n, used);
    cur[dim].axes[--cur[dim].count] = ts::axis_name{};
    used[a] = false;
  }
}
template <class Mesh, std::size_t R>
specs<R> all_specs(std::size_t n) {
  specs<R> out;
  tsd::spec_array<R> cur{};
  std::array<bool, Mesh::rank> used{};
  enumerate<Mesh, R>(out, cur, 0, n, used);
  return out;
}

template <std::size_t R>
ts::host_tensor<float, R> integers(const ts::shape<R>& s, std::mt19937_64& rng) {
  ts::host_tensor<float, R> t(s);
  std::uniform_int_distribution<int> d(-3, 3);
  for (float& v : t.values()) v = static_cast<float>(d(rng));
  return t;
}

template <class Mesh, std::size_t R>
std::vector<tsd::buffer<float>> put_blocks(const ts::host_tensor<float, R>& host,
                                           const tsd::spec_array<R>& spec) {
  std::vector<tsd::buffer<float>> out(Mesh::size);
  for (std::size_t p = 0; p < Mesh::size; ++p) {
    const ts::index_slices<R> ix = tsd::index_of<Mesh>(spec, host.extents(), p);
    ts::shape<R> origin{}, local{};
    for (std::size_t d = 0; d < R; ++d) {
      origin[d] = ix[d].start;
      local[d] = ix[d].size();
    }
    tsd::buffer<float> b(ts::host_tensor<float, R>::element_count(local));
    tsd::copy_box(host.data(), host.extents(), origin, b.data(), local, ts::shape<R>{}, local);
    out[p] = std::move(b);
  }
  return out;
}

std::vector<std::span<const float>> spans(const std::vector<tsd::buffer<float>>& blocks) {
  std::vector<std::span<const float>> out;
  for (const auto& b : blocks) out.push_back(b.span());
  return out;
}

// Checks every position's block of the result of choice c: the serial einsum over the
// contracted letters' full ranges when the result is reduced, else over the blocks the
// device read (its partial sum). "" or the first mismatch.
template <class Mesh, std::size_t R>
std::string check(const tsd::einsum_equation& eq, const tsd::einsum_choice<R>& c,
                  const std::vector<tsd::buffer<float>>& got, const ts::host_tensor<float, R>& a,
                  const ts::host_tensor<float, R>& b) {
  const tsd::einsum_shapes<R> sh{a.extents(), b.extents(), 4};
  const ts::shape<R> cg = tsd::einsum_out_shape(eq, sh);
  // The letters, their global extents, and the range each device sums over.
  std::vector<char> letters;
  for (std::size_t l = 0; l < eq.lhs_rank; ++l) letters.push_back(eq.lhs[l]);
  for (std::size_t r = 0; r < eq.rhs_rank; ++r)
    if (!eq.in_lhs(eq.rhs[r])) letters.push_back(eq.rhs[r]);
  const bool partial = c.out_unreduced.count != 0;
  for (std::size_t p = 0; p < Mesh::size; ++p) {
    const ts::index_slices<R> ox = tsd::index_of<Mesh>(c.out, cg, p);
    const ts::index_slices<R> ax = tsd::index_of<Mesh>(c.lhs_read, a.extents(), p);
    const ts::index_slices<R> bx = tsd::index_of<Mesh>(c.rhs_read, b.extents(), p);
    std::size_t size = 1;
    for (std::size_t d = 0; d < R; ++d) size *= ox[d].size();
    if (got[p].size() != size)
      return "position " + std::to_string(p) + " holds " + std::to_string(got[p].size()) +
             " elements, its block has " + std::to_string(size);
    std::vector<double> want(size, 0.0);
    std::vector<std::size_t> lo(letters.size()), hi(letters.size()), idx(letters.size());
    bool empty = false;
    for (std::size_t k = 0; k < letters.size(); ++k) {
      const char x = letters[k];
      ts::slice s;
      if (eq.in_out(x)) {
        s = ox[eq.out_dim(x)];
      } else if (eq.in_lhs(x)) {
        s = partial ? ax[eq.lhs_dim(x)] : ts::slice{0, a.extent(eq.lhs_dim(x))};
      } else {
        s = partial ? bx[eq.rhs_dim(x)] : ts::slice{0, b.extent(eq.rhs_dim(x))};
      }
      lo[k] = idx[k] = s.start;
      hi[k] = s.stop;
      empty = empty || s.start == s.stop;
    }
    while (!empty) {
      auto at = [&](char x) { for (std::size_t k = 0; k < letters.size(); ++k) if (letters[k] == x) return idx[k]; return std::size_t{0}; };
      ts::shape<R> ai{}, bi{}, oi{};
      for (std::size_t l = 0; l < eq.lhs_rank; ++l) ai[l] = at(eq.lhs[l]);
      for (std::size_t r = 0; r < eq.rhs_rank; ++r) bi[r] = at(eq.rhs[r]);
      ts::shape<R> loc{};
      for (std::size_t d = 0; d < R; ++d) loc[d] = ox[d].size();
      for (std::size_t o = 0; o < eq.out_rank; ++o) oi[o] = at(eq.out[o]) - ox[o].start;
      std::size_t off = 0;
      for (std::size_t d = 0; d < R; ++d) off = off * loc[d] + oi[d];
      want[off] += double(a.data()[a.offset(ai)]) * double(b.data()[b.offset(bi)]);
      std::size_t k = letters.size();
      bool done = true;
      while (k-- > 0) {
        if (++idx[k] < hi[k]) { done = false; break; }
        idx[k] = lo[k];
      }
      if (done) break;
    }
    for (std::size_t e = 0; e < size; ++e)
      if (double(got[p].data()[e]) != want[e]) {
        std::ostringstream o;
        o << "position " << p << " element " << e << " = " << got[p].data()[e] << ", expected "
          << want[e];
        return o.str();
      }
  }
  return {};
}

struct stats {
  std::size_t pairs = 0, planned = 0, rejected = 0, named = 0;
  std::size_t one_sided = 0;  // planned pairs with a batch letter sharded in one operand only
};

// Whether a batch letter is sharded in one operand and whole in the other.
template <std::size_t R>
bool batch_sharded_in_one(const tsd::einsum_equation& eq, const tsd::spec_array<R>& l,
                          const tsd::spec_array<R>& r) {
  for (std::size_t d = 0; d < eq.lhs_rank; ++d) {
    const char x = eq.lhs[d];
    if (eq.role(x) == tsd::einsum_role::batch && (l[d].count == 0) != (r[eq.rhs_dim(x)].count == 0))
      return true;
  }
  return false;
}

// Every pair of specs for `subscripts` on Mesh with the given extents; output specs named
// for every pair when `all_named`, else for a deterministic sample of `sample_named` per pair.
template <class Mesh, std::size_t R>
stats run_formula(ts::cpu_devices& devices, std::string_view subscripts,
                  std::vector<std::size_t> lhs_ext, std::vector<std::size_t> rhs_ext,
                  std::size_t sample_named, std::uint64_t seed) {
  const tsd::einsum_equation eq = tsd::parse_einsum(subscripts);
  REQUIRE(eq.ok());
  REQUIRE(eq.plan_rank() == R);
  ts::device_mesh<Mesh> m{devices};
  std::mt19937_64 rng(seed);
  ts::shape<R> sa{}, sb{};
  for (std::size_t d = 0; d < R; ++d) {
    sa[d] = d < lhs_ext.size() ? lhs_ext[d] : 1;
    sb[d] = d < rhs_ext.size() ? rhs_ext[d] : 1;
  }
  const auto a = integers<R>(sa, rng);
  const auto b = integers<R>(sb, rng);
  const tsd::einsum_shapes<R> sh{sa, sb, 4};
  const specs<R> ls = all_specs<Mesh, R>(eq.lhs_rank);
  const specs<R> rs = all_specs<Mesh, R>(eq.rhs_rank);
  const specs<R> os = all_specs<Mesh, R>(eq.out_rank);
  stats st;
  std::size_t counter = 0;
  for (const auto& l : ls) {
    const auto a_blocks = put_blocks<Mesh, R>(a, l);
    for (const auto& r : rs) {
      ++st.pairs;
      const auto b_blocks = put_blocks<Mesh, R>(b, r);
      INFO(std::string(subscripts) << " lhs " << tsd::spec_string(l) << " rhs " << tsd::spec_string(r));
      const tsd::einsum_choice<R> c = tsd::plan_einsum<Mesh, R>(eq, l, r, false, {}, sh);
      if (c.problem != tsd::einsum_problem::none) {
        ++st.rejected;
        // Only the rule-2 errors without an output spec.
        CHECK((c.problem == tsd::einsum_problem::batch_specs_differ ||
               c.problem == tsd::einsum_problem::output_letters_share_axis ||
               c.problem == tsd::einsum_problem::batch_axis_taken_twice));
        CHECK((c.problem != tsd::einsum_problem::batch_axis_taken_twice ||
               batch_sharded_in_one(eq, l, r)));
      } else {
        ++st.planned;
        if (batch_sharded_in_one(eq, l, r)) {
          ++st.one_sided;
          // The batch letter keeps its sharding: the whole operand reads its block, and
          // nothing moves for it (no step on that dimension but a local slice).
          for (std::size_t d = 0; d < eq.lhs_rank; ++d)
            if (eq.role(eq.lhs[d]) == tsd::einsum_role::batch) {
              const auto& want = l[d].count ? l[d] : r[eq.rhs_dim(eq.lhs[d])];
              CHECK(c.lhs_read[d] == want);
              CHECK(c.rhs_read[eq.rhs_dim(eq.lhs[d])] == want);
              CHECK(c.local[eq.out_dim(eq.lhs[d])] == want);
            }
        }
        const auto got = tsd::run_einsum<float, Mesh, R>(eq, c, m, spans(a_blocks), sa, spans(b_blocks), sb);
        CHECK(check<Mesh, R>(eq, c, got, a, b) == "");
      }
      for (std::size_t k = 0; k < sample_named && k < os.size(); ++k) {
        const auto& o = sample_named >= os.size() ? os[k] : os[(counter++ * 7919 + k * 31) % os.size()];
        INFO("out " << tsd::spec_string(o));
        const tsd::einsum_choice<R> n = tsd::plan_einsum<Mesh, R>(eq, l, r, true, o, sh);
        REQUIRE(n.problem == tsd::einsum_problem::none);
        CHECK(n.out == o);
        CHECK(n.out_unreduced.count == 0);
        ++st.named;
        const auto got = tsd::run_einsum<float, Mesh, R>(eq, n, m, spans(a_blocks), sa, spans(b_blocks), sb);
        CHECK(check<Mesh, R>(eq, n, got, a, b) == "");
      }
    }
  }
  return st;
}

}  // namespace

TEST_CASE("einsum 2x2 mesh: matrix products, every spec pair and every output spec", "[einsum][combos]") {
  ts::cpu_devices devices{4};
  const auto s = run_formula<mesh_2x2, 2>(devices, "ij,jk->ik", {8, 12}, {12, 4}, 100, 1);
  CHECK(s.pairs == 121);
  CHECK(s.named == 121 * 11);
  run_formula<mesh_2x2, 2>(devices, "ij,jk->ik", {5, 7}, {7, 3}, 100, 2);  // uneven
  run_formula<mesh_2x2, 2>(devices, "ij,j->i", {6, 8}, {8}, 100, 3);
  run_formula<mesh_2x2, 2>(devices, "ij,j->i", {5, 3}, {3}, 100, 4);
  run_formula<mesh_2x2, 2>(devices, "i,j->ij", {4}, {6}, 100, 5);
  run_formula<mesh_2x2, 2>(devices, "i,j->ij", {3}, {5}, 100, 6);
  run_formula<mesh_2x2, 1>(devices, "i,i->", {8}, {8}, 100, 7);
  run_formula<mesh_2x2, 1>(devices, "i,i->", {7}, {7}, 100, 8);
  run_formula<mesh_2x2, 2>(devices, "ij,jk->k", {4, 6}, {6, 4}, 100, 9);  // i summed
  run_formula<mesh_2x2, 2>(devices, "ij,jk->ki", {5, 6}, {6, 3}, 100, 10);  // output transposed
}

TEST_CASE("einsum 2x2 mesh: rank 3, every spec pair, sampled output specs", "[einsum][combos]") {
  ts::cpu_devices devices{4};
  const auto even = run_formula<mesh_2x2, 3>(devices, "bij,bjk->bik", {4, 4, 8}, {4, 8, 4}, 2, 11);
  const auto uneven =
      run_formula<mesh_2x2, 3>(devices, "bij,bjk->bik", {3, 5, 6}, {3, 6, 2}, 2, 12);
  CHECK(even.one_sided > 0);  // sharded in one operand only: planned, checked serially
  CHECK(uneven.one_sided == even.one_sided);
  run_formula<mesh_2x2, 3>(devices, "bsd,df->bsf", {4, 4, 8}, {8, 4}, 2, 13);
  run_formula<mesh_2x2, 3>(devices, "bsd,df->bsf", {3, 5, 7}, {7, 3}, 2, 14);
  run_formula<mesh_2x2, 3>(devices, "bsd,bsd->b", {4, 2, 4}, {4, 2, 4}, 2, 15);
  CHECK(run_formula<mesh_2x2, 3>(devices, "bi,bk->bik", {4, 3}, {4, 5}, 2, 18).one_sided > 0);
}

TEST_CASE("einsum 2x2 mesh: attention scores bhqd,bhkd->bhqk, sampled", "[einsum][combos]") {
  ts::cpu_devices devices{4};
  CHECK(run_formula<mesh_2x2, 4>(devices, "bhqd,bhkd->bhqk", {2, 2, 4, 4}, {2, 2, 4, 4}, 1, 16)
            .one_sided > 0);
  run_formula<mesh_2x2, 4>(devices, "bhqd,bhkd->bhqk", {2, 3, 3, 5}, {2, 3, 5, 5}, 1, 17);
}

TEST_CASE("einsum 2x4 mesh: every spec pair, sampled output specs, even and uneven", "[einsum][combos]") {
  ts::cpu_devices devices{8};
  run_formula<mesh_2x4, 2>(devices, "ij,jk->ik", {8, 16}, {16, 8}, 3, 21);
  run_formula<mesh_2x4, 2>(devices, "ij,jk->ik", {5, 7}, {7, 3}, 3, 22);
  run_formula<mesh_2x4, 2>(devices, "ij,j->i", {8, 9}, {9}, 100, 23);
  run_formula<mesh_2x4, 2>(devices, "i,j->ij", {8}, {5}, 100, 24);
  run_formula<mesh_2x4, 1>(devices, "i,i->", {9}, {9}, 100, 25);
  run_formula<mesh_2x4, 3>(devices, "bsd,df->bsf", {4, 8, 8}, {8, 8}, 1, 26);
  run_formula<mesh_2x4, 3>(devices, "bsd,df->bsf", {3, 5, 6}, {6, 7}, 1, 27);
  run_formula<mesh_2x4, 3>(devices, "bij,bjk->bik", {2, 5, 3}, {2, 3, 6}, 1, 28);
  run_formula<mesh_2x4, 4>(devices, "bhqd,bhkd->bhqk", {2, 4, 3, 2}, {2, 4, 5, 2}, 0, 29);
}

// The matmul special case: "ij,jk->ik" and "bij,bjk->bik" by rule choose what matmul's
// planner chooses, for every spec pair (named outputs: the same cost).
template <class Mesh, std::size_t R>
void compare_with_matmul(const char* subscripts, const ts::shape<R>& sa, const ts::shape<R>& sb) {
  const tsd::einsum_equation eq = tsd::parse_einsum(subscripts);
  const specs<R> all = all_specs<Mesh, R>(R);
  const tsd::einsum_shapes<R> esh{sa, sb, 4};
  const tsd::einsum_shapes<R> msh{sa, sb, 4};
  std::size_t named = 0;
  for (const auto& l : all)
    for (const auto& r : all) {
      INFO(subscripts << " lhs " << tsd::spec_string(l) << " rhs " << tsd::spec_string(r));
      const auto e = tsd::plan_einsum<Mesh, R>(eq, l, r, false, {}, esh);
      const auto mm = tsd::plan_matmul<Mesh, R>(l, r, false, {}, msh);
      CHECK((e.problem == tsd::einsum_problem::none) == (mm.problem == tsd::einsum_problem::none));
      if (e.problem != tsd::einsum_problem::none || mm.problem != tsd::einsum_problem::none) continue;
      CHECK(e.lhs_gemm == mm.lhs_gemm);
      CHECK(e.rhs_gemm == mm.rhs_gemm);
      CHECK(e.out == mm.out);
      CHECK(e.out_unreduced == mm.out_unreduced);
      for (std::size_t k = 0; k < all.size(); k += 5) {
        const auto en = tsd::plan_einsum<Mesh, R>(eq, l, r, true, all[k], esh);
        const auto mn = tsd::plan_matmul<Mesh, R>(l, r, true, all[k], msh);
        if (mn.problem != tsd::einsum_problem::none) continue;  // batch dims never move in matmul
        ++named;
        CHECK(tsd::einsum_cost_of<Mesh>(eq, en, esh).bytes <=
              tsd::einsum_cost_of<Mesh>(tsd::matmul_equation<R>(), mn, msh).bytes);
      }
    }
  CHECK(named > 0);
}

TEST_CASE("einsum: the matmul formulas plan as ts::matmul does", "[einsum][matmul]") {
  compare_with_matmul<mesh_2x2, 2>("ij,jk->ik", {8, 12}, {12, 4});
  compare_with_matmul<mesh_2x4, 2>("ij,jk->ik", {5, 7}, {7, 3});
  compare_with_matmul<mesh_2x2, 3>("bij,bjk->bik", {4, 4, 8}, {4, 8, 4});
}
