// examples/support/transformer_model.hpp: the decoder-only language model of
// examples/transformer.cpp, written once in the global view and templated on the mesh, so
// that the example (a 2 x 4 or 2 x 2 mesh ("data", "model")) and its serial check
// (tests/unit/grad_transformer.cpp: the same code on a 1 x 1 mesh) run the same program.
//
// The model: token embedding (ts::take: the rows of E at the token ids) plus a learned
// position embedding; `blocks` pre-norm blocks of causal multi-head attention and a GELU
// (tanh form) MLP, each with a residual; a final LayerNorm, the projection to the vocabulary
// and the mean cross-entropy (log_softmax). LayerNorms have no learned scale or bias and no
// layer has a bias: fewer parameters, the same collectives. The parameters are one tree
// (model_params, a std::array of block_params: ops/tree.hpp), differentiated by one
// ts::value_and_grad(loss)(params, in) and updated by ZeRO-1 Adam over the tree.
//
// Mixed precision (Bf16 = true: loss_bf16, value_and_grads<true>; examples/transformer.cpp
// --bf16): the float parameters stay the master copy; every product casts its operands to
// ts::bfloat16 (ts::astype: the backward casts the cotangent back) and accumulates in float
// (ts::preferred_element<float>), and the attention probabilities are bf16 (ts::softmax on
// bf16: row statistics in float). LayerNorm, GELU, the residual stream and the cross-entropy
// stay float, as PyTorch's autocast keeps them. The gradients' reductions are float (the
// products' backward reshards in float); each parameter's bf16 copy is a cast leaf
// (ops/detail/traced_mixed.hpp), so its gradient arrives unreduced over "data", in float, for
// ZeRO's reduce-scatter, as in the float model: the same collectives per step.
//
// The shardings (Megatron tensor parallelism over "model", data parallelism over "data"):
//   activations X [B, S, D]           ("data", none, none): replicated over "model"
//   Wqkv [D, 3, H*dh]                  (none, none, "model"): Q, K and V fused in one product,
//                                      so the backward's dX is ONE partial sum over "model"
//                                      (three separate products would reduce three)
//   q, k, v [B, S, H, dh]              ("data", none, "model", none): ts::split<2, 3> of the
//                                      fused product along its unsharded "3" (local), then
//                                      split_dim: heads over "model"
//   scores, probabilities [B,H,S,S]    ("data", "model", none, none): local per head
//   Wo [H*dh, D]                       ("model", none): the product is a partial sum over
//                                      "model", resharded to X's spec: all-reduce 1
//   W1 [D, F]                          (none, "model"): local
//   W2 [F, D]                          ("model", none): a partial sum: all-reduce 2
//   E [V, D], P [S, D], Wout [D, V]    replicated: the lookup ts::take(E, ids) is local, its
//                                      gradient (a scatter-add) unreduced over "data"
// In the backward, the transposes: dX of the fused QKV product and of W1's product are the
// partial sums over "model" (one all-reduce each); every gradient is unreduced over "data"
// (the batch is summed), and the optimizer reduces it.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <typeshard/typeshard.hpp>

namespace examples::transformer {

namespace ts = typeshard;

struct config {
  std::size_t batch = 16;    // B
  std::size_t seq = 16;      // S
  std::size_t vocab = 16;    // V
  std::size_t d_model = 64;  // D
  std::size_t hidden = 256;  // F
};

inline constexpr std::size_t heads = 4;   // split_dim's part count is a template argument
inline constexpr std::size_t blocks = 2;

// The specs (see the top of this file).
using none = ts::none_t;
using X_spec = ts::spec<"data", ts::none, ts::none>;
using rep2 = ts::spec<ts::none, ts::none>;
using Wqkv_spec = ts::spec<ts::none, ts::none, "model">;
using Wo_spec = ts::spec<"model", ts::none>;
using W1_spec = ts::spec<ts::none, "model">;
using W2_spec = ts::spec<"model", ts::none>;

// An array of Rank with spec Spec on Mesh, as ts::device_put makes it (dynamic extents).
template <class Mesh, class Spec, std::size_t Rank>
using array_t = decltype(ts::device_put<Spec>(std::declval<const ts::device_mesh<Mesh>&>(),
                                              std::declval<const ts::host_tensor<float, Rank>&>()));

// ---- parameters on the host ---------------------------------------------------------------

// The host copies, in the parameter tree's order: E, P, (Wqkv, Wo, W1, W2) per block, Wout.
struct host_params {
  std::vector<ts::host_tensor<float, 2>> mats;  // every parameter but the Wqkv
  std::vector<ts::host_tensor<float, 3>> qkv;   // one per block
};

// ---- the data -----------------------------------------------------------------------------

// The synthetic task: predict the previous token (the first position predicts token 0).
// Inputs and targets one-hot [B, S, V]; ids, the inputs' token ids [B, S] (the embedding's).
struct host_batch {
  ts::host_tensor<float, 3> inputs, targets;
  ts::host_tensor<std::int32_t, 2> ids;
};

inline host_batch make_batch(const config& c, std::mt19937& rng) {
  std::uniform_int_distribution<std::size_t> token(0, c.vocab - 1);
  host_batch b{ts::host_tensor<float, 3>({c.batch, c.seq, c.vocab}),
               ts::host_tensor<float, 3>({c.batch, c.seq, c.vocab}),
               ts::host_tensor<std::int32_t, 2>({c.batch, c.seq})};
  for (std::size_t i = 0; i < c.batch; ++i) {
    std::size_t previous = 0;
    for (std::size_t s = 0; s < c.seq; ++s) {
      const std::size_t t = token(rng);
      b.inputs(i, s, t) = 1.0f;
      b.ids(i, s) = static_cast<std::int32_t>(t);
      b.targets(i, s, previous) = 1.0f;
      previous = t;
    }
  }
  return b;
}

// The batch (the token ids [B, S], the one-hot targets [B, S, V]) and the constant the loss
// reads besides it: the causal mask [S, S] (0 where the key is at or before the query, -1e9
// after: exp underflows to exactly 0, and -1e9 + a score stays finite, unlike -inf).
using ids_spec = ts::spec<"data", ts::none>;
template <class Mesh>
struct inputs {
  decltype(ts::device_put<ids_spec>(std::declval<const ts::device_mesh<Mesh>&>(),
                                    std::declval<const ts::host_tensor<std::int32_t, 2>&>())) ids;
  array_t<Mesh, X_spec, 3> targets;
  array_t<Mesh, rep2, 2> mask;
};

template <class Mesh>
inputs<Mesh> put_inputs(const ts::device_mesh<Mesh>& m, const config& c, const host_batch& b) {
  ts::host_tensor<float, 2> mask({c.seq, c.seq});
  for (std::size_t q = 0; q < c.seq; ++q)
    for (std::size_t k = q + 1; k < c.seq; ++k) mask(q, k) = -1e9f;
  return {ts::device_put<ids_spec>(m, b.ids), ts::device_put<X_spec>(m, b.targets),
          ts::device_put<rep2>(m, mask)};
}

// ---- parameters on the mesh -----------------------------------------------------------------

// The parameters, a tree (ops/tree.hpp: Hana struct templates over their members' types, so
// that ts::value_and_grad and the optimizers rebuild them over gradients and Adam states): one
// block_params per block, in a std::array.
template <class Wqkv, class Wo, class W1, class W2>
struct block_params {
  BOOST_HANA_DEFINE_STRUCT(block_params, (Wqkv, qkv), (Wo, o), (W1, w1), (W2, w2));
};

template <class E, class P, class Blocks, class Wout>
struct model_params {
  BOOST_HANA_DEFINE_STRUCT(model_params, (E, embed), (P, pos), (Blocks, layers), (Wout, out));
};

template <class Mesh>
using block_params_t = block_params<array_t<Mesh, Wqkv_spec, 3>, array_t<Mesh, Wo_spec, 2>,
                                    array_t<Mesh, W1_spec, 2>, array_t<Mesh, W2_spec, 2>>;

template <class Mesh>
using params_t = model_params<array_t<Mesh, rep2, 2>, array_t<Mesh, rep2, 2>,
                              std::array<block_params_t<Mesh>, blocks>, array_t<Mesh, rep2, 2>>;

inline constexpr std::size_t param_count = 3 + 4 * blocks;

template <class Mesh>
params_t<Mesh> put_params(const ts::device_mesh<Mesh>& m, const host_params& h) {
  const auto& w = h.mats;  // E, P, (Wo, W1, W2) per block, Wout
  const auto block = [&](std::size_t i) {
    return block_params_t<Mesh>{
        ts::device_put<Wqkv_spec>(m, h.qkv[i]), ts::device_put<Wo_spec>(m, w[2 + 3 * i]),
        ts::device_put<W1_spec>(m, w[3 + 3 * i]), ts::device_put<W2_spec>(m, w[4 + 3 * i])};
  };
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return params_t<Mesh>{ts::device_put<rep2>(m, w[0]), ts::device_put<rep2>(m, w[1]),
                          {block(I)...}, ts::device_put<rep2>(m, w[2 + 3 * blocks])};
  }(std::make_index_sequence<blocks>{});
}

// ---- the initial parameters, drawn on the mesh ---------------------------------------------

// The parameter of spec Spec and extents {rows, cols} (or {rows, 3, cols} for a fused QKV):
// N(0, 1) drawn with key k by ts::random, each device drawing only its own shard, times scale.
template <class Spec, class Mesh, std::size_t Rank>
array_t<Mesh, Spec, Rank> normal_param(ts::random::prng_key k, const ts::device_mesh<Mesh>& m,
                                       const ts::shape<Rank>& extents, float scale) {
  return ts::random::normal<Spec>(k, m, extents) * scale;
}

// init_params(m, c, seed): the initial parameters drawn on the mesh with ts::random (one
// subkey per parameter, split from ts::random::key(seed)): N(0, 1) scaled by 1 / sqrt(fan-in),
// the residual branches' output projections further by 1 / sqrt(2 blocks). No parameter
// passes through a host; the values depend on seed only, not on the mesh, so the 2 x 4 and
// 2 x 2 runs and the serial check (1 x 1) start from the same parameters.
template <class Mesh>
params_t<Mesh> init_params(const ts::device_mesh<Mesh>& m, const config& c, std::uint64_t seed) {
  const auto k = ts::random::split<param_count>(ts::random::key(seed));
  const std::size_t D = c.d_model, F = c.hidden;
  const float d = std::sqrt(static_cast<float>(D)), f = std::sqrt(static_cast<float>(F));
  const float branch = 1.0f / std::sqrt(2.0f * blocks);
  const auto block = [&](std::size_t i) {  // Wqkv, Wo, W1, W2: keys 2 + 4i ... 5 + 4i
    const std::size_t j = 2 + 4 * i;
    return block_params_t<Mesh>{
        normal_param<Wqkv_spec>(k[j], m, ts::shape<3>{D, 3, D}, 1.0f / d),
        normal_param<Wo_spec>(k[j + 1], m, ts::shape<2>{D, D}, branch / d),
        normal_param<W1_spec>(k[j + 2], m, ts::shape<2>{D, F}, 1.0f / d),
        normal_param<W2_spec>(k[j + 3], m, ts::shape<2>{F, D}, branch / f)};
  };
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return params_t<Mesh>{
        normal_param<rep2>(k[0], m, ts::shape<2>{c.vocab, D}, 1.0f),  // E
        normal_param<rep2>(k[1], m, ts::shape<2>{c.seq, D}, 0.5f),    // P
        {block(I)...},
        normal_param<rep2>(k[2 + 4 * blocks], m, ts::shape<2>{D, c.vocab}, 1.0f / d)};  // Wout
  }(std::make_index_sequence<blocks>{});
}

// to_host_params(p): the host copies of parameters p (a params_t; the serial checks nudge them).
template <class Params>
host_params to_host_params(const Params& p) {
  host_params h;
  (void)ts::tree_map(  // the leaves in the tree's order
      [&](const auto& w) {
        if constexpr (std::remove_cvref_t<decltype(w)>::rank == 3)
          h.qkv.push_back(ts::to_host(w));
        else
          h.mats.push_back(ts::to_host(w));
        return 0;
      },
      p);
  return h;
}

// init_params(c, seed): the same parameters as init_params(m, c, seed) on any mesh, on the host
// (drawn on one simulated device), for code that changes them before put_params. (A template,
// so that only a program calling it compiles the one-device mesh.)
template <class = void>
host_params init_params(const config& c, std::uint64_t seed) {
  using mesh_1x1 = ts::mesh<ts::axis("data", 1), ts::axis("model", 1)>;
  ts::cpu_devices one_device{1};
  return to_host_params(init_params(ts::device_mesh<mesh_1x1>{one_device}, c, seed));
}

// ---- the communication budget of one training step ------------------------------------------

// Per block, Megatron's two all-reduces over "model" forward and their two transposes in the
// backward; the loss's psum over "data"; ZeRO-1's reduce-scatter and all-gather over "data"
// per parameter. Nothing else: the embedding (ts::take of the replicated E at ids sharded over
// "data") is a local lookup, its gradient a local scatter-add unreduced over "data" (reduced by
// E's reduce-scatter above); the split of the fused QKV product along its unsharded dimension
// is a local copy, its transpose (a pad into zeros) too.
inline constexpr std::size_t embedding_collectives_per_step = 0;  // forward and backward
inline constexpr std::size_t qkv_split_collectives_per_step = 0;  // forward and backward
inline constexpr std::size_t model_psums_per_step = 4 * blocks;
inline constexpr std::size_t collectives_per_step =
    model_psums_per_step + 1 + 2 * param_count + embedding_collectives_per_step +
    blocks * qkv_split_collectives_per_step;

// Whether one step's recorded collectives are exactly that budget.
inline bool within_budget(const ts::communication_report& r) {
  return r.count(ts::step_kind::psum, "model") == model_psums_per_step &&
         r.count(ts::step_kind::psum, "data") == 1 &&
         r.count(ts::step_kind::psum_scatter, "data") == param_count &&
         r.count(ts::step_kind::all_gather, "data") == param_count &&
         r.size() == collectives_per_step;
}

// ---- the forward pass ---------------------------------------------------------------------

// LayerNorm over the model dimension (not sharded: local), without scale or bias.
template <class X>
auto layer_norm(const X& x) {
  return ts::layer_norm<2>(x, 1e-5f);  // one row kernel: mean, variance, normalise
}

// GELU, tanh form: 0.5 h (1 + tanh(sqrt(2 / pi) (h + 0.044715 h^3))), as jax.nn.gelu; one
// vectorised pass (ts::gelu) instead of seven elementwise ops.
template <class H>
auto gelu(const H& h) {
  return ts::gelu(h);
}

// The product einsum<S>(a, b): in float, or (Bf16) of the operands cast to bfloat16,
// accumulated in float.
template <bool Bf16, ts::einsum_subscripts S, class A, class B>
auto product(const A& a, const B& b) {
  if constexpr (Bf16)
    return ts::einsum<S>(ts::astype<ts::bfloat16>(a), ts::astype<ts::bfloat16>(b),
                         ts::preferred_element<float>);
  else
    return ts::einsum<S>(a, b);
}

// Causal multi-head attention on the normalised residual stream xn, returning the partial
// sums' all-reduce (Wo's product resharded to X's spec).
template <bool Bf16, class Xn, class Wqkv, class Wo, class In>
auto attention(const Xn& xn, const Wqkv& w_qkv, const Wo& w_o, const In& in) {
  const auto qkv = product<Bf16, "bsd,dte->bste">(xn, w_qkv);  // [B, S, 3, H dh], e over "model"
  const auto parts = ts::split<2, 3>(qkv);  // 3 x [B, S, 1, H dh]: local (dimension 2 unsharded)
  const auto head = [](const auto& part) {  // [B, S, H, dh], H over "model"
    return ts::split_dim<2, heads>(ts::merge_dims<1>(part));  // [B, S, H dh], then the heads
  };
  const auto q = head(parts[0]), k = head(parts[1]), v = head(parts[2]);
  const float scale = 1.0f / std::sqrt(static_cast<float>(q.extent(3)));
  const auto scores = product<Bf16, "bqhe,bkhe->bhqk">(q, k) * scale + in.mask;
  const auto p = [&] {  // over the keys: local
    if constexpr (Bf16)
      return ts::softmax<3>(ts::astype<ts::bfloat16>(scores));
    else
      return ts::softmax<3>(scores);
  }();
  const auto o = ts::merge_dims<2>(product<Bf16, "bhqk,bkhe->bqhe">(p, v));  // [B, S, H dh]
  // The local products are partial sums over "model" (e is sharded in both operands): the
  // result's type says unreduced<"model">, and the reshard to X's spec is the all-reduce.
  // (Naming X's spec as the einsum's output instead lets the planner all-gather o and Wo.)
  return ts::reshard<X_spec>(product<Bf16, "bse,ed->bsd">(o, w_o));  // all-reduce 1
}

template <bool Bf16, class Xn, class W1, class W2>
auto mlp(const Xn& xn, const W1& w1, const W2& w2) {
  const auto h = gelu(product<Bf16, "bsd,df->bsf">(xn, w1));  // F over "model": local
  return ts::reshard<X_spec>(product<Bf16, "bsf,fd->bsd">(h, w2));  // all-reduce 2
}

// One block, its parameters b a block_params (of arrays, or inside the loss of traced values).
template <bool Bf16, class X, class B, class In>
auto block(const X& x, const B& b, const In& in) {
  const auto x1 = x + attention<Bf16>(layer_norm(x), b.qkv, b.o, in);
  return x1 + mlp<Bf16>(layer_norm(x1), b.w1, b.w2);
}

// The blocks I, I + 1, ... of `layers` (a std::array of block_params, or inside the loss a
// std::tuple of them: their traced leaves differ in type) applied to x in order.
template <bool Bf16, std::size_t I = 0, class X, class Layers, class In>
auto blocks_from(const X& x, const Layers& layers, const In& in) {
  if constexpr (I == std::tuple_size_v<Layers>)
    return x;
  else
    return blocks_from<Bf16, I + 1>(block<Bf16>(x, std::get<I>(layers), in), layers, in);
}

// The mean cross-entropy of the predicted tokens, of the parameter tree p (a params_t, or inside
// ts::value_and_grad the same tree of traced values). Its collectives: the blocks' all-reduces
// over "model", and the loss's sum over "data". Bf16: mixed precision (see the top of this file).
template <bool Bf16>
struct loss_fn {
  template <class Params, class In>
  auto operator()(const Params& p, const In& in) const {
    const auto x0 = ts::take(p.embed, in.ids) + p.pos;  // rows of E (a lookup); P broadcast
    const auto x = blocks_from<Bf16>(x0, p.layers, in);
    const auto logits = product<Bf16, "bsd,dv->bsv">(layer_norm(x), p.out);
    const auto logp = ts::log_softmax<2>(logits);
    const float count = static_cast<float>(in.ids.extent(0) * in.ids.extent(1));
    return ts::sum<ts::spec<>>(logp * in.targets) * (-1.0f / count);  // rank 0
  }
};
inline constexpr loss_fn<false> loss{};
inline constexpr loss_fn<true> loss_bf16{};

// loss's (Bf16: loss_bf16's) value and gradients, JAX's jax.value_and_grad(loss)(params, in):
// a std::pair of the loss array and the gradient tree (a model_params of the gradients, each
// unreduced over "data").
template <bool Bf16 = false, class Mesh>
auto value_and_grads(const params_t<Mesh>& p, const inputs<Mesh>& in) {
  return ts::value_and_grad(loss_fn<Bf16>{})(p, in);
}

// ---- the optimizer: ZeRO-1 Adam over the tree (ts::adam_update) ---------------------------

// Each parameter's update shard: its spec with "data" on a dimension it leaves unsharded
// (the gradient, unreduced over "data", is reduce-scattered there; the updated shard is
// all-gathered back).
using rep2_update = ts::spec<"data", ts::none>;
using Wqkv_update = ts::spec<"data", ts::none, "model">;
using Wo_update = ts::spec<"model", "data">;
using W1_update = ts::spec<"data", "model">;
using W2_update = ts::spec<"model", "data">;

// The update shards as a tree of the parameters' shape (ts::zero_adam_init(params, specs)).
// (ts::zero_adam_init<"data"> would shard dimension 0 only, and leave Wo and W2, whose
// dimension 0 is over "model", to an all-reduce and replicated moments.)
using update_specs = model_params<rep2_update, rep2_update,
                                  std::array<block_params<Wqkv_update, Wo_update, W1_update,
                                                          W2_update>,
                                             blocks>,
                                  rep2_update>;

// ZeRO-1 Adam over the parameter tree: state, a tree of ts::zero_adam_state of the same shape.
template <class Mesh>
struct optimizer {
  using params = params_t<Mesh>;
  static_assert(ts::tree_size<params> == param_count);
  using state_type =
      decltype(ts::zero_adam_init(std::declval<const params&>(), update_specs{}));
  state_type state;
  ts::adam_options options;

  optimizer(const params& p, ts::adam_options o)
      : state(ts::zero_adam_init(p, update_specs{})), options(o) {}

  // The steps taken (every parameter's state counts the same: they update together). A
  // checkpoint saves it beside the moments (state's m and v); set_step restores it.
  std::size_t step() const { return state.embed.step; }
  void set_step(std::size_t s) {
    (void)ts::tree_map([s](auto& each) { return each.step = s; }, state);
  }

  // One step: per parameter, in the tree's order, the reduce-scatter of its gradient over
  // "data", the update of its shard and the all-gather.
  template <class Grads>
  void update(params& p, const Grads& g) {
    p = ts::adam_update(p, g, state, options);
  }
};

}  // namespace examples::transformer
