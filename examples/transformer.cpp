// examples/transformer.cpp: a decoder-only transformer language model (issue 17), trained
// data parallel over "data" and Megatron tensor parallel over "model" in the typed global
// view, on 8 simulated CPU devices as a 2 x 4 mesh ("data", "model").
//
// The model and its shardings are in examples/support/transformer_model.hpp (shared with the
// serial check, tests/unit/grad_transformer.cpp): vocabulary 16, sequence 16, d_model 64,
// 4 heads of 16, MLP hidden 256, 2 pre-norm blocks, batch 16. The task: predict the previous
// token of a random sequence (fresh batches every step, std::mt19937 seeded 7). The
// parameters are drawn on the mesh with ts::random (tr::init_params: each device draws only
// its own shards, the same values on any mesh). The parameters are one tree (tr::model_params,
// ops/tree.hpp); the gradients come from ts::value_and_grad(loss)(params, batch), a tree of the
// same shape; the optimizer is ZeRO-1 Adam over the tree (ts::adam_update, lr 1e-2): each
// gradient, unreduced over "data", is reduce-scattered over "data", the update runs on each
// device's shard and the parameter is all-gathered back.
//
// The program prints each layer's forward plan, the collectives of the first training step
// (ts::communication_recorder) and the gradients' types once, then the loss every 5 steps. It
// fails (exit code 1) if that step ran other collectives than the budget (per block 2 psums
// over "model" forward and 2 backward, the loss's psum over "data", a psum_scatter and an
// all_gather over "data" per parameter), or unless the loss is below 0.05 after the default
// 50 steps.
//
//   --mesh 2x2 (or TYPESHARD_TRANSFORMER_MESH=2x2): the same model on a 2 x 2 mesh of devices
//   0-3 (under mpirun -np 4); the default is the 2 x 4 mesh.
//   --steps N: train N steps (no threshold check unless N is the default).
//   --save DIR [--save-every N]: save a checkpoint (ts::checkpoint: the parameters, both Adam
//   moments, the step count and the data generator's state) under DIR every N steps, and
//   after the last step; DIR/<step> holds each one (docs/checkpoints.md).
//   --resume DIR: continue from DIR's newest checkpoint, on this run's mesh (a 2 x 4 save
//   resumes on 2 x 2 and the reverse); --steps N is then the step to stop at.
//   --losses FILE: write every step's loss, exactly ("<step> <loss as %.9g>" per line).
//   --check-losses FILE [--tolerance T]: compare every step's loss with FILE's (a --losses
//   file); exit code 1 if one differs by more than T relative (default 0: bitwise equal).
//   --bf16: mixed precision on the 2 x 4 mesh (support/transformer_model.hpp: float master
//   weights, bf16 products accumulated in float, bf16 attention probabilities), to the same
//   loss threshold and the same collective budget (the gradients stay unreduced over "data"
//   through the bf16 copies, for ZeRO's float reduce-scatter, as in the float run).
//   --eager: run each training step op by op; by default it runs through ts::jit, as one
//   program per device (ops/jit.hpp), with bitwise the same results.
//
// Every number printed but the timings is deterministic (fixed seeds; collectives sum in rank
// order), so runs on the MPI backend can be compared with it.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <typeshard/ops/checkpoint.hpp>
#include <typeshard/typeshard.hpp>

#include "support/print.hpp"
#include "support/transformer_model.hpp"

namespace ts = typeshard;
namespace tr = examples::transformer;
namespace tc = ts::checkpoint;
using examples::section;

namespace {

constexpr std::size_t default_steps = 50;
constexpr double threshold = 0.05;  // ln(16) = 2.77 is chance

// A loss to 4 significant digits. MPI's all-reduces sum in another order than the thread
// pool's (rank order), and 50 steps of training grow that rounding to about 1e-6 relative:
// the digits printed are the ones both backends agree on.
std::string loss4(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%.4g", v);
  return s;
}

// A float loss exactly (9 significant digits read back to the same float).
std::string exact(float v) {
  char s[32];
  std::snprintf(s, sizeof s, "%.9g", double(v));
  return s;
}

template <class T>
using type_of = std::remove_cvref_t<T>;

// Each layer's forward plan, from the array types alone (nothing runs): the einsums of one
// block as examples/support/transformer_model.hpp writes them.
template <class Mesh>
void print_plans() {
  using X = tr::array_t<Mesh, tr::X_spec, 3>;
  using Wqkv = tr::array_t<Mesh, tr::Wqkv_spec, 3>;
  using Wo = tr::array_t<Mesh, tr::Wo_spec, 2>;
  using W1 = tr::array_t<Mesh, tr::W1_spec, 2>;
  using W2 = tr::array_t<Mesh, tr::W2_spec, 2>;
  using E = tr::array_t<Mesh, tr::rep2, 2>;
  using Ids = decltype(tr::inputs<Mesh>::ids);
  using Emb = type_of<decltype(ts::take(std::declval<E>(), std::declval<Ids>()))>;
  using QKV =
      type_of<decltype(ts::einsum<"bsd,dte->bste">(std::declval<X>(), std::declval<Wqkv>()))>;
  using Part = type_of<decltype(ts::split<2, 3>(std::declval<QKV>())[0])>;
  using Qm = type_of<decltype(ts::merge_dims<1>(std::declval<Part>()))>;
  using Q = type_of<decltype(ts::split_dim<2, tr::heads>(std::declval<Qm>()))>;
  using S = type_of<decltype(ts::einsum<"bqhe,bkhe->bhqk">(std::declval<Q>(), std::declval<Q>()))>;
  using O = type_of<decltype(ts::einsum<"bhqk,bkhe->bqhe">(std::declval<S>(), std::declval<Q>()))>;
  using Om = type_of<decltype(ts::merge_dims<2>(std::declval<O>()))>;
  using H = type_of<decltype(ts::einsum<"bsd,df->bsf">(std::declval<X>(), std::declval<W1>()))>;
  auto line = [](const char* what, std::string plan) {
    while (!plan.empty() && plan.back() == '\n') plan.pop_back();  // reshard plans end in one
    std::cout << "  " << what << plan << "\n";
  };
  std::cout << "X " << X::sharding_string() << ", Wqkv " << Wqkv::sharding_string() << ", Wo "
            << Wo::sharding_string() << ", W1 " << W1::sharding_string() << ", W2 "
            << W2::sharding_string() << "\n";
  // The embedding: a local lookup in the replicated table (its gradient a local scatter-add,
  // unreduced over "data" like every other gradient). No collective either way.
  line("X   = take(E, ids) + P: ",
       std::string("local lookup (E replicated), no communication => ") +
           Emb::sharding_string() + "; backward: a local scatter-add into E, unreduced over "
           "\"data\"");
  line("qkv = einsum<bsd,dte->bste>(LN(X), Wqkv): ",
       ts::einsum_plan_for<"bsd,dte->bste", X, Wqkv>::describe());
  const tr::config c;  // the default extents (the split's plan is a value of the extents)
  const auto parts = ts::split_plans_for<QKV, 2, 3>(ts::shape<4>{c.batch, c.seq, 3, c.d_model});
  line("q, k, v = split<2, 3>(qkv): ", parts[0].describe() + "  (k, v: the same; " +
                                           std::to_string(parts[0].collectives() +
                                                          parts[1].collectives() +
                                                          parts[2].collectives()) +
                                           " collectives)");
  line("      merge_dims<1>(q): ", ts::merge_dims_plan_for<Part, 1>::describe());
  line("      split_dim<2, 4>(q): ", ts::split_dim_plan_for<Qm, 2, tr::heads>::describe());
  line("scores = einsum<bqhe,bkhe->bhqk>(q, k): ",
       ts::einsum_plan_for<"bqhe,bkhe->bhqk", Q, Q>::describe());
  line("o   = einsum<bhqk,bkhe->bqhe>(softmax(scores + mask), v): ",
       ts::einsum_plan_for<"bhqk,bkhe->bqhe", S, Q>::describe());
  line("      merge_dims<2>(o): ", ts::merge_dims_plan_for<O, 2>::describe());
  using Y = type_of<decltype(ts::einsum<"bse,ed->bsd">(std::declval<Om>(), std::declval<Wo>()))>;
  line("y   = einsum<bse,ed->bsd>(o, Wo): ",
       ts::einsum_plan_for<"bse,ed->bsd", Om, Wo>::describe());
  line("X += reshard<X's spec>(y): ", ts::reshard_plan_for<Y, tr::X_spec>::describe());
  line("h   = einsum<bsd,df->bsf>(LN(X), W1): ",
       ts::einsum_plan_for<"bsd,df->bsf", X, W1>::describe());
  line("y   = einsum<bsf,fd->bsd>(gelu(h), W2): ",
       ts::einsum_plan_for<"bsf,fd->bsd", H, W2>::describe());
  line("X += reshard<X's spec>(y): ", ts::reshard_plan_for<Y, tr::X_spec>::describe());
}

template <class G>
void print_gradient(const char* name, const G&) {
  std::cout << "  d" << name << ": " << G::sharding_string() << ", unreduced "
            << G::unreduced_type::to_string() << "\n";
}

// The collectives of one training step, one line each, as the device at the report's mesh
// position ran them (what every device runs: the program is SPMD). The times go on one line
// of their own (they vary run to run; the MPI comparison drops lines with "ms").
void print_report(const ts::communication_report& r) {
  std::cout << "  #  collective    axes   group  block (B)  received (B)\n";
  std::size_t i = 0;
  for (const auto& c : r.collectives()) {
    char line[128];
    std::snprintf(line, sizeof line, "%3zu  %-13s %-6s %5zu %10zu %13zu\n", ++i, c.name().c_str(),
                  c.axes.c_str(), c.group_size, c.block_bytes, c.bytes_received);
    std::cout << line;
  }
  std::cout << r.size() << " collectives: " << r.count(ts::step_kind::psum, "model")
            << " psums over \"model\" (Megatron: 2 per block forward, 2 backward), "
            << r.count(ts::step_kind::psum, "data") << " over \"data\" (the loss), "
            << r.count(ts::step_kind::psum_scatter, "data") << " psum_scatters and "
            << r.count(ts::step_kind::all_gather, "data")
            << " all_gathers over \"data\" (ZeRO-1 Adam: one each per parameter); this device "
            << "received " << r.bytes_received() << " bytes\n";
  std::cout << "time in collectives on this device: " << examples::format_ms(r.seconds() * 1e3)
            << "\n";
}

// ---- checkpoints (ts::checkpoint) ------------------------------------------------------------

struct run_options {
  std::size_t steps = default_steps;
  std::string save, resume, losses, check_losses;  // directories and files; empty: none
  std::size_t save_every = 0;                       // 0: after the last step only
  double tolerance = 0;                             // of --check-losses; 0: bitwise
  bool eager = false;                               // --eager: op by op, not through ts::jit
};

// The names of the parameters in a checkpoint, in the order of params_t's leaves.
constexpr const char* param_names[tr::param_count] = {
    "E",           "P",         "block0/Wqkv", "block0/Wo", "block0/W1", "block0/W2",
    "block1/Wqkv", "block1/Wo", "block1/W1",   "block1/W2", "Wout"};

// The data generator's state as numbers: those of std::mt19937's text form (the standard's
// 624 words; libstdc++ adds its position in them). rng_of is the inverse.
ts::host_tensor<std::uint32_t, 1> rng_state(const std::mt19937& g) {
  std::stringstream text;
  text << g;
  std::vector<std::uint32_t> words;
  for (std::uint64_t w; text >> w;) words.push_back(static_cast<std::uint32_t>(w));
  ts::host_tensor<std::uint32_t, 1> t({words.size()});
  for (std::size_t i = 0; i < words.size(); ++i) t(i) = words[i];
  return t;
}

std::mt19937 rng_of(const ts::host_tensor<std::uint32_t, 1>& t) {
  std::stringstream text;
  for (std::size_t i = 0; i < t.size(); ++i) text << t(i) << ' ';
  std::mt19937 g;
  if (!(text >> g))
    throw std::runtime_error("transformer: the checkpoint's data/rng is not a generator state");
  return g;
}

// Saves step `step` under root: the parameters ("params/<name>"), Adam's moments
// ("adam/m/<name>", "adam/v/<name>", in their ZeRO update shards: each device writes its
// 1/N), and the data generator's state ("data/rng", replicated: written once). The step
// count is the checkpoint's step (Adam's bias correction and the batches continue from it).
template <class Mesh>
void save_checkpoint(const std::string& root, std::size_t step, const ts::device_mesh<Mesh>& mesh,
                     const tr::params_t<Mesh>& params, const tr::optimizer<Mesh>& adam,
                     const std::mt19937& data_rng) {
  std::vector<tc::item> items;
  // Each pass visits the leaves in the tree's order (param_names'): the parameter, its state.
  const auto add = [&](const char* prefix, const auto& pick) {
    std::size_t i = 0;
    (void)ts::tree_map(
        [&](const auto& w, const auto& s) {
          items.emplace_back(std::string(prefix) + param_names[i++], pick(w, s));
          return 0;
        },
        params, adam.state);
  };
  add("params/", [](const auto& w, const auto&) -> const auto& { return w; });
  add("adam/m/", [](const auto&, const auto& s) -> const auto& { return s.m; });
  add("adam/v/", [](const auto&, const auto& s) -> const auto& { return s.v; });
  const auto rng = ts::device_put<ts::spec<ts::none>>(mesh, rng_state(data_rng));
  items.emplace_back("data/rng", rng);
  tc::save(root, step, items);
}

// Loads root's newest checkpoint onto `mesh` (whatever mesh saved it: each device reads the
// boxes of its own shards) into params, adam and data_rng; returns its step.
template <class Mesh>
std::size_t resume(const std::string& root, const ts::device_mesh<Mesh>& mesh,
                   tr::params_t<Mesh>& params, tr::optimizer<Mesh>& adam,
                   std::mt19937& data_rng) {
  const std::optional<std::uint64_t> step = tc::latest_step(root);
  if (!step) throw std::runtime_error("transformer: no checkpoint under " + root);
  const auto dir = tc::step_path(root, *step);
  const auto load = [&]<class A>(A& into, const std::string& name) {
    into = tc::load<typename A::spec, typename A::value_type, A::rank>(dir, name, mesh);
  };
  std::size_t i = 0;
  (void)ts::tree_map(  // the leaves in the tree's order (param_names')
      [&](auto& w, auto& s) {
        const std::string name = param_names[i++];
        load(w, "params/" + name);
        load(s.m, "adam/m/" + name);
        load(s.v, "adam/v/" + name);
        return 0;
      },
      params, adam.state);
  adam.set_step(*step);
  data_rng =
      rng_of(ts::to_host(tc::load<ts::spec<ts::none>, std::uint32_t, 1>(dir, "data/rng", mesh)));
  return *step;
}

// The losses of a --losses file, by step.
std::map<std::size_t, float> read_losses(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("transformer: cannot read " + file);
  std::map<std::size_t, float> out;
  std::size_t step;
  std::string loss;
  while (in >> step >> loss) out[step] = std::strtof(loss.c_str(), nullptr);
  return out;
}

template <bool Bf16, class Mesh>
int train(const ts::device_mesh<Mesh>& mesh, const run_options& opt) {
  const std::size_t steps = opt.steps;
  const tr::config c;
  std::cout << "vocabulary " << c.vocab << ", sequence " << c.seq << ", d_model " << c.d_model
            << ", " << tr::heads << " heads of " << c.d_model / tr::heads << ", MLP hidden "
            << c.hidden << ", " << tr::blocks << " blocks, batch " << c.batch << "; mesh "
            << mesh.to_string() << (Bf16 ? "; mixed precision (bf16 products)" : "") << "\n";

  section("1", "The shardings and each layer's plan");
  print_plans<Mesh>();

  std::optional<std::ofstream> losses_out;  // --losses
  if (!opt.losses.empty()) losses_out.emplace(opt.losses);
  const std::map<std::size_t, float> expected =  // --check-losses
      opt.check_losses.empty() ? std::map<std::size_t, float>{} : read_losses(opt.check_losses);
  double worst = 0;  // of the losses against --check-losses
  // doc-snippet: transformer_step
  auto params = tr::init_params(mesh, c, 1);  // ts::random: each device draws its own shards
  tr::optimizer<Mesh> adam(params, {.lr = 1e-2});
  std::mt19937 data_rng(7);
  const std::size_t start =  // --resume: parameters, moments, step and data from a checkpoint
      opt.resume.empty() ? 0 : resume(opt.resume, mesh, params, adam, data_rng);
  // One training step: jax.value_and_grad(loss)(params, batch) (grads is a tree of params'
  // shape), then ZeRO-1 Adam per leaf (reduce-scatter over "data", update, all-gather) on a
  // copy of the state: ts::jit runs the step once per device, as jax.jit compiles it.
  const auto train_step = [&adam](const auto& p, const auto& st, const auto& in) {
    auto [loss, grads] = ts::value_and_grad(tr::loss_fn<Bf16>{})(p, in);
    auto state = st;
    auto next = ts::adam_update(p, grads, state, adam.options);
    return std::tuple(loss, grads, next, state);
  };
  const auto compiled = ts::jit(train_step);
  double last = 0;
  for (std::size_t s = start; s < steps; ++s) {
    const auto batch = tr::put_inputs(mesh, c, tr::make_batch(c, data_rng));
    std::optional<ts::communication_recorder> recorder;  // the first step's collectives
    if (s == start) recorder.emplace();
    auto [loss, grads, next, state] =  // as one program per device (ts::jit), or --eager
        opt.eager ? train_step(params, adam.state, batch) : compiled(params, adam.state, batch);
    params = std::move(next);
    adam.state = std::move(state);
    // doc-snippet-end
    if (s == start) {
      if (start != 0) std::cout << "resumed from " << opt.resume << " at step " << start << "\n";
      const ts::communication_report report = recorder->report();
      recorder.reset();
      section("2", "The collectives of one training step (ts::communication_recorder)");
      print_report(report);
      if (!tr::within_budget(report)) {
        std::cerr << "transformer: one step ran " << report.size() << " collectives, "
                  << report.count(ts::step_kind::psum, "model")
                  << " of them psums over \"model\"; the budget is "
                  << tr::collectives_per_step << ", " << tr::model_psums_per_step << "\n";
        return 1;
      }
      section("3", "The gradients' types");
      print_gradient("E", grads.embed);  // grads: the parameters' tree (tr::model_params)
      print_gradient("P", grads.pos);
      print_gradient("Wqkv", grads.layers[0].qkv);
      print_gradient("Wo", grads.layers[0].o);
      print_gradient("W1", grads.layers[0].w1);
      print_gradient("W2", grads.layers[0].w2);
      print_gradient("Wout", grads.out);
      section("4", "Training");
    }
    const float loss_value = loss.item();
    last = loss_value;
    if (s % 5 == 0 || s + 1 == steps) std::cout << "step " << s << ": loss " << loss4(last) << "\n";
    if (losses_out) *losses_out << s << ' ' << exact(loss_value) << '\n';
    if (!expected.empty()) {
      const auto e = expected.find(s);
      if (e == expected.end()) {
        std::cerr << "transformer: " << opt.check_losses << " has no loss for step " << s << "\n";
        return 1;
      }
      const double want = e->second;
      const double d = std::abs(double(loss_value) - want) / std::abs(want);
      worst = std::max(worst, d);  // 0 only where the floats are equal
    }
    if (!opt.save.empty() && (s + 1 == steps || (opt.save_every && (s + 1) % opt.save_every == 0)))
      save_checkpoint(opt.save, s + 1, mesh, params, adam, data_rng);
  }
  if (start >= steps) {
    std::cerr << "transformer: the checkpoint is at step " << start << ", not before --steps "
              << steps << "\n";
    return 2;
  }
  if (!expected.empty()) {
    std::cout << "losses of steps " << start << "-" << steps - 1 << " against " << opt.check_losses
              << ": largest relative difference " << worst << " (tolerance " << opt.tolerance
              << ")\n";
    if (worst > opt.tolerance) {
      std::cerr << "transformer: the losses differ from " << opt.check_losses << " by "
                << worst << " relative, more than " << opt.tolerance << "\n";
      return 1;
    }
  }
  std::cout << "final loss " << loss4(last) << " after " << steps << " steps (threshold "
            << threshold << ")\n";
  if (steps == default_steps && !(last < threshold)) {
    std::cerr << "transformer: the loss " << last << " is not below " << threshold << " after "
              << steps << " steps\n";
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mesh_choice = "2x4";
  if (const char* env = std::getenv("TYPESHARD_TRANSFORMER_MESH")) mesh_choice = env;
  run_options opt;
  bool bf16 = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool value = i + 1 < argc;
    if (arg == "--mesh" && value) {
      mesh_choice = argv[++i];
    } else if (arg == "--steps" && value) {
      opt.steps = std::stoul(argv[++i]);
    } else if (arg == "--save" && value) {
      opt.save = argv[++i];
    } else if (arg == "--save-every" && value) {
      opt.save_every = std::stoul(argv[++i]);
    } else if (arg == "--resume" && value) {
      opt.resume = argv[++i];
    } else if (arg == "--losses" && value) {
      opt.losses = argv[++i];
    } else if (arg == "--check-losses" && value) {
      opt.check_losses = argv[++i];
    } else if (arg == "--tolerance" && value) {
      opt.tolerance = std::stod(argv[++i]);
    } else if (arg == "--bf16") {
      bf16 = true;
    } else if (arg == "--eager") {
      opt.eager = true;
    } else {
      const bool help = arg == "--help" || arg == "-h";
      (help ? std::cout : std::cerr) << "usage: " << argv[0]
                                     << " [--mesh 2x4|2x2] [--steps N] [--bf16] [--eager]"
                                     << " [--save DIR"
                                     << " [--save-every N]] [--resume DIR] [--losses FILE]"
                                     << " [--check-losses FILE [--tolerance T]]\n";
      return help ? 0 : 2;
    }
  }
  if (mesh_choice != "2x4" && mesh_choice != "2x2") {
    std::cerr << "transformer: unknown mesh '" << mesh_choice << "'; use 2x4 or 2x2\n";
    return 2;
  }

  ts::cpu_devices devices{8};

  try {  // a checkpoint's error (a missing or damaged file) ends the run with its message
    if (mesh_choice == "2x2") {
      using mesh_2x2 = ts::mesh<ts::axis("data", 2), ts::axis("model", 2)>;
      if (bf16) {
        std::cerr << "transformer: --bf16 runs on the 2x4 mesh only\n";
        return 2;
      }
      return train<false>(ts::device_mesh<mesh_2x2>{devices, {0, 1, 2, 3}}, opt);
    }
    using mesh_2x4 = ts::mesh<ts::axis("data", 2), ts::axis("model", 4)>;
    if (bf16) return train<true>(ts::device_mesh<mesh_2x4>{devices}, opt);
    return train<false>(ts::device_mesh<mesh_2x4>{devices}, opt);
  } catch (const std::exception& e) {
    std::cerr << "transformer: " << e.what() << "\n";
    return 1;
  }
}
