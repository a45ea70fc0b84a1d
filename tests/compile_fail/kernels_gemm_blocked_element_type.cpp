// expect: typeshard: kernels::gemm_blocked supports float and double
// kernels::gemm_blocked called directly on ints. The twin converts to double.
#include <typeshard/kernels/gemm_blocked.hpp>

namespace ts = typeshard;

#ifdef TYPESHARD_COMPILE_FAIL
using element = int;
#else
using element = double;
#endif

void multiply(const element* a, const element* b, element* c) {
  ts::kernels::gemm_blocked<element>(2, 2, 2, a, 2, b, 2, c, 2, false);
}
