// expect: typeshard: rule 3 \(unreduced\): a value unreduced over more than 4 mesh axes
// A reshard plan of a value unreduced over 5 mesh axes (typeshard keeps at most 4 per value,
// as a spec entry holds at most 4 axes). The twin names 4.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

using mesh5 = ts::mesh<ts::axis("a", 1), ts::axis("b", 1), ts::axis("c", 1), ts::axis("d", 1),
                       ts::axis("e", 1)>;
#ifdef TYPESHARD_COMPILE_FAIL
using partial = ts::unreduced<"a", "b", "c", "d", "e">;
#else
using partial = ts::unreduced<"a", "b", "c", "d">;
#endif

using plan = ts::reshard_plan<mesh5, ts::spec<>, ts::spec<>, ts::dextents<1>, partial>;
[[maybe_unused]] constexpr bool reduces = plan::valid;
