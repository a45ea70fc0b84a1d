// matmul_plan: the plans of DESIGN rule 2's cases, checked with static_assert only.
//
// Seed 001 section 3 (2x2 mesh, 4x4 matrices), seed 004 (8 x 4096 x 4096, batch sharded),
// the cost-based choices when an output spec is named, multi-axis dimensions, 1-D and 3-D
// meshes, and the plan's members (steps, communication, bytes per device).
#include <typeshard/plan/matmul_plan.hpp>

#include <type_traits>

namespace {

namespace ts = typeshard;
using ts::none;
using kind = ts::step_kind;
using op = ts::step_operand;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_8 = ts::mesh<ts::axis("batch", 8)>;
using mesh_2x2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2), ts::axis("z", 2)>;
using e4 = ts::extents<4, 4>;

template <class Plan, class Out, class Unreduced = ts::unreduced<>>
constexpr bool gives = std::is_same_v<typename Plan::out_spec, Out> &&
                       std::is_same_v<typename Plan::out_unreduced, Unreduced>;

constexpr bool same_axes(const ts::dim_spec& d, const char* a) {
  return d.count == 1 && d.axes[0].view() == a;
}

// ---- case 1: no sharded contracting dimension: no collective ----------------------------
using case1 = ts::matmul_plan<mesh_2x2, ts::spec<"x", none>, ts::spec<none, "y">, ts::auto_out, e4>;
static_assert(gives<case1, ts::spec<"x", "y">>);
static_assert(ts::communication_free<case1>);
static_assert(case1::steps.size() == 1 && case1::steps[0].kind == kind::local_gemm);
static_assert(case1::bytes_per_device == 0);
// The book's other communication-free forms.
static_assert(gives<ts::matmul_plan<mesh_2x2, ts::spec<none, none>, ts::spec<none, "y">>, ts::spec<none, "y">>);
static_assert(gives<ts::matmul_plan<mesh_2x2, ts::spec<"x", none>, ts::spec<none, none>>, ts::spec<"x", none>>);
static_assert(ts::communication_free<ts::matmul_plan<mesh_2x2, ts::spec<none, none>, ts::spec<none, none>>>);

// ---- case 2: J sharded in one operand: all_gather it along J ----------------------------
using case2 = ts::matmul_plan<mesh_2x2, ts::spec<none, "x">, ts::spec<none, none>, ts::auto_out, e4>;
static_assert(gives<case2, ts::spec<none, none>>);
static_assert(!ts::communication_free<case2>);
static_assert(case2::steps.size() == 2);
static_assert(case2::steps[0].kind == kind::all_gather && case2::steps[0].operand == op::lhs &&
              case2::steps[0].dim == 1 && same_axes(case2::steps[0].axes, "x"));
static_assert(case2::steps[1].kind == kind::local_gemm);
// all_gather over x of a 4x2 float block: the device receives one more 4x2 block.
static_assert(case2::bytes_per_device == 4 * 2 * sizeof(float));
// The same on the rhs side, and A[I_X, J] . B[J_X, K]: gather rhs, keep the rows sharded.
using case2r = ts::matmul_plan<mesh_2x2, ts::spec<"x", none>, ts::spec<"x", none>>;
static_assert(gives<case2r, ts::spec<"x", none>>);
static_assert(case2r::steps[0].kind == kind::all_gather && case2r::steps[0].operand == op::rhs &&
              case2r::steps[0].dim == 0);

// ---- case 3: J sharded over the same axis in both: unreduced, or reduced as named -------
using case3 = ts::matmul_plan<mesh_2x2, ts::spec<none, "x">, ts::spec<"x", none>, ts::auto_out, e4>;
static_assert(gives<case3, ts::spec<none, none>, ts::unreduced<"x">>);
static_assert(ts::communication_free<case3>);
static_assert(std::is_same_v<case3::local_unreduced, ts::unreduced<"x">>);
// Output replicated over x: psum (all-reduce) after the local GEMM.
using case3_psum = ts::matmul_plan<mesh_2x2, ts::spec<none, "x">, ts::spec<"x", none>, ts::spec<none, none>, e4>;
static_assert(gives<case3_psum, ts::spec<none, none>>);
static_assert(case3_psum::steps.size() == 2 && case3_psum::steps[0].kind == kind::local_gemm &&
              case3_psum::steps[1].kind == kind::psum && case3_psum::steps[1].operand == op::out);
// Ring all-reduce over 2 devices of a 4x4 block: 2 * (1/2) * 16 floats.
static_assert(case3_psum::bytes_per_device == 16 * sizeof(float));
// Output sharded over x along rows: psum_scatter, half the bytes.
using case3_scatter = ts::matmul_plan<mesh_2x2, ts::spec<none, "x">, ts::spec<"x", none>, ts::spec<"x", none>, e4>;
static_assert(case3_scatter::steps[1].kind == kind::psum_scatter && case3_scatter::steps[1].dim == 0);
static_assert(case3_scatter::bytes_per_device == 8 * sizeof(float));
using case3_scatter_k = ts::matmul_plan<mesh_2x2, ts::spec<none, "x">, ts::spec<"x", none>, ts::spec<none, "x">, e4>;
static_assert(case3_scatter_k::steps[1].kind == kind::psum_scatter && case3_scatter_k::steps[1].dim == 1);

// ---- case 4: I and K over the same axis: the output spec decides ------------------------
using case4_rows = ts::matmul_plan<mesh_2x2, ts::spec<"x", none>, ts::spec<none, "x">, ts::spec<"x", none>, e4>;
static_assert(case4_rows::steps[0].kind == kind::all_gather && case4_rows::steps[0].operand == op::rhs &&
              case4_rows::steps[0].dim == 1 && case4_rows::steps.size() == 2);
using case4_cols = ts::matmul_plan<mesh_2x2, ts::spec<"x", none>, ts::spec<none, "x">, ts::spec<none, "x">, e4>;
static_assert(case4_cols::steps[0].kind == kind::all_gather && case4_cols::steps[0].operand == op::lhs &&
              case4_cols::steps[0].dim == 0 && case4_cols::steps.size() == 2);
// Without an output spec it is a compile error (tests/compile_fail/rule2_case4_without_out_spec.cpp);
// the planner reports it without diagnosing:
static_assert(ts::detail::plan_matmul<mesh_2x2, 2>(
                  ts::detail::spec_array_of<ts::spec<"x", none>, 2>(),
                  ts::detail::spec_array_of<ts::spec<none, "x">, 2>(), false, {},
                  ts::detail::einsum_shapes<2>{{4, 4}, {4, 4}, 4})
                  .problem == ts::detail::einsum_problem::output_letters_share_axis);

// ---- J over different axes: gather the cheaper operand ---------------------------------
// Equal blocks: the rule's tie-break gathers rhs; the result is unreduced over lhs's axis.
using diff_tie = ts::matmul_plan<mesh_2x2, ts::spec<none, "x">, ts::spec<"y", none>, ts::auto_out, ts::extents<8, 8>>;
static_assert(gives<diff_tie, ts::spec<none, none>, ts::unreduced<"x">>);
static_assert(diff_tie::steps[0].kind == kind::all_gather && diff_tie::steps[0].operand == op::rhs);
static_assert(diff_tie::steps[1].kind == kind::slice && diff_tie::steps[1].operand == op::rhs);
// lhs much smaller (I = 2 rows): gathering lhs wins, the result is unreduced over y.
using diff_small_lhs = ts::matmul_plan<mesh_2x2, ts::spec<none, "x">, ts::spec<"y", none>, ts::auto_out,
                                       ts::extents<2, 64>, ts::extents<64, 64>>;
static_assert(gives<diff_small_lhs, ts::spec<none, none>, ts::unreduced<"y">>);
static_assert(diff_small_lhs::steps[0].operand == op::lhs);
// Naming a replicated output: gathering both operands (2 x 32 floats) is cheaper than
// gathering one and psum-ing the 8x8 product (32 + 64 floats), so both are gathered.
using diff_named = ts::matmul_plan<mesh_2x2, ts::spec<none, "x">, ts::spec<"y", none>, ts::spec<none, none>, ts::extents<8, 8>>;
static_assert(gives<diff_named, ts::spec<none, none>>);
static_assert(diff_named::steps.size() == 3 && diff_named::steps[0].kind == kind::all_gather &&
              diff_named::steps[1].kind == kind::all_gather && diff_named::steps[2].kind == kind::local_gemm);
static_assert(diff_named::bytes_per_device == 64 * sizeof(float));
// With a short lhs (2 rows), psum-ing the 2x64 product is cheaper than gathering rhs.
using diff_named_psum = ts::matmul_plan<mesh_2x2, ts::spec<none, "x">, ts::spec<"y", none>, ts::spec<none, none>,
                                        ts::extents<2, 64>, ts::extents<64, 64>>;
static_assert(diff_named_psum::steps.back().kind == kind::psum);

// ---- named output: the cheapest plan, including an all_to_all before the GEMM -----------
// A[I, J_X] . B[J, K] -> C[I_X, K]: moving x from J to I on lhs (all_to_all, (n-1)/n of a
// block) beats gathering J (a whole block) or psum_scatter of the product.
using to_rows = ts::matmul_plan<mesh_2x2, ts::spec<none, "x">, ts::spec<none, none>, ts::spec<"x", none>, ts::extents<8, 8>>;
static_assert(to_rows::steps[0].kind == kind::all_to_all && to_rows::steps[0].dim == 1 &&
              to_rows::steps[0].to_dim == 0 && to_rows::steps.size() == 2);
static_assert(to_rows::bytes_per_device == 8 * 4 / 2 * sizeof(float));

// ---- multi-axis dimensions and the 3-D mesh ---------------------------------------------
using multi = ts::matmul_plan<mesh_2x2, ts::spec<none, ts::axes("x", "y")>, ts::spec<ts::axes("x", "y"), none>>;
static_assert(gives<multi, ts::spec<none, none>, ts::unreduced<"x", "y">>);
using multi_psum = ts::matmul_plan<mesh_2x2, ts::spec<none, ts::axes("x", "y")>, ts::spec<ts::axes("x", "y"), none>,
                                   ts::spec<none, none>, ts::extents<8, 8>>;
static_assert(multi_psum::steps.size() == 2 && multi_psum::steps[1].kind == kind::psum &&
              multi_psum::steps[1].axes.count == 2);
using cube = ts::matmul_plan<mesh_2x2x2, ts::spec<"x", "z">, ts::spec<"z", "y">>;
static_assert(gives<cube, ts::spec<"x", "y">, ts::unreduced<"z">>);
static_assert(ts::communication_free<cube>);

// ---- batched (seed 004): 8 x 4096 x 4096 with the batch sharded over 8 devices -----------
using seed004 = ts::matmul_plan<mesh_8, ts::spec<"batch">, ts::spec<"batch">, ts::auto_out,
                                ts::extents<8, 4096, 4096>, ts::extents<8, 4096, 4096>>;
static_assert(gives<seed004, ts::spec<"batch", none, none>>);
static_assert(ts::communication_free<seed004>);
static_assert(seed004::flops_per_device == 2.0 * 4096 * 4096 * 4096);  // one matrix each
using batched3 = ts::matmul_plan<mesh_2x2, ts::spec<"x", none, "y">, ts::spec<"x", "y", none>>;
static_assert(gives<batched3, ts::spec<"x", none, none>, ts::unreduced<"y">>);

// ---- partial-sum operands (rule 3: matmul is linear in each operand) --------------------
using partial_lhs = ts::matmul_plan<mesh_2x2, ts::spec<none, none>, ts::spec<none, "y">, ts::auto_out,
                                    ts::extents<4, 4>, ts::extents<4, 4>, float, ts::unreduced<"x">>;
static_assert(gives<partial_lhs, ts::spec<none, "y">, ts::unreduced<"x">>);
static_assert(ts::communication_free<partial_lhs>);
using partial_both = ts::matmul_plan<mesh_2x2, ts::spec<none, "x">, ts::spec<"x", none>, ts::spec<none, none>,
                                     ts::extents<4, 4>, ts::extents<4, 4>, float, ts::unreduced<"y">>;
static_assert(partial_both::steps.size() == 2 && partial_both::steps[1].kind == kind::psum &&
              partial_both::steps[1].axes.count == 2);  // one psum over x and y
static_assert(std::is_same_v<partial_both::local_unreduced, ts::unreduced<"x", "y">>);
// rhs sharded over the axis lhs is partial over: the planner refuses (a compile error in ts::matmul).
static_assert(ts::detail::plan_matmul<mesh_2x2, 2>(
                  ts::detail::spec_array_of<ts::spec<none, none>, 2>(),
                  ts::detail::spec_array_of<ts::spec<none, "x">, 2>(), false, {},
                  ts::detail::einsum_shapes<2>{{4, 4}, {4, 4}, 4},
                  ts::detail::unreduced_list<ts::unreduced<"x">>(), {})
                  .problem == ts::detail::einsum_problem::unreduced_conflict);

// ---- dynamic extents: the documented rule (all extents taken equal) ---------------------
using dyn_plan = ts::matmul_plan<mesh_2x2, ts::spec<none, "x">, ts::spec<none, none>>;
static_assert(!dyn_plan::extents_static && dyn_plan::bytes_per_device == 0);
static_assert(dyn_plan::bytes_moved({4, 4}, {4, 4}) == 4 * 2 * sizeof(float));
static_assert(std::is_same_v<dyn_plan, ts::matmul_plan<mesh_2x2, ts::spec<none, "x">, ts::spec<none, none>,
                                                       ts::auto_out, ts::dextents<2>>>);
static_assert(ts::matmul_plan<mesh_2x2, ts::spec<none, "x">, ts::spec<none, none>, ts::auto_out,
                              ts::extents<4, 4>, ts::extents<4, 4>, double>::bytes_per_device ==
              4 * 2 * sizeof(double));

}  // namespace
