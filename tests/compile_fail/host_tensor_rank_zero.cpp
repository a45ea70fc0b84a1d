// expect: typeshard: host_tensor needs rank >= 1
// A rank-0 host tensor: use a 1-element vector instead. The twin does.
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;

#ifdef TYPESHARD_COMPILE_FAIL
constexpr std::size_t rank = 0;
#else
constexpr std::size_t rank = 1;
#endif

[[maybe_unused]] constexpr std::size_t host_rank = ts::host_tensor<float, rank>::rank;
