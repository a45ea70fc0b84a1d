// plan_like: every plan type models ts::plan_like (plan/plan_like.hpp): its steps as values,
// describe(), collectives, communicates and the data it moves; and the local steps carry
// their kernel as values (plan/step.hpp), what the one executor dispatches on.
#include <typeshard/typeshard.hpp>

#include <cstddef>

namespace {

namespace ts = typeshard;
using ts::none;
using kind = ts::step_kind;
using op = ts::local_op;
using operand = ts::step_operand;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using X = ts::sharded_array<float, mesh_2x2, ts::spec<"x", "y">, ts::extents<8, 16>>;
using D = ts::sharded_array<double, mesh_2x2, ts::spec<"x", none>, ts::dextents<2>>;
using B = ts::sharded_array<ts::bfloat16, mesh_2x2, ts::spec<none, "y">, ts::extents<4, 8>>;

// ---- every plan type models the concept ----------------------------------------------------
using reshard = ts::reshard_plan<mesh_2x2, ts::spec<"x", none>, ts::spec<none, "x">,
                                 ts::extents<8, 8>>;
using einsum = ts::einsum_plan_for<"ij,jk->ik", X, ts::sharded_array<float, mesh_2x2,
                                                                      ts::spec<"y", none>,
                                                                      ts::extents<16, 4>>>;
using matmul = ts::matmul_plan_for<X, ts::sharded_array<float, mesh_2x2, ts::spec<"y", none>,
                                                        ts::extents<16, 4>>>;
using max_rows = ts::reduce_plan_for<ts::reduction::max, X, 1>;
using sum_dyn = ts::reduce_plan_for<ts::reduction::sum, D, 0>;
using softmax = ts::softmax_plan_for<X, 1>;
using log_softmax = ts::softmax_plan_for<B, -1, true>;
using layer_norm = ts::layer_norm_plan_for<X, -1>;
using permute = ts::permute_plan<mesh_2x2, ts::spec<"x", "y">, ts::extents<8, 16>,
                                 ts::unreduced<>, 1, 0>;
using split = ts::split_dim_plan<mesh_2x2, ts::spec<"x", "y">, ts::extents<8, 16>,
                                 ts::unreduced<>, 1, 2>;
using merge = ts::merge_dims_plan<mesh_2x2, ts::spec<"x", none>, ts::extents<8, 16>,
                                  ts::unreduced<>, 0>;
static_assert(ts::plan_like<reshard> && ts::plan_like<einsum> && ts::plan_like<matmul>);
static_assert(ts::plan_like<max_rows> && ts::plan_like<sum_dyn>);
static_assert(ts::plan_like<softmax> && ts::plan_like<log_softmax> && ts::plan_like<layer_norm>);
static_assert(ts::plan_like<permute> && ts::plan_like<split> && ts::plan_like<merge>);
static_assert(ts::plan_like<ts::slice_in_dim_plan<X, 1, 2, 5>>);
static_assert(!ts::plan_like<int> && !ts::plan_like<X>);

// ---- the steps for given extents -----------------------------------------------------------
// A reshard: the even steps, or the uneven ones for extents its shardings do not divide.
static_assert(reshard::steps_for({8, 8}).size() == reshard::even_steps.size());
static_assert(reshard::steps_for({7, 8}).size() == reshard::uneven_steps.size() &&
              reshard::steps_for({7, 8})[0].kind != kind::all_to_all);
// A reduction (dynamic extents) picks by the extents it is given.
static_assert(sum_dyn::steps_for({8, 8}).size() == sum_dyn::even_steps.size() &&
              sum_dyn::steps_for({8, 8})[0].op == op::reduce);
// A contraction: the steps for both operands' extents, the product among them.
constexpr bool names_product(const auto& list) {
  for (const auto& s : list)
    if (s.kind == kind::local_gemm && s.op == op::contract) return true;
  return false;
}
static_assert(names_product(einsum::steps_for({8, 16}, {16, 4})));
static_assert(names_product(matmul::steps_for({8, 16}, {16, 4})));
static_assert(softmax::steps_for({8, 16}).size() == softmax::steps.size());
static_assert(layer_norm::steps_for({6, 2}).size() == layer_norm::steps.size());
static_assert(permute::steps_for(ts::shape<2>{8, 16}).empty());

// ---- the data moved ------------------------------------------------------------------------
// reshard: an all_to_all over x of a 4x8 block: half of it received (16 elements).
static_assert(reshard::communicates && reshard::collectives == 1);
static_assert(reshard::elements_per_device == 16);
static_assert(ts::bytes_per_device_of<reshard>(sizeof(double)) == 16 * sizeof(double));
// softmax along y (2 shards): a pmax and a psum of one float per row of the 4-row block,
// each 2 (n - 1) / n of it: 4 floats each.
static_assert(softmax::collectives == 2 && softmax::bytes_per_device == 2 * 4 * sizeof(float));
// layer_norm likewise (two psums); bfloat16 rows all-reduce float statistics.
static_assert(layer_norm::bytes_per_device == 2 * 4 * sizeof(float));
static_assert(log_softmax::bytes_per_device == 2 * 4 * sizeof(float));
static_assert(ts::bytes_per_device_of<max_rows>(99) == max_rows::bytes_per_device);
static_assert(!permute::communicates && ts::bytes_per_device_of<permute>(4) == 0);
static_assert(ts::bytes_per_device_of<sum_dyn>(8) == 0);  // dynamic extents

// ---- local steps carry their kernel --------------------------------------------------------
// A contraction's product names contraction 0, the plan's equation.
constexpr auto gemm_step = [] {
  for (const auto& s : einsum::steps)
    if (s.kind == kind::local_gemm) return s;
  return einsum::steps[0];
}();
static_assert(gemm_step.kind == kind::local_gemm && gemm_step.op == op::contract &&
              gemm_step.payload == 0);
// A reduction names its reduction and its dimensions.
static_assert(max_rows::steps[0].op == op::reduce &&
              max_rows::steps[0].reduce == ts::reduction::max && max_rows::steps[0].over[1] &&
              !max_rows::steps[0].over[0]);
static_assert(max_rows::steps[1].kind == kind::pmax && max_rows::steps[1].op == op::none);
static_assert(sum_dyn::steps[0].reduce == ts::reduction::sum && sum_dyn::steps[0].over[0]);
// softmax: row max, its pmax (slot 0), row exp-sum, its psum (slot 1), normalise.
static_assert(softmax::steps.size() == 5);
static_assert(softmax::steps[0].op == op::row_max && softmax::steps[0].operand == operand::stats);
static_assert(softmax::steps[1].kind == kind::pmax && softmax::steps[1].operand == operand::stats &&
              softmax::steps[1].payload == ts::stats_slot0);
static_assert(softmax::steps[2].op == op::row_exp_sum);
static_assert(softmax::steps[3].kind == kind::psum && softmax::steps[3].payload == ts::stats_slot1);
static_assert(softmax::steps[4].op == op::softmax_normalize &&
              softmax::steps[4].operand == operand::array);
static_assert(log_softmax::steps.back().op == op::log_softmax_normalize);
// layer_norm: row sum, psum, squared deviations, psum, normalise (eps: scalar 0); its
// backward: the two sums, one psum of both slots, dx.
static_assert(layer_norm::steps[0].op == op::row_sum && layer_norm::steps[2].op == op::row_sq_dev_sum);
static_assert(layer_norm::steps[4].op == op::layer_norm_normalize && layer_norm::steps[4].payload == 0);
static_assert(layer_norm::backward_steps.size() == 3 &&
              layer_norm::backward_steps[0].op == op::layer_norm_grad_sums &&
              layer_norm::backward_steps[1].payload == ts::stats_both &&
              layer_norm::backward_steps[2].op == op::layer_norm_grad);
// Unsharded along the dimension: no collective, the local steps only.
using layer_norm_local = ts::layer_norm_plan_for<D, 1>;
static_assert(!layer_norm_local::communicates && layer_norm_local::steps.size() == 3);
// Collectives and slices name no kernel.
static_assert(reshard::steps[0].op == op::none);

// ---- a slice: its window copy is a local step the executor runs -----------------------------
// Columns [2, 7) of X (columns over y): they cross y's shards, so gathered, copied, sliced.
using slice_cols = ts::slice_in_dim_plan<X, 1, 2, 5>;
static_assert(ts::plan_like<slice_cols> && slice_cols::valid);
static_assert(slice_cols::steps.size() == 3 && slice_cols::collectives == 1);
static_assert(slice_cols::steps[0].kind == kind::all_gather &&
              slice_cols::steps[0].operand == operand::array);
static_assert(slice_cols::steps[1].kind == kind::slice && slice_cols::steps[1].op == op::window &&
              slice_cols::steps[1].operand == operand::out && slice_cols::steps[1].payload == 0);
static_assert(slice_cols::steps[2].kind == kind::slice && slice_cols::steps[2].op == op::none &&
              slice_cols::steps[2].operand == operand::out);
// a 4x8 block, gathered over y's 2 devices: one other 4x8 block received
static_assert(slice_cols::bytes_per_device == 4 * 8 * sizeof(float));
// Rows [0, 8) of X (rows over x): each result shard is the operand's own, the window step
// alone.
static_assert(ts::slice_in_dim_plan<X, 0, 0, 8>::steps.size() == 1 &&
              !ts::slice_in_dim_plan<X, 0, 0, 8>::communicates);
static_assert(ts::slice_in_dim_plan<X, 0, 0, 8>::steps[0].op == op::window);
static_assert(!ts::slice_in_dim_plan<X, 0, 4, 8>::valid);  // past the extent
// Dynamic extents: the steps for the extents given.
using slice_dyn = ts::slice_in_dim_plan<D, 1, 1, 3>;
static_assert(ts::plan_like<slice_dyn> && slice_dyn::bytes_per_device == 0);
static_assert(slice_dyn::steps_for({6, 9}).count == 1);  // dimension 1 unsharded: local

}  // namespace
