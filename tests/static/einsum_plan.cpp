// einsum_plan: DESIGN rule 2 per letter, checked with static_assert only.
//
// The transformer's products ("bsd,df->bsf", "bhqd,bhkd->bhqk"), each case of the rule
// (contracting letter sharded alike: unreduced; in one operand: gathered; over different
// axes: the cheaper gathered), named output specs (reduce-scatter where cheaper than
// all-reduce plus slice), summed letters, an empty output, a batch letter sharded in one
// operand only (kept, no communication), the matmul special case agreeing with matmul_plan,
// and einsum_valid / matmul_valid answering without a diagnostic.
#include <typeshard/plan/einsum_plan.hpp>
#include <typeshard/plan/matmul_plan.hpp>

#include <type_traits>

namespace {

namespace ts = typeshard;
using ts::none;
using kind = ts::step_kind;
using op = ts::step_operand;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_dm = ts::mesh<ts::axis("data", 2), ts::axis("model", 4)>;

template <class Plan, class Out, class Unreduced = ts::unreduced<>>
constexpr bool gives = Plan::valid && std::is_same_v<typename Plan::out_spec, Out> &&
                       std::is_same_v<typename Plan::out_unreduced, Unreduced>;

// ---- a transformer's products ----------------------------------------------------------
// [B, S, D] x [D, F] with the batch over data and F over model (Megatron's first layer):
// no communication, the result [B_data, S, F_model].
using mlp1 = ts::einsum_plan<"bsd,df->bsf", mesh_dm, ts::spec<"data", none, none>,
                             ts::spec<none, "model">>;
static_assert(gives<mlp1, ts::spec<"data", none, "model">>);
static_assert(ts::communication_free<mlp1>);
static_assert(mlp1::steps.size() == 1 && mlp1::steps[0].kind == kind::local_gemm);
// The second layer, D over model in both: local products, unreduced over model...
using mlp2 = ts::einsum_plan<"bsf,fd->bsd", mesh_dm, ts::spec<"data", none, "model">,
                             ts::spec<"model", none>>;
static_assert(gives<mlp2, ts::spec<"data", none, none>, ts::unreduced<"model">>);
static_assert(ts::communication_free<mlp2>);
// ... or reduced as named: psum for a replicated output.
using mlp2r = ts::einsum_plan<"bsf,fd->bsd", mesh_dm, ts::spec<"data", none, "model">,
                              ts::spec<"model", none>, ts::spec<"data", none, none>,
                              ts::extents<8, 16, 32>, ts::extents<32, 16>>;
static_assert(gives<mlp2r, ts::spec<"data", none, none>>);
static_assert(mlp2r::steps.size() == 2 && mlp2r::steps[1].kind == kind::psum &&
              mlp2r::steps[1].operand == op::out);
// Sequence-parallel output (S over model): a reduce-scatter, cheaper than psum + slice.
using mlp2s = ts::einsum_plan<"bsf,fd->bsd", mesh_dm, ts::spec<"data", none, "model">,
                              ts::spec<"model", none>, ts::spec<"data", "model", none>,
                              ts::extents<8, 16, 32>, ts::extents<32, 16>>;
static_assert(gives<mlp2s, ts::spec<"data", "model", none>>);
static_assert(mlp2s::steps.size() == 2 && mlp2s::steps[1].kind == kind::psum_scatter &&
              mlp2s::steps[1].dim == 1);
static_assert(mlp2s::bytes_per_device < mlp2r::bytes_per_device);

// Attention scores, batch and heads sharded alike: no communication.
using scores = ts::einsum_plan<"bhqd,bhkd->bhqk", mesh_2x2, ts::spec<"x", "y", none, none>,
                               ts::spec<"x", "y", none, none>>;
static_assert(gives<scores, ts::spec<"x", "y", none, none>>);
static_assert(ts::communication_free<scores>);

// ---- the cases of rule 2, per letter ----------------------------------------------------
// A contracting letter sharded in one operand only: that operand is gathered along it.
using one_side = ts::einsum_plan<"bsd,df->bsf", mesh_2x2, ts::spec<none, none, "x">,
                                 ts::spec<none, none>>;
static_assert(gives<one_side, ts::spec<none, none, none>>);
static_assert(one_side::steps[0].kind == kind::all_gather && one_side::steps[0].operand == op::lhs &&
              one_side::steps[0].dim == 2);
// Over different axes: one is gathered and reads the other's blocks; unreduced over those.
using different = ts::einsum_plan<"ij,jk->ik", mesh_2x2, ts::spec<none, "x">, ts::spec<"y", none>,
                                  ts::auto_out, ts::extents<4, 8>, ts::extents<8, 4>>;
static_assert(different::valid && different::collectives == 1);
static_assert(different::steps[1].kind == kind::slice);
// Two output letters on one axis without an output spec is an error (the unit test
// einsum_api checks einsum_valid says so without firing it); naming the output spec picks
// one all_gather, of the operand whose letter loses the axis.
using clash = ts::einsum_plan<"bsd,df->bsf", mesh_dm, ts::spec<none, "model", none>,
                              ts::spec<none, "model">, ts::spec<none, "model", none>,
                              ts::extents<2, 8, 8>, ts::extents<8, 8>>;
static_assert(gives<clash, ts::spec<none, "model", none>> && clash::collectives == 1 &&
              clash::steps[0].kind == kind::all_gather && clash::steps[0].operand == op::rhs);

// A summed letter (lhs only, not in the output) sharded: summed locally, unreduced over x.
using summed = ts::einsum_plan<"ij,jk->k", mesh_2x2, ts::spec<"x", none>, ts::spec<none, "y">>;
static_assert(gives<summed, ts::spec<"y">, ts::unreduced<"x">>);
static_assert(ts::communication_free<summed>);
// An empty output ("i,i->", a dot product): a rank-0 result (the plan rank is 1).
using dot = ts::einsum_plan<"i,i->", mesh_2x2, ts::spec<"x">, ts::spec<"x">>;
static_assert(dot::result_rank == 0 && dot::rank == 1 &&
              gives<dot, ts::spec<>, ts::unreduced<"x">>);
using dot_r = ts::einsum_plan<"i,i->", mesh_2x2, ts::spec<"x">, ts::spec<"x">, ts::spec<>>;
static_assert(gives<dot_r, ts::spec<>> && dot_r::collectives == 1);
// A rank-0 operand (",i->i", a scaling): the other's sharding kept, no communication.
using scale = ts::einsum_plan<",i->i", mesh_2x2, ts::spec<>, ts::spec<"y">>;
static_assert(scale::lhs_rank == 0 && gives<scale, ts::spec<"y">> &&
              ts::communication_free<scale>);
// Outer product: free letters on different axes.
static_assert(gives<ts::einsum_plan<"i,j->ij", mesh_2x2, ts::spec<"x">, ts::spec<"y">>,
                    ts::spec<"x", "y">>);

// ---- a batch letter sharded in one operand only -----------------------------------------
// It keeps its sharding: the operand holding it whole reads its block (a local slice, no
// communication), as broadcasting does (rule 5; JAX takes lhs's entry and gathers).
using batch_one = ts::einsum_plan<"bij,bjk->bik", mesh_2x2, ts::spec<none, none, none>,
                                  ts::spec<"x", none, none>>;
static_assert(gives<batch_one, ts::spec<"x", none, none>> && ts::communication_free<batch_one>);
static_assert(batch_one::steps.size() == 2 && batch_one::steps[0].kind == kind::slice &&
              batch_one::steps[0].operand == op::lhs && batch_one::steps[0].dim == 0 &&
              batch_one::steps[1].kind == kind::local_gemm);
using batch_one_mm =
    ts::matmul_plan<mesh_2x2, ts::spec<none, none, none>, ts::spec<"x", none, none>>;
static_assert(gives<batch_one_mm, ts::spec<"x", none, none>> &&
              ts::communication_free<batch_one_mm>);
// lhs sharded, rhs whole, J over y in both: still no communication, unreduced over y.
using batch_lhs = ts::matmul_plan<mesh_2x2, ts::spec<"x", none, "y">, ts::spec<none, "y", none>>;
static_assert(gives<batch_lhs, ts::spec<"x", none, none>, ts::unreduced<"y">> &&
              ts::communication_free<batch_lhs>);
// Attention scores with the heads sharded in q only, and a batch letter of rank-2 operands.
static_assert(gives<ts::einsum_plan<"bhqd,bhkd->bhqk", mesh_dm, ts::spec<"data", "model">,
                                    ts::spec<"data">>,
                    ts::spec<"data", "model", none, none>>);
static_assert(gives<ts::einsum_plan<"bi,bk->bik", mesh_2x2, ts::spec<none, "y">, ts::spec<"x">>,
                    ts::spec<"x", "y", none>>);
// The whole operand's contracted letter on the axis it takes is gathered first (one
// all_gather), then the rules apply.
using batch_gather = ts::einsum_plan<"bij,bjk->bik", mesh_2x2, ts::spec<none, none, "x">,
                                     ts::spec<"x", none, none>>;
static_assert(gives<batch_gather, ts::spec<"x", none, none>> && batch_gather::collectives == 1 &&
              batch_gather::steps[0].kind == kind::all_gather && batch_gather::steps[0].dim == 2);
// Its free letter on that axis: two output letters on one axis, valid only with an output
// spec; a batch letter over different axes in the two: likewise for einsum, never for matmul.
template <class Spec>
struct operand {
  using mesh_type = mesh_2x2;
  using value_type = float;
  using spec = Spec;
  using extents_type = ts::extents<4, 4, 4>;
  using unreduced_type = ts::unreduced<>;
};
using whole = operand<ts::spec<none, none, none>>;
using b_x = operand<ts::spec<"x", none, none>>;
using b_y = operand<ts::spec<"y", none, none>>;
using i_x = operand<ts::spec<none, "x", none>>;
using out_x = ts::spec<"x", none, none>;
static_assert(ts::einsum_valid<"bij,bjk->bik", whole, b_x> && ts::matmul_valid<whole, b_x>);
static_assert(ts::einsum_valid<"bij,bjk->bik", b_x, whole> && ts::matmul_valid<b_x, whole>);
static_assert(!ts::einsum_valid<"bij,bjk->bik", i_x, b_x> && !ts::matmul_valid<i_x, b_x>);
static_assert(ts::einsum_valid<"bij,bjk->bik", i_x, b_x, out_x> &&
              ts::matmul_valid<i_x, b_x, out_x>);
static_assert(!ts::einsum_valid<"bij,bjk->bik", b_y, b_x> && !ts::matmul_valid<b_y, b_x>);
static_assert(ts::einsum_valid<"bij,bjk->bik", b_y, b_x, out_x> &&
              !ts::matmul_valid<b_y, b_x, out_x>);

// Step by step: each whole operand is sliced (a `slice` step over the sharded side's axes
// along its batch dimension), then the local product; no step communicates.
template <class Plan>
constexpr bool slices_then_product(std::size_t slices) {
  if (Plan::steps.size() != slices + 1 || Plan::collectives != 0) return false;
  for (std::size_t s = 0; s < slices; ++s)
    if (Plan::steps[s].kind != kind::slice || Plan::steps[s].communicates()) return false;
  return Plan::steps[slices].kind == kind::local_gemm;
}
template <class Plan>
constexpr bool slices(std::size_t s, op operand, std::size_t dim, ts::detail::axis_name axis) {
  return Plan::steps[s].operand == operand && Plan::steps[s].dim == dim &&
         Plan::steps[s].axes.count == 1 && Plan::steps[s].axes.axes[0] == axis;
}
using mesh_4 = ts::mesh<ts::axis("x", 4)>;
// The rhs whole: it is the one sliced.
using batch_rhs = ts::einsum_plan<"bij,bjk->bik", mesh_4, ts::spec<"x">, ts::spec<>>;
static_assert(gives<batch_rhs, ts::spec<"x", none, none>>);
static_assert(slices_then_product<batch_rhs>(1) && slices<batch_rhs>(0, op::rhs, 0, "x"));
// matmul: the same steps.
using batch_mm = ts::matmul_plan<mesh_4, ts::spec<>, ts::spec<"x", none, none>>;
static_assert(slices_then_product<batch_mm>(1) && slices<batch_mm>(0, op::lhs, 0, "x"));
// Rank 4, each operand shards one batch dimension: both sliced, the result sharded by both.
using batch_both = ts::matmul_plan<mesh_2x2, ts::spec<"x", none, none, none>,
                                   ts::spec<none, "y", none, none>>;
static_assert(gives<batch_both, ts::spec<"x", "y", none, none>>);
static_assert(slices_then_product<batch_both>(2));
static_assert((slices<batch_both>(0, op::lhs, 1, "y") && slices<batch_both>(1, op::rhs, 0, "x")) ||
              (slices<batch_both>(0, op::rhs, 0, "x") && slices<batch_both>(1, op::lhs, 1, "y")));
// Outer products of rank-2 operands on a 1-d mesh, and a batch letter over two axes.
using outer = ts::einsum_plan<"bi,bk->bik", mesh_4, ts::spec<>, ts::spec<"x">>;
static_assert(gives<outer, ts::spec<"x", none, none>> && slices_then_product<outer>(1) &&
              slices<outer>(0, op::lhs, 0, "x"));
using two_axes = ts::einsum_plan<"bij,bjk->bik", mesh_2x2, ts::spec<ts::axes("x", "y")>,
                                 ts::spec<>>;
static_assert(gives<two_axes, ts::spec<ts::axes("x", "y"), none, none>> &&
              slices_then_product<two_axes>(1) && two_axes::steps[0].operand == op::rhs &&
              two_axes::steps[0].axes.count == 2);
// With the output spec named (chosen by cost), the slice is still the cheapest plan.
using batch_named = ts::einsum_plan<"bij,bjk->bik", mesh_2x2, ts::spec<>, ts::spec<"x">,
                                    ts::spec<"x", none, none>>;
static_assert(gives<batch_named, ts::spec<"x", none, none>> &&
              slices_then_product<batch_named>(1));

// ---- the matmul special case: the plans matmul_plan makes ------------------------------
template <class E, class M>
constexpr bool same_plan = std::is_same_v<typename E::out_spec, typename M::out_spec> &&
                           std::is_same_v<typename E::out_unreduced, typename M::out_unreduced> &&
                           E::steps.size() == M::steps.size() &&
                           E::bytes_per_device == M::bytes_per_device;
using e4 = ts::extents<4, 4>;
static_assert(same_plan<ts::einsum_plan<"ij,jk->ik", mesh_2x2, ts::spec<none, "x">, ts::spec<"x", none>,
                                        ts::spec<"x", none>, e4, e4>,
                        ts::matmul_plan<mesh_2x2, ts::spec<none, "x">, ts::spec<"x", none>,
                                        ts::spec<"x", none>, e4>>);
static_assert(same_plan<ts::einsum_plan<"ij,jk->ik", mesh_2x2, ts::spec<"x", "y">, ts::spec<"y", none>,
                                        ts::auto_out, e4, e4>,
                        ts::matmul_plan<mesh_2x2, ts::spec<"x", "y">, ts::spec<"y", none>,
                                        ts::auto_out, e4>>);
static_assert(same_plan<ts::einsum_plan<"ij,jk->ik", mesh_dm, ts::spec<"model", none>,
                                        ts::spec<none, "model">, ts::spec<"model", none>, e4, e4>,
                        ts::matmul_plan<mesh_dm, ts::spec<"model", none>, ts::spec<none, "model">,
                                        ts::spec<"model", none>, e4>>);

}  // namespace
