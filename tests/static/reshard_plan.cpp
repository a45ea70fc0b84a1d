// Compile-time properties of reshard plans: which steps a plan takes, in which order, with
// what sharding after each, whether it communicates, and how evenness picks the variant.
#include <typeshard/plan/reshard_plan.hpp>

namespace ts = typeshard;

namespace {

using m1 = ts::mesh<ts::axis("i", 4)>;
using m22 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using m42 = ts::mesh<ts::axis("x", 4), ts::axis("y", 2)>;
using none_t = ts::none_t;
using K = ts::step_kind;
using E2 = ts::extents<8, 8>;
using D2 = ts::dextents<2>;

template <class Mesh, class From, class To, class E = E2, class U = ts::unreduced<>>
using plan = ts::reshard_plan<Mesh, From, To, E, U>;

template <class P, K... Kinds>
constexpr bool kinds_are() {
  constexpr K want[] = {Kinds...};
  if (P::steps.size() != sizeof...(Kinds)) return false;
  for (std::size_t i = 0; i < sizeof...(Kinds); ++i)
    if (P::steps[i].kind != want[i]) return false;
  return true;
}

// Nothing to do: the same sharding, spelled with or without trailing nones.
static_assert(plan<m22, ts::spec<"x">, ts::spec<"x", ts::none>>::steps.size() == 0);
static_assert(ts::communication_free<plan<m22, ts::spec<"x", "y">, ts::spec<"x", "y">>>);

// Replicated to sharded: one local slice, whatever the target.
static_assert(kinds_are<plan<m22, ts::spec<>, ts::spec<"y", "x">>, K::slice>());
static_assert(ts::communication_free<plan<m22, ts::spec<>, ts::spec<ts::axes("x", "y")>, D2>>);
// Adding a minor axis to a dimension is a slice too (blocks nest when even)...
static_assert(kinds_are<plan<m22, ts::spec<"x">, ts::spec<ts::axes("x", "y")>>, K::slice>());
static_assert(ts::communication_free<plan<m22, ts::spec<"x">, ts::spec<ts::axes("x", "y")>>>);
// ...but not when the extents are uneven: then the dimension is gathered first.
using uneven_nest = plan<m22, ts::spec<"x">, ts::spec<ts::axes("x", "y")>, ts::extents<5, 3>>;
static_assert(uneven_nest::evenness == ts::shard_evenness::uneven);
static_assert(kinds_are<uneven_nest, K::all_gather, K::slice>());
static_assert(!ts::communication_free<uneven_nest>);
// With dynamic extents both variants exist and either may run.
using dynamic_nest = plan<m22, ts::spec<"x">, ts::spec<ts::axes("x", "y")>, D2>;
static_assert(dynamic_nest::evenness == ts::shard_evenness::decided_at_run_time);
static_assert(dynamic_nest::even_steps.size() == 1 && dynamic_nest::uneven_steps.size() == 2);
static_assert(!ts::communication_free<dynamic_nest>);

// Dropping axes: one all_gather per dimension, several axes of a dimension in one.
using drop = plan<m22, ts::spec<ts::axes("x", "y"), ts::none>, ts::spec<>>;
static_assert(kinds_are<drop, K::all_gather>());
static_assert(drop::steps[0].axes == ts::axes("x", "y") && drop::steps[0].dim == 0);
// Only the minor axis: the major one stays.
using drop_minor = plan<m22, ts::spec<ts::axes("x", "y")>, ts::spec<"x">>;
static_assert(kinds_are<drop_minor, K::all_gather>());
static_assert(drop_minor::steps[0].axes == ts::dim_spec("y"));
// The major axis cannot be gathered alone: gather both, then slice the minor one back.
using drop_major = plan<m22, ts::spec<ts::axes("x", "y")>, ts::spec<"y">>;
static_assert(kinds_are<drop_major, K::all_gather, K::slice>());

// An axis moving between dimensions: one all_to_all, split where it joins.
using move = plan<m1, ts::spec<"i", ts::none>, ts::spec<ts::none, "i">>;
static_assert(kinds_are<move, K::all_to_all>());
static_assert(move::steps[0].dim == 0 && move::steps[0].to_dim == 1);
static_assert(move::count<K::all_to_all> == 1 && move::count<K::all_gather> == 0);
// Swapping two axes: gather one, move the other, slice the first back in.
using swap = plan<m42, ts::spec<"x", "y">, ts::spec<"y", "x">>;
static_assert(kinds_are<swap, K::all_gather, K::all_to_all, K::slice>());
// Moving one of two axes, keeping the other in place.
using partial_move = plan<m22, ts::spec<ts::axes("x", "y"), ts::none>, ts::spec<"x", "y">>;
static_assert(kinds_are<partial_move, K::all_to_all>());
static_assert(partial_move::steps[0].axes == ts::dim_spec("y"));
// Uneven: no all_to_all, gather and slice instead.
using uneven_move = plan<m1, ts::spec<"i", ts::none>, ts::spec<ts::none, "i">, ts::extents<6, 6>>;
static_assert(kinds_are<uneven_move, K::all_gather, K::slice>());

// Reductions: psum_scatter where the target shards over the axis, psum elsewhere, both
// before any movement.
using U_x = ts::unreduced<"x">;
static_assert(kinds_are<plan<m22, ts::spec<>, ts::spec<>, E2, U_x>, K::all_reduce>());
static_assert(kinds_are<plan<m22, ts::spec<>, ts::spec<ts::none, "x">, E2, U_x>, K::reduce_scatter>());
static_assert(kinds_are<plan<m22, ts::spec<"y">, ts::spec<ts::axes("y", "x")>, E2, U_x>,
                        K::reduce_scatter>());
static_assert(kinds_are<plan<m22, ts::spec<"y">, ts::spec<ts::none, "y">, E2, U_x>, K::all_reduce,
                        K::all_to_all>());
using both = plan<m22, ts::spec<>, ts::spec<"y", "x">, E2, ts::unreduced<"x", "y">>;
static_assert(kinds_are<both, K::reduce_scatter, K::reduce_scatter>());
static_assert(both::steps[0].unreduced_after == ts::dim_spec("x"));
static_assert(both::steps[1].unreduced_after == ts::dim_spec{});
static_assert(!ts::communication_free<both>);

// The sharding after each step is the next step's input, and the last is the target.
static_assert(swap::steps[2].spec_after[0] == ts::dim_spec("y") &&
              swap::steps[2].spec_after[1] == ts::dim_spec("x"));
static_assert(swap::steps[0].spec_after[0] == ts::dim_spec{} &&
              swap::steps[0].spec_after[1] == ts::dim_spec("y"));

// communication_free works on any type with a `communicates` member, and rejects others.
struct talks {
  static constexpr bool communicates = true;
};
struct quiet {
  static constexpr bool communicates = false;
};
static_assert(!ts::communication_free<talks> && ts::communication_free<quiet>);
static_assert(!ts::communication_free<int>);

}  // namespace
