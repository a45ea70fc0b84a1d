// expect: typeshard: kernels::gemm supports float, double and bfloat16
// kernels::gemm called directly on ints. The twin converts to float.
#include <typeshard/kernels/gemm.hpp>

namespace ts = typeshard;

#ifdef TYPESHARD_COMPILE_FAIL
using element = int;
#else
using element = float;
#endif

void multiply(const element* a, const element* b, element* c) {
  ts::kernels::gemm<element>(2, 2, 2, a, 2, b, 2, c, 2);
}
