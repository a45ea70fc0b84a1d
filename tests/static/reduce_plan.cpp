// reduce_plan: the plans of DESIGN rule 7, checked with static_assert only: which steps run,
// the result's spec, unreduced axes and extents, keep_dims, named output specs, negative
// dimension numbers, and ts::communication_free.
#include <typeshard/plan/reduce_plan.hpp>

#include <type_traits>

namespace {

namespace ts = typeshard;
using ts::none;
using ts::reduction;
using kind = ts::step_kind;

using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using mesh_2x4 = ts::mesh<ts::axis("x", 2), ts::axis("y", 4)>;

template <reduction Op, class Spec, class Extents, class OutSpec, bool Keep, int... Dims>
using plan = ts::reduce_plan<Op, mesh_2x2, Spec, Extents, float, ts::unreduced<>, OutSpec, Keep,
                             Dims...>;
template <reduction Op, class Spec, int... Dims>
using plan2 = plan<Op, Spec, ts::dextents<2>, struct ts::auto_out, false, Dims...>;

template <class Plan, class Out, class Unreduced = ts::unreduced<>>
constexpr bool gives = std::is_same_v<typename Plan::out_spec, Out> &&
                       std::is_same_v<typename Plan::out_unreduced, Unreduced>;

// ---- sum over a sharded dimension: unreduced over its axes, no communication ------------
using sum_cols = plan2<reduction::sum, ts::spec<"x", "y">, 1>;
static_assert(sum_cols::valid);
static_assert(gives<sum_cols, ts::spec<"x">, ts::unreduced<"y">>);
static_assert(ts::communication_free<sum_cols>);
static_assert(sum_cols::steps.size() == 1 && sum_cols::steps[0].kind == kind::local_reduce);
static_assert(std::is_same_v<sum_cols::out_extents, ts::dextents<1>>);

// Over an unsharded dimension: nothing partial.
static_assert(gives<plan2<reduction::sum, ts::spec<"x", none>, 1>, ts::spec<"x">>);
// Every dimension, multi-axis: unreduced over both, a rank-0 array (JAX's scalar).
using sum_all = plan2<reduction::sum, ts::spec<ts::axes("y", "x"), none>>;
static_assert(gives<sum_all, ts::spec<>, ts::unreduced<"y", "x">>);
static_assert(std::is_same_v<sum_all::out_extents, ts::extents<>> && sum_all::out_rank == 0);
// mean has the type of sum (the partial sums are scaled by 1 / the global count).
static_assert(gives<plan2<reduction::mean, ts::spec<"x", "y">, 0>, ts::spec<"y">, ts::unreduced<"x">>);

// ---- max and min: all-reduce over the partial axes -------------------------------------
using max_cols = plan2<reduction::max, ts::spec<"x", "y">, -1>;  // -1: the last dimension
static_assert(gives<max_cols, ts::spec<"x">>);
static_assert(!ts::communication_free<max_cols>);
static_assert(max_cols::steps.size() == 2 && max_cols::steps[1].kind == kind::pmax);
static_assert(max_cols::steps[1].axes == ts::dim_spec("y"));
static_assert(max_cols::collectives == 1);
using min_rows = plan2<reduction::min, ts::spec<ts::axes("x", "y"), none>, 0>;
static_assert(min_rows::steps[1].kind == kind::pmin && min_rows::steps[1].axes == ts::axes("x", "y"));
static_assert(ts::communication_free<plan2<reduction::max, ts::spec<none, "y">, 0>>);

// ---- keep_dims: the reduced dimensions stay, extent 1, spec none --------------------------
using keep = plan<reduction::sum, ts::spec<"x", "y">, ts::extents<8, 6>, struct ts::auto_out, true, 1>;
static_assert(gives<keep, ts::spec<"x", none>, ts::unreduced<"y">>);
static_assert(std::is_same_v<keep::out_extents, ts::extents<8, 1>>);
using drop = plan<reduction::max, ts::spec<"x", "y">, ts::extents<8, 6>, struct ts::auto_out, false, 0>;
static_assert(std::is_same_v<drop::out_extents, ts::extents<6>>);

// ---- a named output spec: the reshard follows (psum, or psum_scatter where it shards) -----
using named = plan<reduction::sum, ts::spec<"x", "y">, ts::extents<8, 8>, ts::spec<"x">, false, 1>;
static_assert(gives<named, ts::spec<"x">>);
static_assert(named::steps.size() == 2 && named::steps[1].kind == kind::psum);
using scatter = plan<reduction::sum, ts::spec<"x", "y">, ts::extents<8, 8>, ts::spec<ts::axes("x", "y")>,
                     false, 1>;
static_assert(gives<scatter, ts::spec<ts::axes("x", "y")>>);
static_assert(scatter::steps[1].kind == kind::psum_scatter);
using max_named = plan<reduction::max, ts::spec<"x", "y">, ts::extents<8, 8>, ts::spec<none>, false, 1>;
static_assert(max_named::collectives == 2 && max_named::steps[2].kind == kind::all_gather);

// ---- unreduced inputs: sum stays unreduced (linear), over both sets of axes ---------------
using partial_in = ts::reduce_plan<reduction::sum, mesh_2x4, ts::spec<none, "y">, ts::dextents<2>,
                                   double, ts::unreduced<"x">, struct ts::auto_out, false, 1>;
static_assert(gives<partial_in, ts::spec<none>, ts::unreduced<"x", "y">>);


}  // namespace

// ---- softmax: the row statistics' collectives ------------------------------------------
#include <typeshard/plan/softmax_plan.hpp>

namespace {

using sm = ts::softmax_plan<mesh_2x2, ts::spec<"x", "y">, ts::dextents<2>, float, ts::unreduced<>,
                            false, -1>;
static_assert(sm::valid && sm::dim == 1);
static_assert(sm::steps.size() == 5 && sm::steps[1].kind == kind::pmax &&
              sm::steps[3].kind == kind::psum && sm::steps[4].kind == kind::local_elementwise);
static_assert(sm::steps[1].axes == ts::dim_spec("y"));
static_assert(std::is_same_v<sm::out_spec, ts::spec<"x", "y">>);
static_assert(std::is_same_v<sm::stats_spec, ts::spec<"x", none>>);
static_assert(sm::collectives == 2 && !ts::communication_free<sm>);
// Along an unsharded dimension: local only.
using sm_rows = ts::softmax_plan<mesh_2x2, ts::spec<"x", none>, ts::dextents<2>, double,
                                 ts::unreduced<>, true, 1>;
static_assert(ts::communication_free<sm_rows> && sm_rows::steps.size() == 3);

}  // namespace

// ---- costs, static extents ------------------------------------------------------------
namespace {
// max over the columns of an 8 x 8 float array on P('x', 'y'): blocks of 4 x 4 (16 local
// operations); the pmax over y (2 devices) moves 2 * 1/2 of the 4 x 1 result block.
using max_cost = plan<reduction::max, ts::spec<"x", "y">, ts::extents<8, 8>, struct ts::auto_out,
                      false, 1>;
static_assert(max_cost::flops_per_device == 16);
static_assert(max_cost::bytes_per_device == 4 * sizeof(float));
static_assert(plan<reduction::sum, ts::spec<"x", "y">, ts::extents<8, 8>, struct ts::auto_out,
                   false, 1>::bytes_per_device == 0);
static_assert(sum_cols::bytes_per_device == 0 && sum_cols::flops_per_device == 0);  // dynamic
}  // namespace
