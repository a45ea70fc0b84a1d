// typeshard/ops/grad.hpp: ts::value_and_grad and ts::grad (rule 9), JAX's
// jax.value_and_grad(f, argnums=) with every gradient's sharding in its type.
//
//   auto loss = [](auto w1, auto w2, auto x, auto y) {
//     auto h = ts::relu(ts::matmul(x, w1));                 // x: spec<"data", none>
//     auto e = ts::matmul(h, w2) - y;
//     return ts::mean<>(e * e);                          // rank 0: a scalar loss
//   };
//   auto [l, g] = ts::value_and_grad<0, 1>(loss)(W1, W2, X, Y);   // g: std::tuple of 2
//   auto& dW1 = std::get<0>(g);     // W1's spec, unreduced<"data">: the batch is over "data"
//   auto W1n = W1 - ts::reshard<decltype(W1)::spec>(dW1) * lr;    // the all-reduce (DDP)
//   auto dW2 = ts::grad<1>(loss)(W1, W2, X, Y);          // one argnum: the gradient alone
//   for (auto& line : ts::backward_plans<0, 1>(loss)(W1, W2, X, Y)) std::cout << line;
//
// Argnums (default 0) name the differentiated arguments: each must be a fully reduced
// floating-point sharded_array; it reaches f as a ts::traced value (ops/traced.hpp), the
// other arguments as they are. f must return a rank-0 array (a scalar, what ts::sum<>(x)
// and ts::mean<>(x) give, as JAX's grad needs a scalar output) computed from them. With one
// argnum the gradient is returned alone, with several a std::tuple in argnum order (JAX:
// argnums=0 vs (0, 1)).
//
// Parameter trees (ops/tree.hpp): an argnum may name a tree of arrays (a Hana struct template,
// a std::tuple, a std::array, nested): each leaf is differentiated as an argnum of its own, f
// receives the tree rebuilt over traced leaves (p.w1 reads as on the parameters), and the
// gradient is the same kind of tree over the leaves' gradients:
//   auto [l, g] = ts::value_and_grad(loss)(params, X);        // g: mlp<dW1, db1, ...>
// has_aux: ts::value_and_grad(f, ts::has_aux): f returns (loss, aux); the call returns
// ((loss, aux), gradients), ts::grad(f, ts::has_aux) (gradients, aux), as JAX's has_aux.
//
// The gradient of argument i has its mesh, extents and spec, and is unreduced over the mesh
// axes its uses leave unreduced (plan/grad_plan.hpp: contracting or summing a dimension
// sharded over "data" that the parameter does not shard over): gradient_t tells the type.
// Reduce it in the type: ts::reshard to the replicated spec is an all-reduce (DDP), to a
// sharded spec a reduce-scatter (ZeRO); rule 3 keeps an unreduced gradient out of a
// non-linear update.
//
// Run time: f runs once (the forward values computed by the ordinary ops, each op recording
// its backward), then the backward runs the recorded ops' transposes in reverse order.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../array/sharded_array.hpp"
#include "../core/errors.hpp"
#include "../core/rules/rule9_gradients.hpp"
#include "../plan/grad_plan.hpp"
#include "detail/grad_arguments.hpp"
#include "detail/grad_flat_call.hpp"
#include "detail/grad_tape.hpp"
#include "traced.hpp"
#include "tree.hpp"

namespace typeshard {

// gradient_t<Param, Contributions, Argnum>: the type of argument Argnum's gradient when the
// loss's traced type lists Contributions.
template <class Param, class Contributions, std::size_t Argnum>
using gradient_t = detail::gradient_type<Param, Contributions, Argnum>;

// has_aux: ts::value_and_grad(f, ts::has_aux): f returns (loss, aux), a std::pair or a
// two-element std::tuple; aux comes back untouched (a traced aux as its value), JAX's has_aux.
struct has_aux_t {
  explicit constexpr has_aux_t() = default;
};
inline constexpr has_aux_t has_aux{};

namespace detail {

// The callable value_and_grad, grad and backward_plans return (Mode says which).
template <grad_mode Mode, bool Aux, class F, std::size_t... Argnums>
class grad_function {
 public:
  explicit grad_function(F f) : f_(std::move(f)) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    using arg_tuple = std::tuple<Args...>;
    constexpr std::size_t arity = sizeof...(Args);
    constexpr bool in_range = ((Argnums < arity) && ...);
    if constexpr (!in_range) {
      constexpr std::size_t bad = first_out_of_range<arity>();
      static_assert(require<false, diagnostic::grad_argnum_out_of_range<bad, arity>>::value);
      return 0;
    } else if constexpr (!distinct<Argnums...>()) {
      static_assert(require<false, diagnostic::grad_argnums_repeated<Argnums...>>::value);
      return 0;
    } else if constexpr ((parameter_tree<std::tuple_element_t<Argnums, arg_tuple>> || ...)) {
      return run_tree(args...);
    } else if constexpr (!(is_float_array<std::tuple_element_t<Argnums, arg_tuple>>() && ...)) {
      constexpr std::size_t bad = first_not_float<arg_tuple>();
      static_assert(require<false, diagnostic::grad_argnum_not_float_array<bad>>::value);
      return 0;
    } else {
      return run(std::index_sequence_for<Args...>{}, args...);
    }
  }

 private:
  template <std::size_t Arity>
  static constexpr std::size_t first_out_of_range() {
    std::size_t bad = 0;
    bool found = false;
    ((!found && Argnums >= Arity ? (bad = Argnums, found = true) : false), ...);
    return bad;
  }
  template <class Tuple>
  static constexpr std::size_t first_not_float() {
    std::size_t bad = 0;
    bool found = false;
    ((!found && !is_float_array<std::tuple_element_t<Argnums, Tuple>>()
          ? (bad = Argnums, found = true)
          : false),
     ...);
    return bad;
  }

  // A call with parameter trees: the flat call (every leaf an argnum), its gradients
  // regrouped into trees of the arguments' kinds.
  template <class... Args>
  auto run_tree(const Args&... args) const {
    using layout = flat_layout<std::tuple<Args...>, std::index_sequence_for<Args...>,
                               Argnums...>;
    constexpr std::size_t bad = layout::well_formed ? layout::bad_leaf() : 0;
    if constexpr (!layout::well_formed) {
      return 0;  // the struct's diagnostic fired
    } else if constexpr (bad != sizeof...(Args) * 65536) {
      static_assert(require<false, diagnostic::grad_tree_leaf_not_float_array<
                                       bad / 65536, bad % 65536>>::value);
      return 0;
    } else {
      return [&]<std::size_t... I>(std::index_sequence<I...>) {
        auto flat = std::tuple_cat(flat_part<layout::tree[I]>(args)...);
        using call = tree_call<F, layout, Args...>;
        return [&]<std::size_t... K>(std::index_sequence<K...>) {
          using inner = grad_function<Mode, Aux, call, layout::flat_argnums[K]...>;
          auto r = std::apply(inner(call{&f_}), flat);
          if constexpr (Mode == grad_mode::plans)
            return r;
          else if constexpr (Mode == grad_mode::grad && !Aux)
            return regroup_gradients<layout, Args...>(std::move(r));
          else if constexpr (Mode == grad_mode::grad)
            return std::make_pair(regroup_gradients<layout, Args...>(std::move(r.first)),
                                  std::move(r.second));
          else
            return std::make_pair(std::move(r.first),
                                  regroup_gradients<layout, Args...>(std::move(r.second)));
        }(std::make_index_sequence<layout::flat_count>{});
      }(std::index_sequence_for<Args...>{});
    }
  }

  // The flat call's gradients (one, or a tuple) as the trees (or arrays) of Argnums.
  template <class Layout, class... Args, class G>
  static auto regroup_gradients(G&& g) {
    auto all = [&] {
      if constexpr (Layout::flat_count == 1)
        return std::make_tuple(std::move(g));
      else
        return std::move(g);
    }();
    using arg_tuple = std::tuple<Args...>;
    constexpr std::array<std::size_t, sizeof...(Argnums)> argnum{Argnums...};
    auto one = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
      constexpr std::size_t A = argnum[J];
      if constexpr (Layout::tree[A]) {
        return unflatten<std::tuple_element_t<A, arg_tuple>, Layout::start[J]>(all);
      } else {
        return std::get<Layout::start[J]>(std::move(all));
      }
    };
    return [&]<std::size_t... J>(std::index_sequence<J...>) {
      if constexpr (sizeof...(Argnums) == 1)
        return one(std::integral_constant<std::size_t, 0>{});
      else
        return std::make_tuple(one(std::integral_constant<std::size_t, J>{})...);
    }(std::index_sequence_for<decltype(Argnums)...>{});
  }

  // What a call returns when f cannot be differentiated (a diagnostic, or f's own error,
  // has fired): a value of the type the caller expects (never run), so that the code around
  // the call (auto [loss, grads] = ..., an update with the gradients) compiles on and the
  // user sees one error. The loss: rank 0, of the first parameter's type and mesh.
  template <class... Args>
  static auto placeholder(const Args&... args) {
    const std::tuple<const Args&...> all(args...);
    auto grads = std::make_tuple(gradient_of<Argnums, grad_contributions<>>(
        std::get<Argnums>(all), grad_tape{}, grad_contributions<>{})...);
    if constexpr (Mode == grad_mode::plans) {
      return std::vector<std::string>{};
    } else {
      using P = std::remove_cvref_t<decltype(std::get<0>(grads))>;
      using L = sharded_array<typename P::value_type, typename P::mesh_type, spec<>, extents<>>;
      L loss = filled<L>(std::get<0>(grads).device_mesh(), shape<0>{}, 0);
      if constexpr (Mode == grad_mode::grad && sizeof...(Argnums) == 1)
        return std::get<0>(std::move(grads));
      else if constexpr (Mode == grad_mode::grad)
        return grads;
      else if constexpr (sizeof...(Argnums) == 1)
        return std::make_pair(std::move(loss), std::get<0>(std::move(grads)));
      else
        return std::make_pair(std::move(loss), std::move(grads));
    }
  }

  template <std::size_t... I, class... Args>
  auto run(std::index_sequence<I...>, const Args&... args) const {
    auto tape = std::make_shared<grad_tape>();
    tape->leaves.resize(max_argnum<Argnums...>() + 1);
    using call = std::invoke_result<const F&, decltype(wrap_argument<Mode == grad_mode::plans, I,
                                                                     Argnums...>(args, tape))...>;
    if constexpr (!requires { typename call::type; }) {
      // f's body did not compile (clang: f is not invocable): its own error stands alone.
      return placeholder(args...);
    } else if constexpr (std::is_void_v<typename call::type>) {
      // g++ deduces void for a body that did not compile, so there f's own error stands
      // alone, and a function that really returns nothing is reported when it runs; clang
      // tells the two apart, so there the second is the compile error below.
#if defined(__clang__)
      static_assert(require<false, diagnostic::grad_loss_not_scalar<typename call::type>>::value);
#else
      (void)std::invoke(f_, wrap_argument<Mode == grad_mode::plans, I, Argnums...>(args, tape)...);
      throw_loss_returns_nothing();
#endif
      return placeholder(args...);
    } else {
      return run_with(std::invoke(f_, wrap_argument<Mode == grad_mode::plans, I, Argnums...>(
                                          args, tape)...),
                      tape, args...);
    }
  }

  template <class Out, class... Args>
  auto run_with(const Out& out, const std::shared_ptr<grad_tape>& tape,
                const Args&... args) const {
    if constexpr (!Aux) {
      return run_loss(out, tape, args...);
    } else if constexpr (!requires { std::tuple_size<Out>::value; }) {
      static_assert(require<false, diagnostic::grad_loss_not_scalar<Out>>::value);
      return placeholder(args...);
    } else {
      auto r = run_loss(std::get<0>(out), tape, args...);
      auto aux = aux_value(std::get<1>(out));
      if constexpr (Mode == grad_mode::plans)
        return r;
      else if constexpr (Mode == grad_mode::grad)
        return std::make_pair(std::move(r), std::move(aux));
      else
        return std::make_pair(std::make_pair(std::move(r.first), std::move(aux)),
                              std::move(r.second));
    }
  }

  template <class Out, class... Args>
  auto run_loss(const Out& out, const std::shared_ptr<grad_tape>& tape,
                const Args&... args) const {
    if constexpr (!traced_like<Out>) {
      static_assert(require<false, diagnostic::grad_loss_not_scalar<Out>>::value);
      return placeholder(args...);
    } else if constexpr (Out::rank != 0) {
      static_assert(require<false, diagnostic::grad_loss_not_scalar<Out>>::value);
      return placeholder(args...);
    } else {
      if constexpr (Mode == grad_mode::plans) {
        std::vector<std::string> lines;
        for (std::size_t n = tape->nodes.size(); n-- > 0;)
          if (tape->nodes[n]->describe) lines.push_back(tape->nodes[n]->describe());
        return lines;
      } else {
        using T = typename Out::value_type;
        using Seed = typename Out::cotangent_type;
        sink<Out>(out).deliver(filled<Seed>(out.device_mesh(), out.extents(), T(1)));
        tape->backward();
        using List = typename Out::contributions;
        const std::tuple<const Args&...> all(args...);
        auto grads = std::make_tuple(
            gradient_of<Argnums, List>(std::get<Argnums>(all), *tape, List{})...);
        if constexpr (Mode == grad_mode::grad) {
          if constexpr (sizeof...(Argnums) == 1)
            return std::get<0>(std::move(grads));
          else
            return grads;
        } else {
          if constexpr (sizeof...(Argnums) == 1)
            return std::make_pair(out.value(), std::get<0>(std::move(grads)));
          else
            return std::make_pair(out.value(), std::move(grads));
        }
      }
    }
  }

  F f_;
};

template <grad_mode Mode, bool Aux, std::size_t... Argnums, class F>
auto make_grad_function(F f) {
  if constexpr (sizeof...(Argnums) == 0)
    return grad_function<Mode, Aux, F, 0>(std::move(f));
  else
    return grad_function<Mode, Aux, F, Argnums...>(std::move(f));
}

}  // namespace detail

// value_and_grad<Argnums...>(f): a callable returning (f's value, the gradients): a std::pair
// of the loss array and the gradient (one argnum) or a std::tuple of them.
template <std::size_t... Argnums, class F>
[[nodiscard]] auto value_and_grad(F f) {
  return detail::make_grad_function<detail::grad_mode::value_and_grad, false, Argnums...>(
      std::move(f));
}
template <std::size_t... Argnums, class F>
[[nodiscard]] auto value_and_grad(F f, has_aux_t) {
  return detail::make_grad_function<detail::grad_mode::value_and_grad, true, Argnums...>(
      std::move(f));
}

// grad<Argnums...>(f): a callable returning the gradient(s) alone.
template <std::size_t... Argnums, class F>
[[nodiscard]] auto grad(F f) {
  return detail::make_grad_function<detail::grad_mode::grad, false, Argnums...>(std::move(f));
}
template <std::size_t... Argnums, class F>
[[nodiscard]] auto grad(F f, has_aux_t) {
  return detail::make_grad_function<detail::grad_mode::grad, true, Argnums...>(std::move(f));
}

// backward_plans<Argnums...>(f): a callable that runs f's forward pass and returns what its
// backward would run, one entry per recorded op in backward order: the transposed einsums'
// plans, the reshards that bring each cotangent to its operand's spec (or a contribution to
// its parameter's), as forward plans print them.
template <std::size_t... Argnums, class F>
[[nodiscard]] auto backward_plans(F f) {
  return detail::make_grad_function<detail::grad_mode::plans, false, Argnums...>(std::move(f));
}
template <std::size_t... Argnums, class F>
[[nodiscard]] auto backward_plans(F f, has_aux_t) {
  return detail::make_grad_function<detail::grad_mode::plans, true, Argnums...>(std::move(f));
}

}  // namespace typeshard
