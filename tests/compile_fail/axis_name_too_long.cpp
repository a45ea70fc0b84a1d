// expect: typeshard: axis name too long: a mesh axis name has at most 31 characters
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
#ifdef TYPESHARD_COMPILE_FAIL
using m = ts::mesh<ts::axis("an_axis_name_far_longer_than_31_chars", 2)>;
#else
using m = ts::mesh<ts::axis("an_axis_name_of_31_characters_", 2)>;
#endif
static_assert(m::size == 2);
