// typeshard/ops/detail/operand_types.hpp: the first compile-time check of an operation on two
// sharded arrays (ts::matmul, ts::einsum): one mesh type, then one element type. Internal: do
// not rely on anything in detail/.
//
// Each operation names its own two messages (rule 2's matmul_* or einsum_* in
// core/rules/), so the error says which operation was called. At most one fires; the check
// then answers false and the caller returns a well-formed dummy, so nothing cascades.
//
// Also preferred_element<U>, the result element type matmul and einsum take as JAX's
// preferred_element_type: ts::matmul(a, b, ts::preferred_element<float>) or
// ts::einsum<S>(a, b, ts::preferred_element<float>) on bfloat16 operands gives a float result
// (float sums never rounded to bfloat16; the result's collectives in float); U equal to the
// operands' element type is the plain operation.
#pragma once

#include <type_traits>

#include "../../core/bfloat16.hpp"
#include "../../core/detail/diagnose.hpp"

namespace typeshard {
template <class U>
struct preferred_element_t {
  using type = U;
};
template <class U>
inline constexpr preferred_element_t<U> preferred_element{};
}  // namespace typeshard

namespace typeshard::detail {

template <class A, class B, template <class, class> class MeshesDiffer,
          template <class, class> class ElementTypesDiffer>
constexpr bool check_operand_types() {
  using a_t = std::remove_cvref_t<A>;
  using b_t = std::remove_cvref_t<B>;
  if constexpr (!std::is_same_v<typename a_t::mesh_type, typename b_t::mesh_type>) {
    return require<false, MeshesDiffer<typename a_t::mesh_type, typename b_t::mesh_type>>::value &&
           false;
  } else if constexpr (!std::is_same_v<typename a_t::value_type, typename b_t::value_type>) {
    return require<false, ElementTypesDiffer<typename a_t::value_type,
                                             typename b_t::value_type>>::value &&
           false;
  } else {
    return true;
  }
}

// A contraction's operand types (ts::einsum's, ts::matmul's), each op naming its own
// diagnostics: preferred_element<U> is the element type T, or float for bfloat16; then
// check_operand_types. Fires one diagnostic at most; false if one fired.
template <class A, class B, class U, template <class, class> class PreferredUnsupported,
          template <class, class> class MeshesDiffer,
          template <class, class> class ElementTypesDiffer>
constexpr bool check_contraction_operands() {
  using T = typename std::remove_cvref_t<A>::value_type;
  if constexpr (!std::is_same_v<T, U> &&
                (!std::is_same_v<T, bfloat16> || !std::is_same_v<U, float>)) {
    return require<false, PreferredUnsupported<T, U>>::value && false;
  } else {
    return check_operand_types<A, B, MeshesDiffer, ElementTypesDiffer>();
  }
}

}  // namespace typeshard::detail
