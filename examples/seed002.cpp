// examples/seed002.cpp: seed 002, JAX's "Distributed arrays and automatic parallelization",
// on 8 simulated CPU devices:
//   1. Sharding basics: PositionalSharding(devices) reshaped to (8, 1), (4, 2), (1, 8) and
//      replicated along an axis, each as a spec on one device mesh (see "Positional
//      shardings" below), with its picture and the device grid JAX prints;
//   2. NamedSharding on a 4 x 2 mesh ('a', 'b'): P('a', 'b'), P('b', 'a'), P('a', None),
//      P(None, 'b'), P(None, 'a'), P(('a', 'b'), None);
//   3. computation follows sharding: sin keeps its input's sharding; a matmul of a row-
//      sharded by a column-sharded matrix is block-sharded with no communication (the plan
//      is static_asserted); a copy keeps the sharding; timings against one device;
//   4. arrays on different device sets, or on the same devices in another order, meeting in
//      one operation: the typeshard exception (printed, and checked to be thrown); arrays
//      made on the other's device mesh work, and so does moving one with ts::reshard;
//   5. with_sharding_constraint: ts::reshard inside a function, its plan printed;
//   6. the MLP of the notebook (predict, the mean over the batch of the summed squared error,
//      SGD with step 1e-5 for 30 steps) trained twice with a hand-written backward pass:
//      8-way data parallel (batch over 8 devices, parameters replicated), and 4-way data x
//      2-way tensor parallel (W2's columns and W3's rows over the 2-way axis). Each run's loss
//      must fall, and match a serial run of the same model (same initialisation, same data,
//      one thread, no typeshard) at every step; then trained again with ts::value_and_grad
//      (the loss written once, forward only), which must give the hand-written pass's losses
//      step by step and match the serial run too. That run is JAX's
//      jax.value_and_grad(loss)(params, x, t): the parameters one tree (a struct of layers),
//      the gradients the same struct, the SGD step ts::sgd_update over the tree.
// The exit code is 1 if any check fails.
//
// Positional shardings. PositionalSharding(devices).reshape(r, c) puts device r_i * c + c_j
// at block (r_i, c_j). With 8 devices every such shape is a spec on the mesh ('d0', 'd1',
// 'd2') of size 2 x 2 x 2 (device k has coordinates k's three bits, d0 major): a dimension
// split in 2^m takes the next m axes, major first. So reshape(8, 1) is P(('d0','d1','d2'),
// None), reshape(4, 2) is P(('d0','d1'), 'd2'), reshape(2, 4) is P('d0', ('d1','d2')), and
// replicate(axis) drops that dimension's axes (the data is then replicated over them):
// reshape(4, 2).replicate(0) is P(None, 'd2'). One mesh type for all of them is what lets
// with_sharding_constraint move between reshape(4, 2) and reshape(2, 4) with ts::reshard.
//
// Sizes. The notebook's x is 8192 x 8192 and its MLP has layers [784, 8192, 8192, 8192, 10]
// and a batch of 8192; that is a few seconds of a TPU but hours of two CPU cores, so the
// default is x of 512 x 512 and the MLP [784, 256, 256, 256, 10] with a batch of 256, and
// --large runs the notebook's sizes (estimated 12-16 GB of memory: the 8-way data-parallel
// run replicates the parameters and gradients on every device, as the notebook does). The
// default step size is the notebook's scaled by 8192 / hidden width: with standard
// initialisation a step changes the outputs in proportion to step * width, so the small
// model's loss falls by a visible amount in 30 steps too (--large: the notebook's 1e-5).
//
// Data: std::normal_distribution<float> over std::mt19937 seeded 0 (the notebook's
// PRNGKey(0)); the MLP's parameters are drawn on each mesh with ts::random from key(0) (each
// device draws only its own shard; the same values on every mesh, checked). The values differ
// from JAX's (the notebook's init is not partitionable Threefry); the checks do not depend on
// them. Every number
// this program prints is deterministic (fixed seeds; collectives sum in rank order), so runs
// on other backends can be compared with it; only the timings vary.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/hana/define_struct.hpp>
#include <typeshard/typeshard.hpp>

#include "support/print.hpp"

namespace ts = typeshard;
using examples::section;

namespace {

examples::checker check;

// ---- data ----------------------------------------------------------------------------------

ts::host_tensor<float, 2> normal(std::size_t rows, std::size_t cols, std::mt19937& rng,
                                 float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  ts::host_tensor<float, 2> t({rows, cols});
  for (float& v : t.values()) v = dist(rng) * scale;
  return t;
}

// ---- layouts -------------------------------------------------------------------------------

// "{CPU 0, 2, 4, 6}": the devices holding one block, as a PositionalSharding prints them.
std::string device_set(const std::set<ts::device_id>& ids) {
  std::string out = "{CPU ";
  bool first = true;
  for (ts::device_id d : ids) {
    out += (first ? "" : ", ") + std::to_string(d);
    first = false;
  }
  return out + "}";
}

// What print(sharding) shows for a PositionalSharding: the grid of device sets, one per block
// of the array (Spec of rank 1 or 2 on the positional mesh).
template <class Spec, class Mesh>
std::string positional_string(const ts::device_mesh<Mesh>& m) {
  constexpr std::size_t rank = Spec::size;
  using L = ts::layout<Mesh, Spec, rank>;
  const std::size_t rows = L::shards_along(0), cols = rank == 2 ? L::shards_along(1) : 1;
  std::vector<std::set<ts::device_id>> cells(rows * cols);
  for (std::size_t p = 0; p < Mesh::size; ++p)
    cells[L::shard_along(0, p) * cols + (rank == 2 ? L::shard_along(1, p) : 0)].insert(
        m.device_at(p));
  std::string out = "PositionalSharding(";
  if constexpr (rank == 1) {
    out += "[";
    for (std::size_t r = 0; r < rows; ++r) out += (r ? " " : "") + device_set(cells[r]);
    return out + "])";
  } else {
    out += "[";
    for (std::size_t r = 0; r < rows; ++r) {
      out += r ? "\n" + std::string(20, ' ') + "[" : "[";
      for (std::size_t c = 0; c < cols; ++c)
        out += (c ? " " : "") + device_set(cells[r * cols + c]);
      out += "]";
    }
    return out + "])";
  }
}

// A device's block (row, column) in a grid of blocks, as the notebook's sharding places it.
using cell = std::pair<std::size_t, std::size_t>;
using expected_cell_fn = cell (*)(ts::device_id);

// Checks that every shard of an array (its addressable_shards()) is the block the notebook's
// layout gives its device (expected_cell(device) -> (block row, block column) of a rows x
// cols grid of blocks, written from the definition of the sharding, not from typeshard's
// layout code) and holds the host data of that block. (Of the shards, not the array: one
// function for every spec.)
void check_layout(const std::string& what, const std::vector<ts::shard<float, 2>>& shards,
                  const ts::host_tensor<float, 2>& host, std::size_t rows, std::size_t cols,
                  expected_cell_fn expected_cell) {
  const std::size_t h = host.extent(0) / rows, w = host.extent(1) / cols;
  for (const auto& s : shards) {
    const auto [r, c] = expected_cell(s.device.id);
    const ts::index_slices<2> want{ts::slice{r * h, (r + 1) * h}, ts::slice{c * w, (c + 1) * w}};
    bool ok = s.index == want && s.shape == ts::shape<2>{h, w};
    for (std::size_t i = 0; ok && i < h; ++i)
      ok = std::equal(s.data.begin() + static_cast<std::ptrdiff_t>(i * w),
                      s.data.begin() + static_cast<std::ptrdiff_t>((i + 1) * w),
                      host.data() + (r * h + i) * host.extent(1) + c * w);
    check(ok, what + ": device " + std::to_string(s.device.id) + " holds " +
                  ts::to_string(s.index) + ", expected the data of " + ts::to_string(want));
  }
}

// jax.device_put(x, sharding) and its picture, checked against the expected grid.
template <class Spec, class Mesh>
auto put_and_show(const std::string& what, const ts::device_mesh<Mesh>& m,
                  const ts::host_tensor<float, 2>& x, std::size_t rows, std::size_t cols,
                  expected_cell_fn expected_cell) {
  const auto y = ts::device_put<Spec>(m, x);
  std::cout << "\n" << what << "\n";
  ts::visualize(y);
  check_layout(what, y.addressable_shards(), x, rows, cols, expected_cell);
  return y;
}

// reshape(r, c) of the positional device list: device d at block (d / c, d % c).
template <std::size_t C>
cell reshaped(ts::device_id d) {
  return {d / C, d % C};
}

bool same_values(const ts::host_tensor<float, 2>& got, const ts::host_tensor<float, 2>& want,
                 double tolerance) {
  return examples::max_relative_error(got, want) <= tolerance;
}

// ---- the serial MLP: plain loops and one-thread GEMMs on host tensors ----------------------

using host_matrix = ts::host_tensor<float, 2>;
using host_vector = ts::host_tensor<float, 1>;

struct host_layer {
  host_matrix w;
  host_vector b;
};

host_matrix host_matmul(const host_matrix& a, const host_matrix& b) {
  host_matrix c({a.extent(0), b.extent(1)});
  ts::kernels::gemm<float>(a.extent(0), b.extent(1), a.extent(1), a.data(), a.extent(1), b.data(),
                           b.extent(1), c.data(), b.extent(1));
  return c;
}

host_matrix host_transpose(const host_matrix& a) {
  host_matrix t({a.extent(1), a.extent(0)});
  for (std::size_t i = 0; i < a.extent(0); ++i)
    for (std::size_t j = 0; j < a.extent(1); ++j) t(j, i) = a(i, j);
  return t;
}

// One SGD step of the serial model (forward, backward, update); returns the loss before it.
double serial_step(std::vector<host_layer>& params, const host_matrix& inputs,
                   const host_matrix& targets, float step_size) {
  const std::size_t batch = inputs.extent(0), layers = params.size();
  std::vector<host_matrix> a{inputs}, z;  // a[l]: the input of layer l; z[l]: its output
  for (std::size_t l = 0; l < layers; ++l) {
    host_matrix out = host_matmul(a[l], params[l].w);
    for (std::size_t i = 0; i < batch; ++i)
      for (std::size_t j = 0; j < out.extent(1); ++j) out(i, j) += params[l].b(j);
    z.push_back(out);
    if (l + 1 < layers) {
      for (float& v : out.values()) v = v < 0.0f ? 0.0f : v;
      a.push_back(std::move(out));
    }
  }
  // loss = mean over the batch of the sum over outputs of (prediction - target)^2
  host_matrix d = z.back();
  double total = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    const float e = d.data()[i] - targets.data()[i];
    total += double(e) * double(e);
    d.data()[i] = e * (2.0f / float(batch));  // d loss / d prediction
  }
  for (std::size_t l = layers; l-- > 0;) {
    if (l + 1 < layers)  // through the relu: zero where the layer's output was not positive
      for (std::size_t i = 0; i < d.size(); ++i)
        if (!(z[l].data()[i] > 0.0f)) d.data()[i] = 0.0f;
    const host_matrix dw = host_matmul(host_transpose(a[l]), d);
    host_vector db({d.extent(1)});
    for (std::size_t i = 0; i < batch; ++i)
      for (std::size_t j = 0; j < d.extent(1); ++j) db(j) += d(i, j);
    if (l > 0) d = host_matmul(d, host_transpose(params[l].w));
    for (std::size_t i = 0; i < dw.size(); ++i) params[l].w.data()[i] -= step_size * dw.data()[i];
    for (std::size_t j = 0; j < db.size(); ++j) params[l].b.data()[j] -= step_size * db.data()[j];
  }
  return total / double(batch);
}

// ---- the distributed MLP: global-view operations, collectives chosen by the plans ------------

// The helpers this section once wrote by hand inside ts::shard_map (transpose, the bias add,
// the column sums and the sum of squared errors: 73 lines; the file went from 766 to 707
// lines) are now global-view ops: ts::transpose, `z + b` (NumPy broadcasting), ts::sum and
// ts::map. sum_of_squared_errors stays, as the loss's name.

// sum((p - t)^2) over the whole array, in double: local sums, then (the output spec names the
// result replicated) a psum over every axis the arrays are sharded over. Returns the
// replicated rank-0 array (a scalar).
// (The element functions are objects at namespace scope, not lambdas in the templates: a
// lambda's type would differ per array type, and so would the loops it instantiates.)
inline constexpr auto square_in_double = [](float e) { return double(e) * double(e); };
template <class P, class T>
auto sum_of_squared_errors(const P& p, const T& t) {
  const auto squares = ts::map(p - t, square_in_double);
  return ts::sum<ts::spec<>>(squares);
}

// The MLP's parameters as one tree (ops/tree.hpp), JAX's `params`: a struct of four layers,
// each a struct of its weight and bias. Both are Hana struct templates over their members'
// types, in order, so that ts::value_and_grad(loss)(params, ...) returns the gradients as the
// same structs over the gradients' types, and ts::sgd_update walks the tree leaf by leaf.
template <class W, class B>
struct layer {
  BOOST_HANA_DEFINE_STRUCT(layer, (W, w), (B, b));
};
template <class W, class B>
layer(W, B) -> layer<W, B>;

template <class L1, class L2, class L3, class L4>
struct mlp {
  BOOST_HANA_DEFINE_STRUCT(mlp, (L1, l1), (L2, l2), (L3, l3), (L4, l4));
};
template <class L1, class L2, class L3, class L4>
mlp(L1, L2, L3, L4) -> mlp<L1, L2, L3, L4>;

// A model's layers in order, as a std::tuple of references (const as the model): the
// hand-written backward pass walks them by index.
template <class Model>
auto layers(Model& model) {
  return std::tie(model.l1, model.l2, model.l3, model.l4);
}

// init_model's layer [n_in, n_out] on a mesh, W sharded by WSpec and b as W's columns:
// W ~ N(0, 1) / sqrt(n_in), b ~ N(0, 1), drawn with ts::random from key k (W with the first of
// split(k), b with the second). Each device draws only its own shard, and the values depend on
// k only, not on the mesh or the spec: every mesh below starts from the same parameters.
template <class WSpec, class Mesh>
auto init_layer(ts::random::prng_key k, const ts::device_mesh<Mesh>& m, std::size_t n_in,
                std::size_t n_out) {
  const auto [kw, kb] = ts::random::split(k);
  return layer{ts::random::normal<WSpec>(kw, m, ts::shape<2>{n_in, n_out}) *
                   (1.0f / std::sqrt(static_cast<float>(n_in))),
               ts::random::normal<ts::spec<WSpec::dim(1)>>(kb, m, ts::shape<1>{n_out})};
}

// init_model(key, layer_sizes) on a mesh: the four layers, with the specs of W1 ... W4.
template <class S1, class S2, class S3, class S4, class Mesh>
auto init_model(ts::random::prng_key key, const ts::device_mesh<Mesh>& m,
                const std::vector<std::size_t>& sizes) {
  const auto k = ts::random::split<4>(key);
  return mlp{init_layer<S1>(k[0], m, sizes[0], sizes[1]),
             init_layer<S2>(k[1], m, sizes[1], sizes[2]),
             init_layer<S3>(k[2], m, sizes[2], sizes[3]),
             init_layer<S4>(k[3], m, sizes[3], sizes[4])};
}

// g where the layer's output v was positive, else 0: the gradient through relu.
inline constexpr auto relu_derivative = [](float g, float v) { return v > 0.0f ? g : 0.0f; };

// doc-snippet: backprop
// Layer I of the MLP, forward and backward: computes z = in @ W + b, hands relu(z) to layer
// I + 1 (the last layer's z is the prediction: the loss and its gradient start there), and
// on the way back writes the SGD-updated W and b of layer I into `next` and returns the
// gradient with respect to `in`. Each matmul names its output sharding (the rows as `in`'s,
// the columns as the weight's), so the plan reduces partial sums where the contraction is
// sharded: the data-parallel gradients' all-reduce, the tensor-parallel layer's psum. With
// `explain`, prints each matmul's plan.
template <std::size_t I, class Params, class In, class Targets>
auto backprop(const Params& params, const In& in, const Targets& targets, Params& next,
              float step_size, double& loss, bool explain) {
  const auto& W = std::get<I>(layers(params)).w;
  const auto& b = std::get<I>(layers(params)).b;
  using W_t = std::remove_cvref_t<decltype(W)>;
  using rows = typename In::spec;  // the batch's sharding is rows::dim(0)
  using z_spec = ts::spec<rows::dim(0), W_t::spec::dim(1)>;
  const auto z = ts::matmul<z_spec>(in, W) + b;  // b broadcast over the rows
  if (explain)
    std::cout << "  layer " << I + 1
              << ", z = a @ W:    " << ts::matmul_plan_for<In, W_t, z_spec>::describe() << "\n";

  const auto dz = [&] {
    if constexpr (I + 1 == std::tuple_size_v<decltype(layers(params))>) {
      const float batch = static_cast<float>(in.extent(0));
      loss = sum_of_squared_errors(z, targets).item() / batch;
      return (z - targets) * (2.0f / batch);  // d loss / d prediction
    } else {
      const auto da = backprop<I + 1>(params, ts::relu(z), targets, next, step_size, loss, explain);
      return ts::zip(da, z, relu_derivative);  // relu'
    }
  }();
  using dz_t = std::remove_cvref_t<decltype(dz)>;
  const auto dW = ts::matmul<typename W_t::spec>(ts::transpose(in), dz);
  // The sum over the batch, sharded as the columns: the data-parallel all-reduce.
  const auto db = ts::sum<ts::spec<dz_t::spec::dim(1)>, 0>(dz);
  std::get<I>(layers(next)) = layer{W - dW * step_size, b - db * step_size};
  if (explain)
    std::cout << "  layer " << I + 1 << ", dW = a.T @ dz: "
              << ts::matmul_plan_for<decltype(ts::transpose(in)), dz_t, typename W_t::spec>::describe()
              << "\n";
  if constexpr (I > 0) {
    using da_spec = ts::spec<rows::dim(0), W_t::spec::dim(0)>;
    if (explain)
      std::cout << "  layer " << I + 1 << ", da = dz @ W.T: "
                << ts::matmul_plan_for<dz_t, decltype(ts::transpose(W)), da_spec>::describe() << "\n";
    return ts::matmul<da_spec>(dz, ts::transpose(W));
  } else {
    return 0;  // the inputs need no gradient
  }
}
// doc-snippet-end

// The loss only (the notebook's loss_jit): the forward pass of backprop.
template <std::size_t I, class Params, class In, class Targets>
double loss_of(const Params& params, const In& in, const Targets& targets) {
  const auto& W = std::get<I>(layers(params)).w;
  const auto& b = std::get<I>(layers(params)).b;
  using W_t = std::remove_cvref_t<decltype(W)>;
  const auto z = ts::matmul<ts::spec<In::spec::dim(0), W_t::spec::dim(1)>>(in, W) + b;
  if constexpr (I + 1 == std::tuple_size_v<decltype(layers(params))>)
    return sum_of_squared_errors(z, targets).item() / double(in.extent(0));
  else
    return loss_of<I + 1>(params, ts::relu(z), targets);
}

// Trains `params` for `steps` SGD steps; returns the loss before each step and after the last.
// The first step prints the plan of every matmul.
template <class Params, class Batch>
std::vector<double> train(Params& params, const Batch& inputs, const Batch& targets,
                          std::size_t steps, float step_size) {
  std::vector<double> losses;
  std::cout << "the matmuls of one step and their plans:\n";
  for (std::size_t s = 0; s < steps; ++s) {
    Params next = params;  // shares the shards; backprop replaces every layer
    double loss = 0;
    backprop<0>(params, inputs, targets, next, step_size, loss, s == 0);
    params = std::move(next);
    losses.push_back(loss);
  }
  losses.push_back(loss_of<0>(params, inputs, targets));
  return losses;
}

// doc-snippet: value_and_grad
// The same MLP and loss written once, forward only, over the parameter tree (JAX's
// `loss(params, batch)`): each layer's product names its output sharding as backprop's does
// (the rows as the input's, the columns as the weight's); the loss is the summed squared error
// over the batch, divided by its size. value_and_grad records each op's backward and runs the
// transposed ops, planned at compile time like the forward ones.
inline constexpr auto mlp_loss = [](const auto& params, const auto& x, const auto& t) {
  auto dense = [](const auto& a, const auto& l) {
    using A = std::remove_cvref_t<decltype(a)>;
    using W = std::remove_cvref_t<decltype(l.w)>;
    return ts::matmul<ts::spec<A::spec::dim(0), W::spec::dim(1)>>(a, l.w) + l.b;
  };
  const auto a1 = ts::relu(dense(x, params.l1));
  const auto a2 = ts::relu(dense(a1, params.l2));
  const auto a3 = ts::relu(dense(a2, params.l3));
  const auto e = dense(a3, params.l4) - t;
  return ts::sum<ts::spec<>>(e * e) / static_cast<float>(x.extent(0));
};

// Trains with ts::value_and_grad, as train() does by hand: jax.value_and_grad(loss)(params,
// x, t), the gradients an mlp of layers like params. Each gradient has its parameter's spec
// and is unreduced over the axes the backward contracted (the batch's): its type says so, and
// ts::sgd_update reduces it to its parameter's spec (DDP's all-reduce) in the update's pass.
// The first step prints two gradients' types.
template <class Params, class Batch>
std::vector<double> train_with_grad(Params& params, const Batch& inputs, const Batch& targets,
                                    std::size_t steps, float step_size, bool eager) {
  // One step: the loss, the gradients and the updated parameters. ts::jit runs it as one
  // program per device (jax.jit); --eager runs it op by op. The results are the same bits.
  const auto step = [step_size](const auto& p, const auto& x, const auto& t) {
    auto [loss, grads] = ts::value_and_grad(mlp_loss)(p, x, t);
    auto next = ts::sgd_update(p, grads, step_size);  // w - step_size * g, leaf by leaf
    return std::tuple(loss, grads, next);
  };
  const auto compiled = ts::jit(step);
  std::vector<double> losses;
  for (std::size_t s = 0; s < steps; ++s) {
    auto [loss, grads, next] =
        eager ? step(params, inputs, targets) : compiled(params, inputs, targets);
    if (s == 0) {
      using dW1 = std::remove_cvref_t<decltype(grads.l1.w)>;
      using dW2 = std::remove_cvref_t<decltype(grads.l2.w)>;
      static_assert(std::is_same_v<typename dW2::spec, typename decltype(params.l2.w)::spec>);
      std::cout << "  dW1: " << dW1::sharding_string() << ", unreduced "
                << dW1::unreduced_type::to_string() << "\n  dW2: " << dW2::sharding_string()
                << ", unreduced " << dW2::unreduced_type::to_string() << "\n";
    }
    losses.push_back(loss.item());
    params = std::move(next);
  }
  losses.push_back(loss_of<0>(params, inputs, targets));
  return losses;
}
// doc-snippet-end

// The largest relative difference between two runs' losses, step by step.
double largest_loss_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (std::size_t s = 0; s < a.size() && s < b.size(); ++s)
    worst = std::max(worst, std::abs(a[s] - b[s]) / std::abs(b[s]));
  return worst;
}

// Whether the layers on a mesh hold exactly the serial run's parameters h.
template <class Params>
bool equal_parameters(const Params& params, const std::vector<host_layer>& h) {
  bool same = true;
  std::size_t i = 0;
  std::apply(
      [&](const auto&... l) {
        ((same = same && ts::to_host(l.w) == h[i].w && ts::to_host(l.b) == h[i].b, ++i), ...);
      },
      layers(params));
  return same;
}

// Compares a distributed run with the serial one: loss by loss, then the final weights.
template <class Params>
void compare_runs(const std::string& what, const std::vector<double>& losses,
                  const std::vector<double>& serial_losses, const Params& params,
                  const std::vector<host_layer>& serial_params, double tolerance) {
  double worst = 0;
  for (std::size_t s = 0; s < losses.size(); ++s)
    worst = std::max(worst, std::abs(losses[s] - serial_losses[s]) / std::abs(serial_losses[s]));
  double worst_w = 0;
  std::apply(
      [&](const auto&... l) {
        std::size_t i = 0;
        ((worst_w =
              std::max({worst_w, examples::max_relative_error(ts::to_host(l.w), serial_params[i].w),
                        examples::max_relative_error(ts::to_host(l.b), serial_params[i].b)}),
          ++i),
         ...);
      },
      layers(params));
  std::cout << what << ": loss " << losses.front() << " -> " << losses.back() << "; largest "
            << "relative difference from the serial run: loss " << worst << " (over "
            << losses.size() << " evaluations), parameters " << worst_w << " (tolerance "
            << tolerance << ")\n";
  check(losses.back() < losses.front(), what + ": the loss did not fall");
  check(worst <= tolerance, what + ": the losses differ from the serial run's");
  check(worst_w <= tolerance, what + ": the trained parameters differ from the serial run's");
}

}  // namespace

int main(int argc, char** argv) {
  const examples::options opts = examples::parse_options(
      argc, argv,
      "the notebook's sizes: x of 8192 x 8192, MLP [784, 8192, 8192, 8192, 10], batch 8192, "
      "step 1e-5 (hours on two cores, an estimated 12-16 GB of memory)");
  if (opts.exit >= 0) return opts.exit;

  ts::cpu_devices devices{8};  // the backend: XLA_FLAGS=--xla_force_host_platform_device_count=8

  const std::size_t N = opts.large ? 8192 : 512;
  std::mt19937 rng(0);
  const host_matrix x = normal(N, N, rng);  // jax.random.normal(jax.random.PRNGKey(0), (N, N))

  // The positional mesh (see the top of this file): device k at coordinates k's bits.
  using positional = ts::mesh<ts::axis("d0", 2), ts::axis("d1", 2), ts::axis("d2", 2)>;
  const ts::device_mesh<positional> pmesh{devices};
  using pos_8 = ts::spec<ts::axes("d0", "d1", "d2")>;              // sharding, shape (8,)
  using pos_8x1 = ts::spec<ts::axes("d0", "d1", "d2"), ts::none>;  // .reshape(8, 1)
  using pos_4x2 = ts::spec<ts::axes("d0", "d1"), "d2">;            // .reshape(4, 2)
  using pos_2x4 = ts::spec<"d0", ts::axes("d1", "d2")>;            // .reshape(2, 4)
  using pos_1x8 = ts::spec<ts::none, ts::axes("d0", "d1", "d2")>;  // .reshape(1, 8)
  using pos_4x2_rep0 = ts::spec<ts::none, "d2">;                   // .reshape(4, 2).replicate(0)
  using pos_4x2_rep1 = ts::spec<ts::axes("d0", "d1"), ts::none>;   // .reshape(4, 2).replicate(1)
  using pos_rep = ts::spec<ts::none, ts::none>;                    // .replicate()

  // ---- 1 ---------------------------------------------------------------------------------
  section("1", "Sharding basics, and PositionalSharding");
  using mesh_1 = ts::mesh<ts::axis("d", 1)>;
  const ts::device_mesh<mesh_1> device0{devices, {0}};  // jax.devices()[0]
  const auto x_single = ts::device_put<ts::spec<ts::none, ts::none>>(device0, x);
  std::cout << "x: " << ts::to_string(x.extents()) << " on one device\n";
  ts::visualize(x_single);

  const auto y0 = put_and_show<pos_4x2>("y = jax.device_put(x, sharding.reshape(4, 2))", pmesh, x,
                                        4, 2, reshaped<2>);
  {
    const auto z = ts::sin(y0);  // the sharding is preserved
    static_assert(std::is_same_v<decltype(z)::spec, decltype(y0)::spec>);
    std::cout << "\nz = jnp.sin(y)\n";
    ts::visualize(z);
    host_matrix sin_x = x;
    for (float& v : sin_x.values()) v = std::sin(v);
    check(ts::to_host(z) == sin_x, "sin(y) differs from the serial sin(x)");
    const double t_single = examples::median_ms(5, [&] { (void)ts::sin(x_single); });
    const double t_sharded = examples::median_ms(5, [&] { (void)ts::sin(y0); });
    std::cout << "jnp.sin(x) on one device: " << t_single
              << " ms; jnp.sin(y) on 8 devices: " << t_sharded
              << " ms (median of 5; the speed-up is bounded by the cores)\n";
  }

  std::cout << "\nsharding = PositionalSharding(devices)\n"
            << positional_string<pos_8>(pmesh) << "\n";
  put_and_show<pos_8x1>("x = jax.device_put(x, sharding.reshape(8, 1))", pmesh, x, 8, 1,
                        reshaped<1>);
  std::cout << "\nsharding.reshape(8, 1)\n" << positional_string<pos_8x1>(pmesh) << "\n";
  std::cout << "\nsharding.reshape(4, 2)\n" << positional_string<pos_4x2>(pmesh) << "\n";
  put_and_show<pos_4x2>("y = jax.device_put(x, sharding.reshape(4, 2))", pmesh, x, 4, 2,
                        reshaped<2>);
  std::cout << "\nsharding.reshape(1, 8)\n" << positional_string<pos_1x8>(pmesh) << "\n";
  put_and_show<pos_1x8>("y = jax.device_put(x, sharding.reshape(1, 8))", pmesh, x, 1, 8,
                        reshaped<8>);
  std::cout << "\nsharding.reshape(4, 2).replicate(axis=0, keepdims=True)\n"
            << positional_string<pos_4x2_rep0>(pmesh) << "\n";
  put_and_show<pos_4x2_rep0>("y = jax.device_put(x, sharding.replicate(axis=0, keepdims=True))",
                             pmesh, x, 1, 2, [](ts::device_id d) {
                               return cell{0, d % 2};
                             });
  {
    // replicate(0) and replicate(1) of the (4, 2) sharding: the shapes of their device grids.
    using L0 = ts::layout<positional, pos_4x2_rep0, 2>;
    using L1 = ts::layout<positional, pos_4x2_rep1, 2>;
    std::cout << "\nsharding.replicate(0).shape: (" << L0::shards_along(0) << ", "
              << L0::shards_along(1) << ")\nsharding.replicate(1).shape: (" << L1::shards_along(0)
              << ", " << L1::shards_along(1) << ")\n";
    static_assert(L0::shards_along(0) == 1 && L0::shards_along(1) == 2 &&
                  L1::shards_along(0) == 4 && L1::shards_along(1) == 1);
  }
  put_and_show<pos_4x2_rep1>("y = jax.device_put(x, sharding.replicate(1))", pmesh, x, 4, 1,
                             [](ts::device_id d) {
                               return cell{d / 2, 0};
                             });

  // ---- 2 ---------------------------------------------------------------------------------
  section("2", "NamedSharding gives a way to express shardings with names");
  {
    // doc-snippet: named_sharding
    using mesh_4x2 = ts::mesh<ts::axis("a", 4), ts::axis("b", 2)>;
    const ts::device_mesh<mesh_4x2> mesh{
        devices};  // maps.Mesh(create_device_mesh((4, 2)), ('a', 'b'))
    // doc-snippet-end
    // device d has coordinates a = d / 2, b = d % 2
    put_and_show<ts::spec<"a", "b">>("P('a', 'b')", mesh, x, 4, 2, [](ts::device_id d) {
      return cell{d / 2, d % 2};
    });
    put_and_show<ts::spec<"b", "a">>("P('b', 'a')", mesh, x, 2, 4, [](ts::device_id d) {
      return cell{d % 2, d / 2};
    });
    put_and_show<ts::spec<"a", ts::none>>("P('a', None)", mesh, x, 4, 1, [](ts::device_id d) {
      return cell{d / 2, 0};
    });
    put_and_show<ts::spec<ts::none, "b">>("P(None, 'b')", mesh, x, 1, 2, [](ts::device_id d) {
      return cell{0, d % 2};
    });
    put_and_show<ts::spec<ts::none, "a">>("P(None, 'a')", mesh, x, 1, 4, [](ts::device_id d) {
      return cell{0, d / 2};
    });
    put_and_show<ts::spec<ts::axes("a", "b"), ts::none>>("P(('a', 'b'), None)", mesh, x, 8, 1,
                                                         [](ts::device_id d) {
                                                           return cell{d, 0};
                                                         });
  }

  // ---- 3 ---------------------------------------------------------------------------------
  section("3", "Computation follows data sharding and is automatically parallelized");
  const host_matrix x_dot_x = host_matmul(x, x);  // jnp.dot(x_single, x_single), serially
  {
    // doc-snippet: computation_follows_sharding
    const auto y = ts::device_put<pos_4x2_rep1>(pmesh, x);  // sharding.reshape(4, 2).replicate(1)
    const auto z = ts::device_put<pos_4x2_rep0>(pmesh, x);  // sharding.reshape(4, 2).replicate(0)
    const auto w = ts::matmul(y, z);                        // jnp.dot(y, z)
    using plan = ts::matmul_plan_for<decltype(y), decltype(z)>;
    static_assert(ts::communication_free<plan>);  // each device has what it needs
    static_assert(std::is_same_v<decltype(w)::spec, pos_4x2>);
    // doc-snippet-end
    std::cout << "lhs sharding:\n";
    ts::visualize(y);
    std::cout << "rhs sharding:\n";
    ts::visualize(z);
    std::cout << "out sharding (plan: " << plan::describe() << "):\n";
    ts::visualize(w);
    const bool close = same_values(ts::to_host(w), x_dot_x, 1e-4);
    std::cout << "np.allclose(jnp.dot(x_single, x_single), jnp.dot(y, z)): "
              << (close ? "True" : "False") << "\n";
    check(close, "jnp.dot(y, z) differs from the serial product");

    const std::size_t runs = opts.large ? 1 : 3;  // one 8192^3 product is minutes here
    const double t_single =
        examples::median_ms(runs, [&] { (void)ts::matmul(x_single, x_single); });
    const double t_sharded = examples::median_ms(runs, [&] { (void)ts::matmul(y, z); });
    std::cout << "jnp.dot(x_single, x_single): " << t_single << " ms; jnp.dot(y, z): " << t_sharded
              << " ms (median of " << runs << ")\n";

    // Even copying keeps the sharding: w_copy = jnp.copy(w).
    const auto w_copy = ts::map(w, [](float v) { return v; });
    static_assert(std::is_same_v<decltype(w_copy)::spec, decltype(w)::spec>);
    std::cout << "w_copy = jnp.copy(w)\n";
    ts::visualize(w_copy);
    check(ts::to_host(w_copy) == ts::to_host(w), "the copy differs from w");
  }

  // ---- 4 ---------------------------------------------------------------------------------
  section("4", "When explicit shardings disagree, typeshard throws");
  {
    // An operation between arrays on different devices would have to pick where to run and
    // move data silently; like JAX, typeshard refuses and says so.
    const auto expect_error = [](const std::string& what, auto&& op) {
      try {
        op();
        check(false, what + ": no exception");
      } catch (const ts::device_mesh_error& e) {
        const std::string msg = e.what();
        std::cout << "device_mesh_error: " << msg << "\n";
        check(msg.rfind("typeshard: ", 0) == 0,
              what + ": the message does not start with 'typeshard: '");
      }
    };

    // doc-snippet: device_mismatch
    // sharding1 = PositionalSharding(jax.devices()[:4]); sharding2 = ...[4:]; reshape(2, 2)
    using mesh_2x2 = ts::mesh<ts::axis("d0", 2), ts::axis("d1", 2)>;
    const ts::device_mesh<mesh_2x2> first_half{devices, {0, 1, 2, 3}};
    const ts::device_mesh<mesh_2x2> second_half{devices, {4, 5, 6, 7}};
    const auto y = ts::device_put<ts::spec<"d0", "d1">>(first_half, x);
    const auto z = ts::device_put<ts::spec<"d0", "d1">>(second_half, x);
    expect_error("y + z on different device sets", [&] { (void)(y + z); });

    // The same devices in another order: permuted_devices = [0, 1, 2, 3, 6, 7, 4, 5].
    const ts::device_mesh<positional> permuted{devices, {0, 1, 2, 3, 6, 7, 4, 5}};
    const auto y2 = ts::device_put<pos_4x2>(pmesh, x);
    const auto z2 = ts::device_put<pos_4x2>(permuted, x);
    expect_error("y + z on permuted devices", [&] { (void)(y2 + z2); });

    // The fix the message names (JAX's jax.device_put(z, y.sharding)): move one operand onto
    // the other's devices first.
    const auto sum = y + ts::device_put(z, first_half);
    std::cout << "y + ts::device_put(z, first_half): on " << sum.device_mesh().to_string() << "\n";
    // doc-snippet-end

    // JAX's uncommitted arrays (jnp.ones_like(y), jnp.arange(y.size).reshape(y.shape)) can meet
    // y because JAX moves them; every typeshard array is placed, so one makes them on y's
    // device mesh. Moving an array onto a reordering of its devices is ts::reshard's job (one
    // permute); between different device sets, go through to_host and device_put.
    const auto ones = ts::device_put<pos_4x2>(y2.device_mesh(), host_matrix({N, N}, 1.0f));
    host_matrix iota({N, N});
    for (std::size_t i = 0; i < iota.size(); ++i) iota.data()[i] = static_cast<float>(i);
    const auto arange = ts::device_put<pos_4x2>(y2.device_mesh(), iota);
    (void)(y2 + ones);
    (void)(y2 + arange);
    const auto z2_moved = ts::reshard<pos_4x2>(z2, y2.device_mesh());
    const auto twice = ts::to_host(y2 + z2_moved);
    host_matrix x2 = x;
    for (float& v : x2.values()) v += v;
    check(twice == x2, "y + reshard(z, y's devices) differs from 2 x");
    std::cout << "y + ones_like(y), y + arange(y.size).reshape(y.shape), y + reshard(z, y's "
                 "device mesh): no error!\n";
  }

  // ---- 5 ---------------------------------------------------------------------------------
  section("5", "Constraining shardings of intermediates: with_sharding_constraint");
  {
    const auto xs =
        ts::device_put<pos_4x2>(pmesh, x);  // x = jax.device_put(x, sharding.reshape(4, 2))
    host_matrix x_plus_1 = x;
    for (float& v : x_plus_1.values()) v += 1.0f;

    // doc-snippet: with_sharding_constraint
    // @jax.jit def f(x): x = x + 1; return jax.lax.with_sharding_constraint(x, sharding.reshape(2,
    // 4))
    const auto f = [](const auto& in) {
      const auto x1 = ts::map(in, [](float v) { return v + 1.0f; });
      return ts::reshard<pos_2x4>(x1);
    };
    // doc-snippet-end
    ts::visualize(xs);
    const auto y = f(xs);
    ts::visualize(y);
    std::cout << ts::reshard_plan_for<decltype(xs), pos_2x4>::describe();
    check(ts::to_host(y) == x_plus_1, "f(x) with the (2, 4) constraint differs from x + 1");

    const auto g = [](const auto& in) {  // ... with_sharding_constraint(x, sharding.replicate())
      return ts::reshard<pos_rep>(ts::map(in, [](float v) { return v + 1.0f; }));
    };
    const auto y_rep = g(xs);
    ts::visualize(y_rep);
    std::cout << ts::reshard_plan_for<decltype(xs), pos_rep>::describe();
    check(ts::to_host(y_rep) == x_plus_1, "f(x) with the replicated constraint differs from x + 1");
  }

  // ---- 6 ---------------------------------------------------------------------------------
  section("6", "Neural networks: the MLP, trained data parallel and data + tensor parallel");
  const std::size_t hidden = opts.large ? 8192 : 256;
  const std::size_t batch_size = opts.large ? 8192 : 256;
  const std::vector<std::size_t> layer_sizes{784, hidden, hidden, hidden, 10};
  const float step_size = 1e-5f * (8192.0f / static_cast<float>(hidden));
  constexpr std::size_t steps = 30;
  // Float sums in another order (blocked GEMMs, sums over shards) drift apart by a few ulps per
  // step; 30 steps stay far below this.
  const double tolerance = 1e-4;

  // init_model(PRNGKey(0), layer_sizes): drawn on each mesh with ts::random (init_model above);
  // the serial run's copy is the same draw on one device, brought to the host.
  const ts::random::prng_key init_key = ts::random::key(0);
  std::vector<host_layer> params_host;
  {
    using mesh_1 = ts::mesh<ts::axis("one", 1)>;
    using P1 = ts::spec<ts::none, ts::none>;
    const ts::device_mesh<mesh_1> one{devices, {0}};
    const auto to_host = [&](const auto&... l) {
      (params_host.push_back({ts::to_host(l.w), ts::to_host(l.b)}), ...);
    };
    const auto model = init_model<P1, P1, P1, P1>(init_key, one, layer_sizes);
    std::apply(to_host, layers(model));
  }
  std::mt19937 data_rng(0);  // the batch (the notebook draws it from the same key)
  const host_matrix inputs = normal(batch_size, layer_sizes.front(), data_rng);
  const host_matrix targets = normal(batch_size, layer_sizes.back(), data_rng);
  std::cout << "layer sizes [784, " << hidden << ", " << hidden << ", " << hidden << ", 10], batch "
            << batch_size << ", step size " << step_size << ", " << steps << " steps\n";

  // The serial run, which both distributed runs must follow step by step.
  std::vector<host_layer> serial_params = params_host;
  std::vector<double> serial_losses;
  const double serial_ms = examples::median_ms(1, [&] {
    for (std::size_t s = 0; s < steps; ++s)
      serial_losses.push_back(serial_step(serial_params, inputs, targets, step_size));
  });
  {
    std::vector<host_layer> probe = serial_params;  // the loss after the last step
    serial_losses.push_back(serial_step(probe, inputs, targets, step_size));
  }
  std::cout << "serial run: loss " << serial_losses.front() << " -> " << serial_losses.back()
            << ", " << serial_ms / steps << " ms per step\n";

  // The same training through ts::value_and_grad: it must follow the serial run, and the
  // hand-written backward pass (`by_hand`, its losses), step by step.
  auto train_through_value_and_grad = [&](const std::string& what, auto& params, const auto& x,
                                          const auto& t, const std::vector<double>& by_hand) {
    std::cout << "the same training through ts::value_and_grad; the gradients' types:\n";
    std::vector<double> losses;
    const double ms = examples::median_ms(
        1, [&] { losses = train_with_grad(params, x, t, steps, step_size, opts.eager); });
    const double apart = largest_loss_difference(losses, by_hand);
    std::cout << "after " << steps << " steps: loss " << losses.back() << " (" << ms / steps
              << " ms per step); largest relative difference from the hand-written backward "
              << "pass's losses: " << apart << "\n";
    check(apart <= tolerance, what + ", ts::value_and_grad: the losses differ from the "
                                     "hand-written backward pass's");
    compare_runs(what + ", ts::value_and_grad", losses, serial_losses, params, serial_params,
                 tolerance);
  };

  {
    // doc-snippet: data_parallel
    // sharding = PositionalSharding(jax.devices()).reshape(8, 1): the batch over 8 devices,
    // the parameters replicated (sharding.replicate()).
    using mesh_8 = ts::mesh<ts::axis("batch", 8)>;
    const ts::device_mesh<mesh_8> mesh{devices};
    using P_batch = ts::spec<"batch", ts::none>;
    using P_rep = ts::spec<ts::none, ts::none>;
    const auto x_batch = ts::device_put<P_batch>(mesh, inputs);
    const auto t_batch = ts::device_put<P_batch>(mesh, targets);
    auto params = init_model<P_rep, P_rep, P_rep, P_rep>(init_key, mesh, layer_sizes);
    // doc-snippet-end
    check(equal_parameters(params, params_host), "8-way: ts::random drew other parameters");
    std::cout << "\n8-way batch data parallelism: inputs " << x_batch.sharding_string()
              << ", parameters replicated\n";
    std::cout << "loss_jit(params, batch) = " << loss_of<0>(params, x_batch, t_batch) << "\n";
    // The gradient of a replicated weight contracts over the batch, sharded in both operands:
    // the local products are partial sums, and the plans all-reduce them (psum over batch).
    auto params_g = params;  // for the ts::value_and_grad run (shares the shards)
    std::vector<double> losses;
    const double ms =
        examples::median_ms(1, [&] { losses = train(params, x_batch, t_batch, steps, step_size); });
    std::cout << "after " << steps << " steps: loss_jit(params, batch) = " << losses.back() << " ("
              << ms / steps << " ms per step)\n";
    compare_runs("8-way data parallel", losses, serial_losses, params, serial_params, tolerance);
    train_through_value_and_grad("8-way data parallel", params_g, x_batch, t_batch, losses);
  }
  {
    // doc-snippet: tensor_parallel
    // sharding = sharding.reshape(4, 2): batch = device_put(batch, sharding.replicate(1)), the
    // batch over the 4-way axis; W1, b1, W4, b4 replicated; W2 (and b2) over the 2-way axis by
    // columns (replicate(0)), W3 by rows (replicate(0).T).
    using mesh_4x2 = ts::mesh<ts::axis("batch", 4), ts::axis("model", 2)>;
    const ts::device_mesh<mesh_4x2> mesh{devices};
    using P_batch = ts::spec<"batch", ts::none>;
    using P_rep = ts::spec<ts::none, ts::none>;
    using P_cols = ts::spec<ts::none, "model">;
    using P_rows = ts::spec<"model", ts::none>;
    const auto x_batch = ts::device_put<P_batch>(mesh, inputs);
    const auto t_batch = ts::device_put<P_batch>(mesh, targets);
    auto params = init_model<P_rep, P_cols, P_rows, P_rep>(init_key, mesh, layer_sizes);
    // doc-snippet-end
    check(equal_parameters(params, params_host), "4 x 2: ts::random drew other parameters");
    std::cout << "\n4-way batch data parallelism and 2-way model tensor parallelism\nbatch[0]:\n";
    ts::visualize(x_batch);
    std::cout << "W2:\n";
    ts::visualize(params.l2.w);
    std::cout << "W3:\n";
    ts::visualize(params.l3.w);
    std::cout << "loss_jit(params, batch) = " << loss_of<0>(params, x_batch, t_batch) << "\n";
    // Layer 2 is local (W2's columns give z2's); layer 3 contracts over the model axis (a2's
    // columns, W3's rows): a psum, as are the gradients of the weights sharded over it.
    auto params_g = params;  // for the ts::value_and_grad run (shares the shards)
    std::vector<double> losses;
    const double ms =
        examples::median_ms(1, [&] { losses = train(params, x_batch, t_batch, steps, step_size); });
    std::cout << "after " << steps << " steps: loss_jit(params, batch) = " << losses.back() << " ("
              << ms / steps << " ms per step)\nW2, W3 after training:\n";
    ts::visualize(params.l2.w);
    ts::visualize(params.l3.w);
    compare_runs("4-way data x 2-way tensor parallel", losses, serial_losses, params, serial_params,
                 tolerance);
    train_through_value_and_grad("4-way data x 2-way tensor parallel", params_g, x_batch, t_batch,
                                 losses);
  }

  return check.exit_code("seed002");
}
