// typeshard/array/block.hpp: one device's local block inside ts::shard_map, typed by the mesh axes
// it varies over (rule 4 of DESIGN.md; JAX's varying manual axes, `vma`).
//
//   // inside shard_map<mesh, spec<"x", none>, ...>: x is a block<float, 2, mesh, vary<"x">>
//   auto g = ts::all_gather<"x">(x, 0);     // invariant over "x" again
//   auto y = ts::matmul(g, w);              // varies over the union of g's and w's axes
//   auto s = ts::psum<"y">(y);              // invariant over "y"
//   auto dw = ts::matmul(ts::transpose(x), y);  // x^T . y, x read in place (no copy)
//
// A block holds its element type, rank and mesh in its type, its extents at run time, and
// its data: either its own buffer, or a read-only view of an input array's shard (shard_map
// hands inputs over without copying; writing through data() first copies, so a shard of
// the caller's array is never modified). Its varying set is a bit mask over the mesh's
// axes: bit i set means the values may differ between devices along mesh axis i. Inputs
// vary over the axes their in spec shards over; collectives change the set (psum and
// all_gather over X remove X, psum_scatter, all_to_all and ppermute over X add it); binary
// operations take the union. A block may always be treated as varying over more axes (the
// conversion is implicit: JAX's pvary), never fewer.
//
// The operations on blocks live beside it: ts::map / ts::zip in block_elementwise.hpp, the
// local ts::matmul in block_matmul.hpp (ops/shard_map.hpp includes both); ts::transpose's
// view of a block is here, since block matmul and the global view both take it.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/config.hpp"
#include "../backend/backend.hpp"
#include "detail/buffer.hpp"
#include "../core/detail/diagnose.hpp"
#include "../core/detail/mesh_group.hpp"
#include "device_mesh.hpp"
#include "../core/errors.hpp"
#include "host_tensor.hpp"
#include "../core/layout.hpp"
#include "../core/mesh.hpp"
#include "../core/rules/mesh.hpp"
#include "../core/rules/rule2_matmul.hpp"
#include "../core/rules/rule4_shard_map.hpp"
#include "../core/rules/rule5_elementwise.hpp"
#include "../core/rules/rule8_dimension_moves.hpp"

namespace typeshard {

// vary<Mesh, "x", "y">: the varying-set bit mask of those mesh axes.
template <mesh_like Mesh, axis_name... Axes>
inline constexpr std::uint64_t vary = (std::uint64_t{0} | ... |
                                       (std::uint64_t{1} << Mesh::index_of(Axes)));

// The varying-set mask of the axes a spec shards over.
template <mesh_like Mesh, spec_like Spec>
inline constexpr std::uint64_t vary_of_spec = [] {
  std::uint64_t m = 0;
  for (std::size_t i = 0; i < Mesh::rank; ++i)
    if (Spec::uses(Mesh::axes[i].name)) m |= std::uint64_t{1} << i;
  return m;
}();

// shard_context: where a per-device function runs: its device mesh and mesh position.
template <mesh_like Mesh>
class shard_context {
 public:
  shard_context(const device_mesh<Mesh>& m, std::size_t position)
      : mesh_(&m), position_(position) {}

  const device_mesh<Mesh>& mesh() const { return *mesh_; }
  backend& get_backend() const { return mesh_->get_backend(); }
  std::size_t position() const { return position_; }
  device_id device() const { return mesh_->device_at(position_); }
  std::array<std::size_t, Mesh::rank> coordinates() const { return Mesh::coordinates(position_); }

  // axis_index<"x">(): this device's coordinate along "x" (JAX's lax.axis_index); with
  // several axes, its index in their group (the first axis major).
  template <axis_name... Axes>
    requires(sizeof...(Axes) >= 1)
  std::size_t axis_index() const {
    static_assert((detail::require_named<Mesh::contains(Axes), Axes,
                                         diagnostic::mesh_has_no_such_axis>::value && ...));
    dim_spec axes;
    ((axes.axes[axes.count++] = Axes), ...);
    return detail::group_rank<Mesh>(axes, position_);
  }

 private:
  const device_mesh<Mesh>* mesh_;
  std::size_t position_;
};

struct block_view_t {
  explicit block_view_t() = default;
};
inline constexpr block_view_t block_view{};

namespace detail {

// A block's failure, out of line: a function of values, one copy per TU (not a message
// built in every block type's constructor).
[[noreturn]] TYPESHARD_COLD inline void throw_block_buffer_size(
    std::span<const std::size_t> extents, std::size_t need, std::size_t got) {
  throw shape_error("typeshard: a block of shape " + shape_string(extents) + " needs " +
                    std::to_string(need) + " elements, the buffer has " + std::to_string(got));
}

}  // namespace detail

template <class T, std::size_t Rank, mesh_like Mesh, std::uint64_t Varying = 0>
class block {
 public:
  using value_type = T;
  using mesh_type = Mesh;
  static constexpr std::size_t rank = Rank;
  static constexpr std::uint64_t varying = Varying;
  using shape_type = typeshard::shape<Rank>;

  // Whether the values may differ between devices along the named mesh axis.
  template <axis_name Axis>
  static constexpr bool varies_over = ((Varying >> Mesh::index_of(Axis)) & 1) != 0;

  // A zero-filled block of the given extents, on the device of `context`.
  block(const shard_context<Mesh>& context, const shape_type& extents)
      : context_(context), extents_(extents), owned_(host_tensor<T, Rank>::element_count(extents)) {
    std::fill_n(owned_.data(), owned_.size(), T{});
    data_ = owned_.data();
  }

  // A block of the given extents, every element `value`.
  block(const shard_context<Mesh>& context, const shape_type& extents, const T& value)
      : block(context, extents) {
    std::fill_n(owned_.data(), owned_.size(), value);
  }

  // A copy of host data (for constants built inside a per-device function).
  block(const shard_context<Mesh>& context, const host_tensor<T, Rank>& host)
      : context_(context), extents_(host.extents()), owned_(host.size()) {
    if (host.size() != 0) std::copy_n(host.data(), host.size(), owned_.data());
    data_ = owned_.data();
  }

  // Adopts a buffer holding the block's elements in row-major order.
  block(const shard_context<Mesh>& context, const shape_type& extents, detail::buffer<T> data)
      : context_(context), extents_(extents), owned_(std::move(data)), data_(owned_.data()) {
    if (owned_.size() != host_tensor<T, Rank>::element_count(extents))
      detail::throw_block_buffer_size(extents, host_tensor<T, Rank>::element_count(extents),
                                      owned_.size());
  }

  // A read-only view of elements owned elsewhere (an input array's shard); writing
  // through data() makes a private copy first.
  block(block_view_t, const shard_context<Mesh>& context, const shape_type& extents, const T* data)
      : context_(context), extents_(extents), data_(data) {}

  // Copies share a view and copy owned data.
  block(const block& other)
      : context_(other.context_), extents_(other.extents_), data_(other.data_) {
    if (other.owns()) copy_from(other.data_);
  }
  block& operator=(const block& other) {
    if (this != &other) *this = block(other);
    return *this;
  }
  block(block&& other) noexcept
      : context_(other.context_), extents_(other.extents_), owned_(std::move(other.owned_)),
        data_(std::exchange(other.data_, nullptr)) {
    other.extents_ = {};
  }
  block& operator=(block&& other) noexcept {
    context_ = other.context_;
    extents_ = std::exchange(other.extents_, {});
    owned_ = std::move(other.owned_);
    data_ = std::exchange(other.data_, nullptr);
    return *this;
  }

  // Widening: a block varying over fewer axes is also one varying over more (pvary).
  template <std::uint64_t Fewer>
    requires((Fewer & ~Varying) == 0 && Fewer != Varying)
  block(const block<T, Rank, Mesh, Fewer>& other)  // NOLINT: implicit on purpose
      : block(other.template as_varying<Varying>()) {}
  template <std::uint64_t Fewer>
    requires((Fewer & ~Varying) == 0 && Fewer != Varying)
  block(block<T, Rank, Mesh, Fewer>&& other)  // NOLINT: implicit on purpose
      : block(std::move(other).template as_varying<Varying>()) {}

  // The same block retyped as varying over `More` (which must include Varying).
  template <std::uint64_t More>
  block<T, Rank, Mesh, More> as_varying() const& {
    static_assert(
        detail::require<(Varying & ~More) == 0, diagnostic::block_narrowed<Varying, More>>::value);
    if (owns()) {
      detail::buffer<T> copy(owned_.size());
      std::copy_n(data_, owned_.size(), copy.data());
      return block<T, Rank, Mesh, More>(context_, extents_, std::move(copy));
    }
    return block<T, Rank, Mesh, More>(block_view, context_, extents_, data_);
  }
  template <std::uint64_t More>
  block<T, Rank, Mesh, More> as_varying() && {
    static_assert(
        detail::require<(Varying & ~More) == 0, diagnostic::block_narrowed<Varying, More>>::value);
    if (owns()) {
      const shape_type extents = extents_;
      return block<T, Rank, Mesh, More>(context_, extents, std::move(*this).release());
    }
    return block<T, Rank, Mesh, More>(block_view, context_, extents_, data_);
  }

  const shard_context<Mesh>& context() const { return context_; }
  const shape_type& extents() const { return extents_; }
  std::size_t extent(std::size_t d) const { return extents_[d]; }
  std::size_t size() const { return host_tensor<T, Rank>::element_count(extents_); }

  const T* data() const { return data_; }
  T* data() {
    if (!owns()) copy_from(data_);
    return owned_.data();
  }
  std::span<const T> values() const { return {data_, size()}; }
  std::span<T> values() { return {data(), size()}; }

  template <class... I>
    requires(sizeof...(I) == Rank)
  const T& operator()(I... i) const {
    return data_[offset({static_cast<std::size_t>(i)...})];
  }
  template <class... I>
    requires(sizeof...(I) == Rank)
  T& operator()(I... i) {
    return data()[offset({static_cast<std::size_t>(i)...})];
  }

  host_tensor<T, Rank> to_host() const {
    return host_tensor<T, Rank>(extents_, std::vector<T>(data_, data_ + size()));
  }

  // The elements as an owned buffer (copied if this block is a view); leaves it empty.
  detail::buffer<T> release() && {
    if (!owns()) copy_from(data_);
    data_ = nullptr;
    extents_ = {};
    return std::move(owned_);
  }

  // Whether the block owns its elements (else it views an input's shard).
  bool owns() const { return owned_.data() != nullptr && owned_.data() == data_; }

 private:
  std::size_t offset(const std::array<std::size_t, Rank>& index) const {
    std::size_t o = 0;
    for (std::size_t d = 0; d < Rank; ++d) o = o * extents_[d] + index[d];
    return o;
  }
  void copy_from(const T* src) {
    detail::buffer<T> copy(size());
    if (copy.size() != 0) std::copy_n(src, copy.size(), copy.data());
    owned_ = std::move(copy);
    data_ = owned_.data();
  }

  shard_context<Mesh> context_;
  shape_type extents_{};
  detail::buffer<T> owned_;
  const T* data_ = nullptr;
};

template <class T>
inline constexpr bool is_block_v = false;
template <class T, std::size_t R, class M, std::uint64_t V>
inline constexpr bool is_block_v<block<T, R, M, V>> = true;

template <class T>
concept block_like = is_block_v<std::remove_cvref_t<T>>;


// ---- transposed views --------------------------------------------------------------------

// transposed<Block>: what ts::transpose(b) returns for a rank-2 block b: b read as its
// transpose, without copying (an expression, as in Eigen). Block-level ts::matmul takes it
// for either operand and hands the transpose to the GEMM (BLAS's trans flags), so
// matmul(transpose(x), dz) costs what matmul(x, dz) does. It refers to b: like an Eigen
// expression it must not outlive b (use it within the expression that makes it, or while b
// lives; `auto t = ts::transpose(x * 2);` dangles). eval() makes a block holding the
// transposed elements, for any other use (elementwise operations, returning it).
template <block_like Block>
class transposed {
 public:
  using base_type = Block;
  using value_type = typename Block::value_type;
  using mesh_type = typename Block::mesh_type;
  static constexpr std::size_t rank = 2;
  static constexpr std::uint64_t varying = Block::varying;
  using shape_type = typeshard::shape<2>;

  template <axis_name Axis>
  static constexpr bool varies_over = Block::template varies_over<Axis>;

  // Made by ts::transpose(b), which says what is wrong with another rank.
  explicit transposed(const Block& b)
    requires(Block::rank == 2)
      : block_(&b) {}

  // The block this views (stored untransposed).
  const Block& base() const { return *block_; }
  const shard_context<mesh_type>& context() const { return block_->context(); }

  // The transposed shape: extent(0) is the block's extent(1).
  shape_type extents() const { return {block_->extent(1), block_->extent(0)}; }
  std::size_t extent(std::size_t d) const { return block_->extent(1 - d); }
  std::size_t size() const { return block_->size(); }

  // t(i, j) is b(j, i).
  const value_type& operator()(std::size_t i, std::size_t j) const { return (*block_)(j, i); }

  // A new block holding the transposed elements, varying over the same axes.
  Block eval() const {
    const std::size_t rows = block_->extent(0), cols = block_->extent(1);
    detail::buffer<value_type> out(rows * cols);
    const value_type* in = block_->data();
    value_type* o = out.data();
    constexpr std::size_t tile = 32;  // both sides of a tile stay in L1
    for (std::size_t i0 = 0; i0 < rows; i0 += tile)
      for (std::size_t j0 = 0; j0 < cols; j0 += tile)
        for (std::size_t i = i0; i < std::min(rows, i0 + tile); ++i)
          for (std::size_t j = j0; j < std::min(cols, j0 + tile); ++j)
            o[j * rows + i] = in[i * cols + j];
    return Block(block_->context(), shape_type{cols, rows}, std::move(out));
  }

 private:
  const Block* block_;
};

template <class T>
inline constexpr bool is_transposed_v = false;
template <class B>
inline constexpr bool is_transposed_v<transposed<B>> = true;

// A ts::transpose view of a block.
template <class T>
concept transposed_block = is_transposed_v<std::remove_cvref_t<T>>;

// transpose(b): b of rank 2 read as its transpose (a view; see transposed above).
// transpose(transpose(b)) is b itself. A function object, as in Hana: argument-dependent
// lookup never finds it, so a program's own unqualified `transpose(block)` helper (a common
// name) keeps calling that helper rather than silently this.
struct transpose_t {
  template <block_like B>
  [[nodiscard]] auto operator()(const B& b) const {
    using blk = std::remove_cvref_t<B>;
    if constexpr (blk::rank == 2) {
      return transposed<blk>(b);
    } else {
      static_assert(
          detail::require<false, diagnostic::block_transpose_needs_rank_2<blk::rank>>::value);
      return b;  // only after the error above: the block itself, so no second error follows
    }
  }
  template <class B>
  [[nodiscard]] const B& operator()(const transposed<B>& t) const {
    return t.base();
  }
  // A sharded array (the global view): its transpose, ts::permute<1, 0>(a) of
  // ops/dims.hpp (rule 8), found in the array's namespace when this is instantiated, so
  // this layer includes no operation.
  template <class A>
    requires(!block_like<A> && !transposed_block<A> &&
             requires { typename A::unreduced_type; typename A::layout_type; })
  [[nodiscard]] auto operator()(const A& a) const {
    if constexpr (A::rank != 2) {
      static_assert(
          detail::require<false, diagnostic::transpose_rank_not_two<A::rank>>::value);
      return a;
    } else {
      return permute<1, 0>(a);
    }
  }
};
inline constexpr transpose_t transpose{};

}  // namespace typeshard
