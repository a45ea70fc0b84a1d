// typeshard/core/rules/rule9_gradients.hpp: the messages of rule 9 (gradients):
// ts::value_and_grad / ts::grad differentiate a function written in the global view with
// typeshard's ops; each gradient's type (mesh, extents, spec, unreduced axes) is computed at
// compile time. What cannot be differentiated is one of these compile errors, never a wrong
// gradient.
//
// Numbering: DESIGN.md calls the gradient rule "rule 8", but rule 8 is the dimension moves
// in the code (core/rules/rule8_dimension_moves.hpp), so gradients are rule 9.
//
// Checked in: ops/grad.hpp (the arguments, the loss), ops/traced.hpp (the ops on traced
// values), plan/grad_plan.hpp (einsum transposes).
// Compile-fail tests: tests/compile_fail/rule9_*.cpp. Table: docs/rules.md.
// Each message is a class template in ts::diagnostic whose fire() holds the static_assert;
// a check instantiates it through detail::require (core/detail/diagnose.hpp).
#pragma once

#include <cstddef>

#include "../detail/diagnose.hpp"

namespace typeshard::detail {
// is_traced_v<T>: whether T is a value traced by ts::value_and_grad (ops/traced.hpp
// specialises it), so that other ops (ts::shard_map) can refuse one with a rule-9 message.
template <class T>
inline constexpr bool is_traced_v = false;
}  // namespace typeshard::detail

namespace typeshard::diagnostic {

template <class Loss>
struct grad_loss_not_scalar {
  static constexpr bool fire() {
    static_assert(detail::always_false<Loss>,
                  "typeshard: rule 9 (gradients): the differentiated function must return a "
                  "one-element array of rank 0 (a scalar: what ts::sum<>(x) or ts::mean<>(x) "
                  "give) computed from its differentiated arguments; fix: reduce the loss "
                  "over every dimension with ts::sum<> or ts::mean<> before returning it");
    return true;
  }
};

template <std::size_t Argnum, std::size_t Arity>
struct grad_argnum_out_of_range {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Argnum, Arity>,
                  "typeshard: rule 9 (gradients): an argnum names no argument of the call "
                  "(argnums count from 0); fix: name only arguments the function is called "
                  "with, e.g. ts::value_and_grad<0, 1>(f)(w1, w2, x)");
    return true;
  }
};

template <std::size_t Argnum>
struct grad_argnum_not_float_array {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Argnum>,
                  "typeshard: rule 9 (gradients): a differentiated argument must be a fully "
                  "reduced ts::sharded_array of float or double; fix: differentiate with "
                  "respect to floating-point arrays only (reshard an unreduced one first), "
                  "and pass the others as plain arguments");
    return true;
  }
};

template <std::size_t... Argnums>
struct grad_argnums_repeated {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Argnums...>,
                  "typeshard: rule 9 (gradients): argnums must be distinct; fix: name each "
                  "differentiated argument once");
    return true;
  }
};

template <class Op>
struct grad_shard_map_not_differentiable {
  static constexpr bool fire() {
    static_assert(detail::always_false<Op>,
                  "typeshard: rule 9 (gradients): ts::shard_map bodies are not differentiated "
                  "(their blocks are not traced); fix: write that part in the global view "
                  "(ts::einsum, elementwise ops, ts::sum, ts::reshard), or call shard_map on "
                  "plain arrays outside the differentiated function");
    return true;
  }
};

template <char Letter>
struct grad_einsum_summed_letter {
  static constexpr bool fire() {
    static_assert(detail::always_false_chars<Letter>,
                  "typeshard: rule 9 (gradients): a traced einsum operand has a letter that is "
                  "in neither the other operand nor the output (summed in one operand only); "
                  "its gradient is not differentiated; fix: sum that dimension first with "
                  "ts::sum<Dim>(x), then contract");
    return true;
  }
};

template <class Op>
struct grad_map_not_differentiable {
  static constexpr bool fire() {
    static_assert(detail::always_false<Op>,
                  "typeshard: rule 9 (gradients): ts::map and ts::zip of a traced value apply "
                  "a user function typeshard cannot differentiate; fix: write it with the "
                  "differentiable elementwise ops (+ - * /, exp, log, tanh, relu, sin, cos, "
                  "sqrt)");
    return true;
  }
};

// ts::zero_sgd_update / ts::zero_adam_update (ops/optim.hpp).
template <class ParamElement, class GradElement>
struct zero_update_gradient_element {
  static constexpr bool fire() {
    static_assert(detail::always_false<ParamElement, GradElement>,
                  "typeshard: rule 9 (gradients): an optimizer step takes a gradient of the "
                  "parameter's element type, or a bfloat16 gradient for a float parameter (a "
                  "float master copy); fix: convert the gradient, e.g. ts::astype<float>(g)");
    return true;
  }
};

// ts::value_and_grad over a parameter tree (ops/grad.hpp, ops/tree.hpp).
template <std::size_t Argnum, std::size_t Leaf>
struct grad_tree_leaf_not_float_array {
  static constexpr bool fire() {
    static_assert(detail::always_false_values<Argnum, Leaf>,
                  "typeshard: rule 9 (gradients): every leaf of a differentiated parameter "
                  "tree must be a fully reduced ts::sharded_array of float or double; fix: "
                  "keep other values (data, integer arrays, options) out of the tree and pass "
                  "them as plain arguments");
    return true;
  }
};

template <class Struct>
struct tree_struct_not_template {
  static constexpr bool fire() {
    static_assert(detail::always_false<Struct>,
                  "typeshard: rule 9 (gradients): a parameter struct must be a class template "
                  "over its members' types, in declaration order (its gradients and traced "
                  "values have other types); fix: template <class W, class B> struct layer "
                  "{ BOOST_HANA_DEFINE_STRUCT(layer, (W, w), (B, b)); };");
    return true;
  }
};

}  // namespace typeshard::diagnostic
