// expect: typeshard: ts::axes\(...\) takes 1 to 4 mesh axis names
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
#ifdef TYPESHARD_COMPILE_FAIL
using s = ts::spec<ts::axes("a", "b", "c", "d", "e")>;
#else
using s = ts::spec<ts::axes("a", "b", "c", "d")>;
#endif
static_assert(s::size == 1);
