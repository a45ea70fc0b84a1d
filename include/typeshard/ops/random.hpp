// typeshard/ops/random.hpp: sharded random arrays, each device drawing only its own shard
// (jax.random's functions under a sharding, with jax_threefry_partitionable).
//
//   auto k = ts::random::key(0);
//   auto [kw, kb] = ts::random::split(k);
//   auto W = ts::random::normal<ts::spec<ts::none, "x">>(kw, m, ts::shape<2>{512, 2048});
//   auto U = ts::random::uniform<ts::spec<"x">, double>(kb, m, ts::shape<1>{n}, -1.0, 1.0);
//   auto T = ts::random::truncated_normal<ts::spec<"x", "y">>(k, -2.0, 2.0, m, ts::shape<2>{8, 8});
//   auto D = ts::random::bernoulli<ts::spec<"x">>(k, 0.9, m, ts::shape<2>{32, 128});  // 0 or 1
//
// The arguments follow jax.random's order, with the device mesh and global extents where JAX
// takes the shape. The element at global row-major index i is a function of the key and i
// only: the same key and extents give the same array, element for element, on any mesh, any
// spec, any number of devices and any backend (threads or MPI); no device computes an element
// outside its shard. Element types: float (the default) and double; bernoulli's also integers.
#pragma once

#include <concepts>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "../array/device_mesh.hpp"
#include "../array/sharded_array.hpp"
#include "../core/errors.hpp"
#include "../core/extents.hpp"
#include "../core/layout.hpp"
#include "../core/mesh.hpp"
#include "../core/spec.hpp"
#include "detail/random_blocks.hpp"
#include "random_key.hpp"

namespace typeshard::random {

// real_element: the element types of uniform, normal and truncated_normal.
template <class T>
concept real_element = std::same_as<T, float> || std::same_as<T, double>;

// bernoulli_element: a real_element or an integer (not bool: host_tensor<bool> cannot exist).
template <class T>
concept bernoulli_element =
    real_element<T> || (std::integral<T> && !std::same_as<T, bool>);

namespace detail {

template <spec_like Spec, class Extents, class T, mesh_like Mesh, std::size_t Rank>
auto draw(prng_key k, const device_mesh<Mesh>& m, const shape<Rank>& global,
          const distribution& d) {
  using E = std::conditional_t<std::is_void_v<Extents>, dextents<Rank>, Extents>;
  using array_type = sharded_array<T, Mesh, Spec, E>;
  array_type::check_static_extents(global);
  return array_type(adopt_shards, m, global,
                    random_blocks<T, Rank>(
                        typeshard::detail::placement_of<Mesh, typename array_type::spec, Rank>(m),
                        global, k, d));
}

}  // namespace detail

// uniform<Spec, T>(key, m, extents, minval, maxval): values in [minval, maxval)
// (jax.random.uniform).
template <spec_like Spec, real_element T = float, class Extents = void, mesh_like Mesh,
          std::size_t Rank>
[[nodiscard]] auto uniform(prng_key k, const device_mesh<Mesh>& m, const shape<Rank>& extents,
                           std::type_identity_t<T> minval = T(0),
                           std::type_identity_t<T> maxval = T(1)) {
  if (!(minval <= maxval))
    throw usage_error("typeshard: random::uniform needs minval <= maxval");
  return detail::draw<Spec, Extents, T>(
      k, m, extents, {detail::distribution_kind::uniform, double(minval), double(maxval)});
}

// normal<Spec, T>(key, m, extents): standard normal values (jax.random.normal: the inverse
// error function of a uniform value, one cipher call per element).
template <spec_like Spec, real_element T = float, class Extents = void, mesh_like Mesh,
          std::size_t Rank>
[[nodiscard]] auto normal(prng_key k, const device_mesh<Mesh>& m, const shape<Rank>& extents) {
  return detail::draw<Spec, Extents, T>(k, m, extents, {detail::distribution_kind::normal, 0, 0});
}

// truncated_normal<Spec, T>(key, lower, upper, m, extents): standard normal values
// conditioned on lower < x < upper (jax.random.truncated_normal; the bounds themselves are
// excluded). Throws usage_error unless lower < upper.
template <spec_like Spec, real_element T = float, class Extents = void, mesh_like Mesh,
          std::size_t Rank>
[[nodiscard]] auto truncated_normal(prng_key k, double lower, double upper,
                                    const device_mesh<Mesh>& m, const shape<Rank>& extents) {
  if (!(lower < upper))
    throw usage_error("typeshard: random::truncated_normal needs lower < upper");
  return detail::draw<Spec, Extents, T>(
      k, m, extents, {detail::distribution_kind::truncated_normal, lower, upper});
}

// bernoulli<Spec, T>(key, p, m, extents): 1 with probability p, else 0, as T (float by
// default, to multiply with; jax.random.bernoulli returns bools). Throws usage_error unless
// 0 <= p <= 1.
template <spec_like Spec, bernoulli_element T = float, class Extents = void, mesh_like Mesh,
          std::size_t Rank>
[[nodiscard]] auto bernoulli(prng_key k, double p, const device_mesh<Mesh>& m,
                             const shape<Rank>& extents) {
  if (!(p >= 0.0 && p <= 1.0))
    throw usage_error("typeshard: random::bernoulli needs a probability p in [0, 1]");
  return detail::draw<Spec, Extents, T>(k, m, extents,
                                        {detail::distribution_kind::bernoulli, p, 0});
}

}  // namespace typeshard::random
