// typeshard/kernels/detail/vector_math_body.hpp: exp and tanh of float vectors, written once
// with GCC / Clang vector extensions and included once per SIMD level by vector_math.hpp
// (no include guard), inside a namespace that defines:
//   V                          a float vector (simd.hpp)
//   TYPESHARD_VM_TARGET        the level's __attribute__((target(...))), undefined at the end
//   fma(V, V, V)               a * b + c, rounded once
// Internal: use kernels/vector_math.hpp.
//
// exp(x): x = n ln2 + r (n = round(x / ln2), r by Cody and Waite's two-part ln2, |r| <= 0.35),
// exp(r) by its Taylor polynomial of degree 7 (truncation below 6e-9 relative), scaled by
// 2^n in two exact halves so that subnormal results round once and large ones overflow to
// inf; x is clamped to [-104, 89] first (exp underflows to 0 below and overflows above), a
// NaN passes through. tanh(x): for |x| < 0.5 the odd Taylor polynomial of degree 15
// (truncation below 1e-8 absolute), else sign(x) (1 - 2 / (exp(2 |x|) + 1)), |x| clamped to
// 10 (tanh is 1 in float beyond 9.1). Accuracy against the correctly rounded values: see
// tests/unit/vector_math.cpp (it asserts the bounds it measures).

// The int32 and uint32 vectors of V's width, and the uint16 vector of as many lanes.
using I = simd::vec<int, sizeof(V)>::type;
using U = simd::vec<unsigned, sizeof(V)>::type;
using H = simd::vec<unsigned short, sizeof(V) / 2>::type;

TYPESHARD_VM_TARGET inline V splat(float x) { return V{} + x; }
TYPESHARD_VM_TARGET inline I splat_int(int x) { return I{} + x; }
// m ? a : b per lane (m: all ones or all zeros, a comparison's result).
TYPESHARD_VM_TARGET inline V select(I m, V a, V b) {
  return reinterpret_cast<V>((m & reinterpret_cast<I>(a)) | (~m & reinterpret_cast<I>(b)));
}

TYPESHARD_VM_TARGET inline V exp_v(V x) {
  x = select(x < splat(-104.0f), splat(-104.0f), x);
  x = select(x > splat(89.0f), splat(89.0f), x);
  // t = 1.5 2^23 + round(x / ln2): the rounding done by the addition (|x / ln2| < 2^22).
  const V magic = splat(12582912.0f);
  const V t = fma(x, splat(1.44269504088896341f), magic);
  const V n = t - magic;
  V r = fma(n, splat(-0.693145751953125f), x);  // ln2's upper 16 bits: n * them is exact
  r = fma(n, splat(-1.42860676533018708e-6f), r);
  V p = splat(1.0f / 5040);
  p = fma(p, r, splat(1.0f / 720));
  p = fma(p, r, splat(1.0f / 120));
  p = fma(p, r, splat(1.0f / 24));
  p = fma(p, r, splat(1.0f / 6));
  p = fma(p, r, splat(0.5f));
  p = fma(p, r, splat(1.0f));
  p = fma(p, r, splat(1.0f));
  // n as an integer (t's bits minus magic's: the same exponent), 2^n = 2^k1 2^k2, each a
  // normal float for n in [-150, 129].
  const I k = reinterpret_cast<I>(t) - reinterpret_cast<I>(magic);
  const I k1 = k >> 1;
  const I k2 = k - k1;
  return p * reinterpret_cast<V>((k1 + 127) << 23) * reinterpret_cast<V>((k2 + 127) << 23);
}

TYPESHARD_VM_TARGET inline V tanh_v(V x) {
  const I sign = reinterpret_cast<I>(x) & splat_int(static_cast<int>(0x80000000u));
  const V a = reinterpret_cast<V>(reinterpret_cast<I>(x) & splat_int(0x7fffffff));
  const V z = x * x;
  V q = splat(static_cast<float>(-929569.0 / 638512875.0));
  q = fma(q, z, splat(21844.0f / 6081075));
  q = fma(q, z, splat(-1382.0f / 155925));
  q = fma(q, z, splat(62.0f / 2835));
  q = fma(q, z, splat(-17.0f / 315));
  q = fma(q, z, splat(2.0f / 15));
  q = fma(q, z, splat(-1.0f / 3));
  const V small = fma(x * z, q, x);
  const V e = exp_v(select(a > splat(10.0f), splat(10.0f), a) * splat(2.0f));
  const V large = splat(1.0f) - splat(2.0f) / (e + splat(1.0f));
  return select(a < splat(0.5f), small, reinterpret_cast<V>(reinterpret_cast<I>(large) | sign));
}

// gelu, tanh form (fn::gelu_tanh_t), and its derivative (fn::gelu_tanh_grad_t), in the
// functors' order of operations, with tanh_v for std::tanh.
TYPESHARD_VM_TARGET inline V gelu_inner(V x) {
  return splat(0.7978845608028654f) * (x + splat(0.044715f) * x * x * x);
}
TYPESHARD_VM_TARGET inline V gelu_v(V x) {
  return splat(0.5f) * x * (splat(1.0f) + tanh_v(gelu_inner(x)));
}
TYPESHARD_VM_TARGET inline V gelu_grad_v(V x) {
  const V c = splat(0.7978845608028654f);
  const V t = tanh_v(gelu_inner(x));
  return splat(0.5f) * (splat(1.0f) + t) + splat(0.5f) * x * (splat(1.0f) - t * t) * c *
                                                (splat(1.0f) + splat(3 * 0.044715f) * x * x);
}

// The loops: whole vectors, then the rest through a zero-padded vector (so every element
// goes through the same arithmetic, wherever it sits).
constexpr std::size_t lanes = sizeof(V) / sizeof(float);

TYPESHARD_VM_TARGET inline V load_part(const float* x, std::size_t n) {
  V v{};
  __builtin_memcpy(&v, x, n * sizeof(float));
  return v;
}

// f: 0 exp, 1 tanh, 2 gelu.
template <int F>
TYPESHARD_VM_TARGET inline V apply(V v) {
  if constexpr (F == 0)
    return exp_v(v);
  else if constexpr (F == 1)
    return tanh_v(v);
  else
    return gelu_v(v);
}

template <int F>
TYPESHARD_VM_TARGET inline void map_v(const float* x, float* y, std::size_t n) {
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    V v;
    __builtin_memcpy(&v, x + i, sizeof(V));
    v = apply<F>(v);
    __builtin_memcpy(y + i, &v, sizeof(V));
  }
  if (i < n) {
    const V v = apply<F>(load_part(x + i, n - i));
    __builtin_memcpy(y + i, &v, (n - i) * sizeof(float));
  }
}

TYPESHARD_VM_TARGET inline void exp(const float* x, float* y, std::size_t n) {
  map_v<0>(x, y, n);
}

TYPESHARD_VM_TARGET inline void tanh(const float* x, float* y, std::size_t n) {
  map_v<1>(x, y, n);
}

TYPESHARD_VM_TARGET inline void gelu_tanh(const float* x, float* y, std::size_t n) {
  map_v<2>(x, y, n);
}

// y = g * gelu'(x) (fn::chain_t<fn::gelu_tanh_grad_t>).
TYPESHARD_VM_TARGET inline void gelu_tanh_chain(const float* g, const float* x, float* y,
                                                std::size_t n) {
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    V a, b;
    __builtin_memcpy(&a, g + i, sizeof(V));
    __builtin_memcpy(&b, x + i, sizeof(V));
    a = a * gelu_grad_v(b);
    __builtin_memcpy(y + i, &a, sizeof(V));
  }
  if (i < n) {
    const V v = load_part(g + i, n - i) * gelu_grad_v(load_part(x + i, n - i));
    __builtin_memcpy(y + i, &v, (n - i) * sizeof(float));
  }
}

// float -> bfloat16 bits, as bfloat16::round_bits: to nearest, ties to even; a NaN made quiet
// (its sign and top payload kept).
TYPESHARD_VM_TARGET inline H bf16_bits(V x) {
  const U u = reinterpret_cast<U>(x);
  const U rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const U nan = (u & 0x7fffffffu) > 0x7f800000u;
  return __builtin_convertvector((nan & ((u >> 16) | 0x0040u)) | (~nan & rounded), H);
}
TYPESHARD_VM_TARGET inline void to_bf16(const float* x, void* out, std::size_t n) {
  unsigned char* y = static_cast<unsigned char*>(out);
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    V v;
    __builtin_memcpy(&v, x + i, sizeof(V));
    const H h = bf16_bits(v);
    __builtin_memcpy(y + 2 * i, &h, sizeof(H));
  }
  if (i < n) {
    const H h = bf16_bits(load_part(x + i, n - i));
    __builtin_memcpy(y + 2 * i, &h, 2 * (n - i));
  }
}

// y = exp(x - shift); returns the sum of y (in lanes, then across them, then the rest).
TYPESHARD_VM_TARGET inline float exp_sum(const float* x, float shift, float* y,
                                         std::size_t n) {
  const V s = splat(shift);
  V acc{};
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    V v;
    __builtin_memcpy(&v, x + i, sizeof(V));
    v = exp_v(v - s);
    acc += v;
    __builtin_memcpy(y + i, &v, sizeof(V));
  }
  float sum = 0;
  for (std::size_t l = 0; l < lanes; ++l) sum += acc[l];
  if (i < n) {
    const V v = exp_v(load_part(x + i, n - i) - s);
    __builtin_memcpy(y + i, &v, (n - i) * sizeof(float));
    for (std::size_t l = 0; l < n - i; ++l) sum += v[l];
  }
  return sum;
}

#undef TYPESHARD_VM_TARGET
