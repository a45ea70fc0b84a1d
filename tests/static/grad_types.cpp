// grad_types: the types ts::value_and_grad gives gradients (rule 9), checked with
// static_assert only (nothing runs): a parameter's gradient has its mesh, extents and spec;
// it is unreduced over the axes its uses contract or sum a sharded batch over (data
// parallelism: unreduced<"data">; Megatron's W1 and W2 alike), minus the axes the parameter
// itself shards over (FSDP: reduce-scattered into its layout, fully reduced); a parameter used
// twice is unreduced over the union of its uses' axes, in mesh order.
#include <typeshard/typeshard.hpp>

#include <type_traits>
#include <utility>

namespace {

namespace ts = typeshard;
using ts::none;

using mesh = ts::mesh<ts::axis("data", 4), ts::axis("model", 2)>;
template <class Spec>
using matrix = ts::sharded_array<float, mesh, Spec, ts::dextents<2>>;

// The type ts::grad<Argnums...>(f)(a...) returns.
template <class Argnums, class F, class... A>
struct grad_type;
template <std::size_t... N, class F, class... A>
struct grad_type<std::index_sequence<N...>, F, A...> {
  using type = decltype(ts::grad<N...>(std::declval<F>())(std::declval<const A&>()...));
};
template <class Argnums, class F, class... A>
using grad_t = typename grad_type<Argnums, F, A...>::type;

template <class G, class Spec, class U>
constexpr bool typed = std::is_same_v<typename G::spec, Spec> &&
                       std::is_same_v<typename G::unreduced_type, U> &&
                       std::is_same_v<typename G::mesh_type, mesh>;

// ---- data parallelism: X over "data", W replicated ---------------------------------------
constexpr auto linear_loss = [](auto w, auto x) { return ts::mean(ts::tanh(ts::matmul(x, w))); };
using X = matrix<ts::spec<"data", none>>;
using W = matrix<ts::spec<none, none>>;
static_assert(typed<grad_t<std::index_sequence<0>, decltype(linear_loss), W, X>, ts::spec<none, none>,
                    ts::unreduced<"data">>);

// ---- Megatron: W1's columns and W2's rows over "model" ------------------------------------
constexpr auto mlp_loss = [](auto w1, auto w2, auto x) {
  auto h = ts::tanh(ts::matmul(x, w1));
  return ts::mean(ts::reshard<ts::spec<"data", none>>(ts::matmul(h, w2)));
};
using W1 = matrix<ts::spec<none, "model">>;
using W2 = matrix<ts::spec<"model", none>>;
using mlp_grads = grad_t<std::index_sequence<0, 1>, decltype(mlp_loss), W1, W2, X>;
static_assert(typed<std::tuple_element_t<0, mlp_grads>, ts::spec<none, "model">,
                    ts::unreduced<"data">>);
static_assert(typed<std::tuple_element_t<1, mlp_grads>, ts::spec<"model", none>,
                    ts::unreduced<"data">>);

// ---- FSDP: the parameter's rows over "data" (all-gathered forward): its gradient is
// reduce-scattered back into that layout, fully reduced --------------------------------------
using W_fsdp = matrix<ts::spec<"data", none>>;
static_assert(typed<grad_t<std::index_sequence<0>, decltype(linear_loss), W_fsdp, X>, ts::spec<"data", none>,
                    ts::unreduced<>>);

// ---- two uses, two axes: the union, in mesh order ----------------------------------------
constexpr auto two_uses = [](auto w, auto x, auto z) {
  return ts::reshard<ts::spec<>>(ts::mean(ts::matmul(z, w))) +
         ts::reshard<ts::spec<>>(ts::mean(ts::matmul(x, w)));
};
using Z = matrix<ts::spec<"model", none>>;
static_assert(typed<grad_t<std::index_sequence<0>, decltype(two_uses), W, X, Z>, ts::spec<none, none>,
                    ts::unreduced<"data", "model">>);

// ---- a non-differentiated argument's sharding does not matter to the others ---------------
static_assert(typed<grad_t<std::index_sequence<0>, decltype(linear_loss), W, matrix<ts::spec<>>>,
                    ts::spec<none, none>, ts::unreduced<>>);

// ---- the transposed equations ------------------------------------------------------------
static_assert(ts::einsum_lhs_transpose<"bsd,df->bsf"> == ts::einsum_subscripts("bsf,df->bsd"));
static_assert(ts::einsum_rhs_transpose<"bsd,df->bsf"> == ts::einsum_subscripts("bsf,bsd->df"));
static_assert(ts::einsum_lhs_transpose<"i,i->"> == ts::einsum_subscripts(",i->i"));

}  // namespace
