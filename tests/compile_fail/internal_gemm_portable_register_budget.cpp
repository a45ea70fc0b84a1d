// expect: typeshard: internal: the register budget below assumes a 6 x \(2 vectors\) half
// The portable GEMM micro-kernel (kernels/detail/gemm_micro_portable.hpp) keeps a 6 x 2
// block of 16-byte vectors per half tile: that is its register budget, and it assumes an
// element that divides 16 and 32 bytes evenly (float, double). The guard is internal (only
// kernels::gemm calls the micro-kernel, and only on float and double), so this test reaches
// it through the detail API: it gives vec16 a 16-byte vector for a 9-byte element, for which
// 32 / 9 = 3 elements per half tile but 16 / 9 = 1 per vector, i.e. 3 vectors a row, and
// instantiates the micro-kernel (with a row stride of packed A, ka, of 1). The twin uses a
// 4-byte element (2 vectors a row, as float).
// Everything the kernel body does with the element type compiles, so the guard's is the only
// error.
#include <cstddef>

#include <typeshard/kernels/detail/gemm_micro_portable.hpp>

#ifdef TYPESHARD_COMPILE_FAIL
constexpr std::size_t element_bytes = 9;
#else
constexpr std::size_t element_bytes = 4;
#endif

// An element of element_bytes bytes, and a "vector" of 16 bytes that adds and multiplies.
struct element {
  unsigned char bytes[element_bytes];
};
struct vector16 {
  unsigned char bytes[16];
  friend vector16 operator+(vector16 v, element) { return v; }
  friend vector16 operator*(vector16 v, vector16) { return v; }
  vector16& operator+=(vector16) { return *this; }
};
static_assert(sizeof(element) == element_bytes && sizeof(vector16) == 16);

template <>
struct typeshard::kernels::detail::vec16<element> {
  using type = vector16;
};

void micro_tile(const element* a, const element* b, element* tile) {
  typeshard::kernels::detail::micro_kernel_portable<1, element>(1, a, b, tile, 16, false);
}
