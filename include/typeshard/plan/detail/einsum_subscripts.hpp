// typeshard/plan/detail/einsum_subscripts.hpp: an einsum subscript string ("bsd,df->bsf")
// as a template argument, and its parse into letters and roles, at compile time.
// Internal: do not rely on anything in detail/ (the public face is plan/einsum_plan.hpp).
//
// Grammar: <lhs>,<rhs>-><out>, each part a run of ASCII letters (a-z, A-Z), no spaces, no
// ellipsis; any part may be empty: an empty output is a full contraction ("i,i->", a rank-0
// result), an empty operand a rank-0 one (",i->i" scales). A letter is
//   - batch:       in both operands and the output;
//   - contracting: in both operands, not the output;
//   - free:        in one operand and the output;
//   - summed:      in one operand only (neither the other nor the output): summed locally
//                  before the product, exactly as np.einsum does ("ij,j->" sums i); when that
//                  dimension is sharded, the result is unreduced over its axes (as a
//                  sharded ts::sum would be).
// Rejected (rule 2): a malformed string, a letter twice within one operand or in the output,
// an output letter in neither operand.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace typeshard {

namespace detail {
inline constexpr std::size_t max_einsum_subscripts_length = 63;
inline constexpr std::size_t max_einsum_rank = 8;  // per operand; more letters: a reshape first
}  // namespace detail

// einsum_subscripts: a structural fixed-capacity string, so "bsd,df->bsf" can be a template
// argument (ts::einsum<"bsd,df->bsf">(a, b)).
struct einsum_subscripts {
  char chars[detail::max_einsum_subscripts_length + 1]{};
  std::size_t length = 0;
  bool too_long = false;  // the string was cut (its diagnostic fired): nothing else may fire

  constexpr einsum_subscripts() = default;
  template <std::size_t N>
  consteval einsum_subscripts(const char (&text)[N])  // NOLINT: implicit on purpose
      : length(N - 1 <= detail::max_einsum_subscripts_length
                   ? N - 1
                   : detail::max_einsum_subscripts_length),
        too_long(N - 1 > detail::max_einsum_subscripts_length) {
    static_assert(N - 1 <= detail::max_einsum_subscripts_length,
                  "typeshard: rule 2 (einsum): subscripts too long: at most 63 characters; fix: "
                  "use fewer dimensions (reshape first)");
    for (std::size_t i = 0; i < length; ++i) chars[i] = text[i];
  }
  constexpr std::string_view view() const { return {chars, length}; }
  friend constexpr bool operator==(const einsum_subscripts&, const einsum_subscripts&) = default;
};

namespace detail {

enum class einsum_role { batch, contracting, lhs_free, rhs_free, lhs_summed, rhs_summed };

enum class einsum_parse_error {
  none,
  too_long,            // longer than einsum_subscripts holds (diagnosed where it was made)
  malformed,           // not <letters>,<letters>-><letters>
  operand_too_long,    // more than max_einsum_rank letters in one part
  letter_repeated,     // `letter` twice in one operand or in the output
  output_letter_unknown  // `letter` in the output but in neither operand
};

// The parsed equation.
struct einsum_equation {
  einsum_parse_error error = einsum_parse_error::none;
  char letter = 0;           // the letter an error names
  std::size_t position = 0;  // the character a malformed string fails at
  std::array<char, max_einsum_rank> lhs{}, rhs{}, out{};
  std::size_t lhs_rank = 0, rhs_rank = 0, out_rank = 0;

  constexpr bool ok() const { return error == einsum_parse_error::none; }

  static constexpr std::size_t find(const std::array<char, max_einsum_rank>& s, std::size_t n,
                                    char c) {
    for (std::size_t i = 0; i < n; ++i)
      if (s[i] == c) return i;
    return n;
  }
  constexpr std::size_t lhs_dim(char c) const { return find(lhs, lhs_rank, c); }
  constexpr std::size_t rhs_dim(char c) const { return find(rhs, rhs_rank, c); }
  constexpr std::size_t out_dim(char c) const { return find(out, out_rank, c); }
  constexpr bool in_lhs(char c) const { return lhs_dim(c) < lhs_rank; }
  constexpr bool in_rhs(char c) const { return rhs_dim(c) < rhs_rank; }
  constexpr bool in_out(char c) const { return out_dim(c) < out_rank; }

  constexpr einsum_role role(char c) const {
    const bool l = in_lhs(c), r = in_rhs(c), o = in_out(c);
    if (l && r) return o ? einsum_role::batch : einsum_role::contracting;
    if (l) return o ? einsum_role::lhs_free : einsum_role::lhs_summed;
    return o ? einsum_role::rhs_free : einsum_role::rhs_summed;
  }
  // The result's rank: 0 for an empty output (a rank-0 array, as jnp.einsum gives).
  constexpr std::size_t result_rank() const { return out_rank; }
  // The rank every step of a plan is written in: the largest (at least 1), lower ranks padded
  // with trailing extent-1, unsharded dimensions (which leaves row-major blocks as they are).
  constexpr std::size_t plan_rank() const {
    std::size_t r = lhs_rank > rhs_rank ? lhs_rank : rhs_rank;
    r = r > out_rank ? r : out_rank;
    return r > 0 ? r : 1;
  }
};

constexpr bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

constexpr einsum_equation parse_einsum(std::string_view s) {
  einsum_equation e;
  std::size_t i = 0;
  auto part = [&](std::array<char, max_einsum_rank>& out, std::size_t& n) {
    while (i < s.size() && is_letter(s[i])) {
      if (n == max_einsum_rank) {
        e.error = einsum_parse_error::operand_too_long;
        e.position = i;
        return false;
      }
      if (einsum_equation::find(out, n, s[i]) < n) {
        e.error = einsum_parse_error::letter_repeated;
        e.letter = s[i];
        e.position = i;
        return false;
      }
      out[n++] = s[i++];
    }
    return true;
  };
  auto malformed = [&] {
    e.error = einsum_parse_error::malformed;
    e.position = i;
    return e;
  };
  if (!part(e.lhs, e.lhs_rank)) return e;
  if (i >= s.size() || s[i] != ',') return malformed();
  ++i;
  if (!part(e.rhs, e.rhs_rank)) return e;
  if (i + 1 >= s.size() || s[i] != '-' || s[i + 1] != '>') return malformed();
  i += 2;
  if (!part(e.out, e.out_rank)) return e;
  if (i != s.size()) return malformed();
  for (std::size_t o = 0; o < e.out_rank; ++o)
    if (!e.in_lhs(e.out[o]) && !e.in_rhs(e.out[o])) {
      e.error = einsum_parse_error::output_letter_unknown;
      e.letter = e.out[o];
      return e;
    }
  return e;
}

template <einsum_subscripts S>
inline constexpr einsum_equation equation_of = [] {
  if (!S.too_long) return parse_einsum(S.view());
  einsum_equation e;
  e.error = einsum_parse_error::too_long;
  return e;
}();

// The subscripts of a rank-R matmul: "xy,yz->xz", "axy,ayz->axz", "abxy,abyz->abxz", ...
// (batch dimension d is letter 'a' + d). For blocks (array/block_matmul.hpp): a rank-2 rhs
// of a rank-R lhs has no batch letters (RhsRank 2: "axy,yz->axz"), and an operand read
// through a transposed view names its stored dimensions swapped ("yx,yz->xz").
template <std::size_t R, std::size_t RhsRank = R, bool LhsTransposed = false,
          bool RhsTransposed = false>
constexpr einsum_subscripts matmul_subscripts() {
  static_assert(R >= 2 && R <= max_einsum_rank && (RhsRank == R || RhsRank == 2));
  einsum_subscripts s;
  auto put = [&](char c) { s.chars[s.length++] = c; };
  auto operand = [&](bool batch, bool swapped, char x, char y) {
    for (std::size_t i = 0; batch && i + 2 < R; ++i) put(static_cast<char>('a' + i));
    put(swapped ? y : x);
    put(swapped ? x : y);
  };
  operand(true, LhsTransposed, 'x', 'y');
  put(',');
  operand(RhsRank == R, RhsTransposed, 'y', 'z');
  put('-');
  put('>');
  operand(true, false, 'x', 'z');
  return s;
}

// ... and its equation.
template <std::size_t R, std::size_t RhsRank = R, bool LhsTransposed = false,
          bool RhsTransposed = false>
constexpr einsum_equation matmul_equation() {
  return equation_of<matmul_subscripts<R, RhsRank, LhsTransposed, RhsTransposed>()>;
}

}  // namespace detail

}  // namespace typeshard
