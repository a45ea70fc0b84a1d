// typeshard/core/bfloat16.hpp: bfloat16, the 2-byte "brain" floating-point element type.
//
//   ts::bfloat16 x{1.5f};           // from float: rounded to nearest, ties to even
//   float f = x;                    // to float: exact (bfloat16 is float's top 16 bits)
//   ts::bfloat16 y = x * x + x;     // arithmetic computes in float and rounds once per operator
//   x + 1.0f                        // a float: mixed operands convert the bfloat16 to float
//   ts::bfloat16::from_bits(0x7fc0) // a quiet NaN, by its bits
//
// bfloat16 has float's 8 exponent bits and 7 of its 23 fraction bits (JAX's jnp.bfloat16,
// ml_dtypes' bfloat16): the range of float at ~2-3 significant decimal digits, half the bytes.
// Conversion from float rounds to nearest even; a NaN stays a NaN (made quiet, sign kept),
// infinities stay infinities, and values past the largest bfloat16 round to infinity.
// Construction from a number is explicit (a narrowing), conversion to float implicit (exact).
// Trivially copyable and standard-layout, so arrays, collectives and MPI move its 2 bytes.
//
// is_floating_element_v<T>: float, double, long double or bfloat16; the element types that
// floating-point operations (mean, softmax...) accept. is_gemm_element_v<T>: float, double or
// bfloat16, those of matmul and einsum.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>
#include <iosfwd>
#include <type_traits>

namespace typeshard {

struct bfloat16 {
  std::uint16_t bits = 0;

  bfloat16() = default;
  // From any arithmetic value, through float (double rounds twice: to float, then to
  // bfloat16; as ml_dtypes does).
  template <class U>
    requires std::is_arithmetic_v<U>
  constexpr explicit bfloat16(U v) : bits(round_bits(static_cast<float>(v))) {}

  // The value of these bits.
  [[nodiscard]] static constexpr bfloat16 from_bits(std::uint16_t b) {
    bfloat16 r;
    r.bits = b;
    return r;
  }

  // Exact: the bits are float's top half.
  constexpr operator float() const {
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
  }

  // float -> bfloat16 bits: round to nearest, ties to even; NaN made quiet.
  [[nodiscard]] static constexpr std::uint16_t round_bits(float f) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)  // NaN: keep sign and top payload, set the quiet bit
      return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
    const std::uint32_t lsb = (u >> 16) & 1u;
    return static_cast<std::uint16_t>((u + 0x7fffu + lsb) >> 16);
  }

  // Arithmetic in float, rounded once.
  friend constexpr bfloat16 operator+(bfloat16 a, bfloat16 b) {
    return bfloat16(float(a) + float(b));
  }
  friend constexpr bfloat16 operator-(bfloat16 a, bfloat16 b) {
    return bfloat16(float(a) - float(b));
  }
  friend constexpr bfloat16 operator*(bfloat16 a, bfloat16 b) {
    return bfloat16(float(a) * float(b));
  }
  friend constexpr bfloat16 operator/(bfloat16 a, bfloat16 b) {
    return bfloat16(float(a) / float(b));
  }
  friend constexpr bfloat16 operator-(bfloat16 a) { return from_bits(a.bits ^ 0x8000u); }
  friend constexpr bfloat16 operator+(bfloat16 a) { return a; }
  constexpr bfloat16& operator+=(bfloat16 b) { return *this = *this + b; }
  constexpr bfloat16& operator-=(bfloat16 b) { return *this = *this - b; }
  constexpr bfloat16& operator*=(bfloat16 b) { return *this = *this * b; }
  constexpr bfloat16& operator/=(bfloat16 b) { return *this = *this / b; }

  // Comparisons as float's (NaN unordered, -0 == +0).
  friend constexpr bool operator==(bfloat16 a, bfloat16 b) { return float(a) == float(b); }
  friend constexpr bool operator<(bfloat16 a, bfloat16 b) { return float(a) < float(b); }
  friend constexpr bool operator>(bfloat16 a, bfloat16 b) { return float(a) > float(b); }
  friend constexpr bool operator<=(bfloat16 a, bfloat16 b) { return float(a) <= float(b); }
  friend constexpr bool operator>=(bfloat16 a, bfloat16 b) { return float(a) >= float(b); }

  // Printed as its float value (a template, so this header needs only <iosfwd>).
  template <class Char, class Traits>
  friend std::basic_ostream<Char, Traits>& operator<<(std::basic_ostream<Char, Traits>& os,
                                                      bfloat16 x) {
    return os << float(x);
  }
};

static_assert(sizeof(bfloat16) == 2 && std::is_trivially_copyable_v<bfloat16> &&
              std::is_standard_layout_v<bfloat16>);

// Whether x is a NaN (found by argument-dependent lookup, so fn::maximum and friends see
// bfloat16's NaNs).
[[nodiscard]] constexpr bool is_nan(bfloat16 x) { return (x.bits & 0x7fffu) > 0x7f80u; }

// The type of a scalar operand beside an array of T (x * s, x + s, ts::where(m, x, s), ...): T
// itself, and for bfloat16 bfloat16_scalar, which takes any arithmetic value implicitly
// (rounded once, as bfloat16's explicit constructor) so that `x * 2.0f` and `x + 1` read as on
// float arrays. bfloat16 converts to it too; its element_type names the element it stands for.
struct bfloat16_scalar : bfloat16 {
  using element_type = bfloat16;
  constexpr bfloat16_scalar(bfloat16 b) : bfloat16(b) {}  // NOLINT: implicit by design
  template <class U>
    requires std::is_arithmetic_v<U>
  constexpr bfloat16_scalar(U v) : bfloat16(v) {}  // NOLINT: implicit by design
};
template <class T>
struct scalar_parameter {
  using type = T;
};
template <>
struct scalar_parameter<bfloat16> {
  using type = bfloat16_scalar;
};
template <class T>
using scalar_parameter_t = typename scalar_parameter<T>::type;

template <class T>
inline constexpr bool is_floating_element_v =
    std::is_floating_point_v<T> || std::is_same_v<std::remove_cv_t<T>, bfloat16>;

// is_gemm_element_v<T>: the element types of matmul and einsum (the per-shard GEMM): float,
// double, and bfloat16 (multiplied and summed in float, rounded once per local product).
template <class T>
inline constexpr bool is_gemm_element_v =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, bfloat16>;

}  // namespace typeshard

// numeric_limits<bfloat16>, as ml_dtypes gives it.
template <>
struct std::numeric_limits<typeshard::bfloat16> {
 private:
  using B = typeshard::bfloat16;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr int digits = 8;  // 7 stored fraction bits and the implicit one
  static constexpr int digits10 = 2;
  static constexpr int max_digits10 = 4;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -125;
  static constexpr int max_exponent = 128;
  static constexpr int min_exponent10 = -37;
  static constexpr int max_exponent10 = 38;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr B min() noexcept { return B::from_bits(0x0080); }
  static constexpr B lowest() noexcept { return B::from_bits(0xff7f); }
  static constexpr B max() noexcept { return B::from_bits(0x7f7f); }
  static constexpr B epsilon() noexcept { return B::from_bits(0x3c00); }  // 2^-7
  static constexpr B round_error() noexcept { return B::from_bits(0x3f00); }  // 0.5
  static constexpr B infinity() noexcept { return B::from_bits(0x7f80); }
  static constexpr B quiet_NaN() noexcept { return B::from_bits(0x7fc0); }
  static constexpr B signaling_NaN() noexcept { return B::from_bits(0x7fa0); }
  static constexpr B denorm_min() noexcept { return B::from_bits(0x0001); }
};
