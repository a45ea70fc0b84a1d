// expect: typeshard: rule 3 \(unreduced\): the product would be a partial sum over more than 4 mesh axes
// J sharded over four axes in both operands, and the lhs already unreduced over a fifth: the
// product would be a partial sum over five axes. The twin reduces the lhs first (no
// unreduced axis).
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh5 = ts::mesh<ts::axis("a", 1), ts::axis("b", 1), ts::axis("c", 1), ts::axis("d", 1),
                       ts::axis("e", 1)>;
#ifdef TYPESHARD_COMPILE_FAIL
using lhs_partial = ts::unreduced<"e">;
#else
using lhs_partial = ts::unreduced<>;
#endif

using plan = ts::matmul_plan<mesh5, ts::spec<ts::none, ts::axes("a", "b", "c", "d")>,
                             ts::spec<ts::axes("a", "b", "c", "d"), ts::none>, ts::auto_out,
                             ts::dextents<2>, ts::dextents<2>, float, lhs_partial>;
[[maybe_unused]] constexpr bool multiplies = plan::valid;
