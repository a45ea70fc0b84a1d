// typeshard/ops/detail/collective_calls.hpp: tiled collectives on row-major blocks, expressed
// as the backend's raw-buffer primitives. Internal: do not rely on anything in detail/.
//
// Shared by the per-device collectives of shard_map (collectives.hpp) and the executor's collective
// steps (ops/detail/operand_steps.hpp). A tiled collective along dimension d of a block of shape s
// sees the block as [rows][s[d]][inner] with rows = s[0] * ... * s[d-1] and inner = s[d+1] * ... ;
// the backend moves whole [s[d]][inner] rows pieces.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <vector>

#include "../../backend/backend.hpp"
#include "../../core/errors.hpp"
#include "../../core/layout.hpp"
#include "../../core/detail/mesh_group.hpp"

namespace typeshard::detail {

template <std::size_t Rank>
constexpr std::size_t product(const shape<Rank>& s, std::size_t begin, std::size_t end) {
  std::size_t n = 1;
  for (std::size_t d = begin; d < end; ++d) n *= s[d];
  return n;
}

// The backend's view of a mesh group: members are mesh positions, which are the run
// indices of a run over the device mesh's devices in mesh order. It refers to g, which
// must outlive the collective call.
template <class Mesh>
collective_group backend_group(const mesh_group<Mesh>& g) {
  return {std::span<const std::size_t>(g.members.data(), g.size), g.rank,
          std::span<const axis_name>(g.axes.axes, g.axes.count)};
}

inline collective_group backend_group(const group_members& g) {
  return {std::span<const std::size_t>(g.members), g.rank,
          std::span<const axis_name>(g.axes.axes, g.axes.count)};
}

// all_gather along d: member j contributes a block whose extent along d is
// member_extents[j]; `out` has extent sum(member_extents) there, the other extents of `in`.
template <class T, std::size_t Rank>
void gather_along(backend& b, const collective_group& g, const T* in, const shape<Rank>& in_shape,
                  std::size_t d, std::span<const std::size_t> member_extents, T* out) {
  const std::size_t rows = product(in_shape, 0, d);
  const std::size_t inner = product(in_shape, d + 1, Rank);
  std::vector<std::size_t> counts(member_extents.begin(), member_extents.end());
  for (std::size_t& c : counts) c *= inner;
  b.all_gather(g, element_type_of<T>, in, out, rows, counts);
}

// psum_scatter along d: `in` has extent sum(member_extents) along d; member j keeps the
// reduction of its member_extents[j] slice.
template <class T, std::size_t Rank>
void scatter_along(backend& b, const collective_group& g, reduce_op op, const T* in,
                   const shape<Rank>& in_shape, std::size_t d,
                   std::span<const std::size_t> member_extents, T* out) {
  const std::size_t rows = product(in_shape, 0, d);
  const std::size_t inner = product(in_shape, d + 1, Rank);
  std::vector<std::size_t> counts(member_extents.begin(), member_extents.end());
  for (std::size_t& c : counts) c *= inner;
  b.reduce_scatter(g, element_type_of<T>, op, in, out, rows, counts);
}

// all_to_all: `in` (shape in_shape) is cut into g.size() equal chunks along split_dim,
// chunk j going to member j; the chunks received are concatenated along concat_dim in
// member order. in_shape[split_dim] must divide by the group size.
template <class T, std::size_t Rank>
shape<Rank> all_to_all_shape(const shape<Rank>& in_shape, std::size_t n, std::size_t split_dim,
                             std::size_t concat_dim) {
  shape<Rank> out = in_shape;
  out[split_dim] /= n;
  out[concat_dim] *= n;
  return out;
}

template <class T, std::size_t Rank>
void all_to_all_along(backend& b, const collective_group& g, const T* in,
                      const shape<Rank>& in_shape, std::size_t split_dim, std::size_t concat_dim,
                      T* out) {
  const std::size_t n = g.size();
  const shape<Rank> out_shape = all_to_all_shape<T>(in_shape, n, split_dim, concat_dim);
  const std::size_t s_inner = product(in_shape, split_dim + 1, Rank);
  const std::size_t s_chunk = in_shape[split_dim] / n;
  const strided_pieces send{product(in_shape, 0, split_dim), s_chunk * s_inner,
                            in_shape[split_dim] * s_inner, s_chunk * s_inner};
  // A piece is the block with split_dim cut to one chunk; member i's lands at offset
  // i * (its extent along concat_dim) of the output's concat_dim.
  const std::size_t piece_c = split_dim == concat_dim ? s_chunk : in_shape[concat_dim];
  const std::size_t c_inner = product(out_shape, concat_dim + 1, Rank);
  const strided_pieces recv{product(out_shape, 0, concat_dim), piece_c * c_inner,
                            out_shape[concat_dim] * c_inner, piece_c * c_inner};
  b.all_to_all(g, element_type_of<T>, in, out, send, recv);
}

}  // namespace typeshard::detail
