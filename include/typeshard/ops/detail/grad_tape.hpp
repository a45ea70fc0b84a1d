// typeshard/ops/detail/grad_tape.hpp: the tape behind ts::value_and_grad, and the array
// helpers its backward rules use (cotangent types, retyping, zeros and ones, delivering a
// cotangent to an intermediate value or a contribution to a parameter).
// Internal: do not rely on anything in detail/ (the public face is ops/grad.hpp).
//
// The tape is a list of nodes in the order the forward pass made them; the backward pass
// walks it in reverse (a valid topological order: an op's inputs were made before it). Each
// node holds the cotangent of one intermediate value (its type: the value's mesh, extents
// and spec, fully reduced) and a `pull` that hands it to the op's inputs. The parameters
// (the argnums' leaves) collect their contributions by type, since a parameter's gradient
// type is only known once the whole function has been traced (plan/grad_plan.hpp).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../array/sharded_array.hpp"
#include "../../backend/backend.hpp"
#include "../../core/errors.hpp"
#include "../../array/detail/buffer.hpp"
#include "../../plan/grad_plan.hpp"
#include "../elementwise.hpp"
#include "../reshard.hpp"

namespace typeshard::detail {

// cotangent_t<A>: the type of an A's cotangent: A's element, mesh, spec and extents, fully
// reduced.
template <class A>
using cotangent_t = sharded_array<typename A::value_type, typename A::mesh_type,
                                  typename A::spec, typename A::extents_type, unreduced<>>;

// contribution_t<P, U>: a parameter P's gradient (or one use's contribution) unreduced over U.
template <class P, class U>
using contribution_t = sharded_array<typename P::value_type, typename P::mesh_type,
                                     typename P::spec, typename P::extents_type, U>;

// The same shards read as another type of the same layout (spec, unreduced axes: the
// caller's promise; static extents are checked by the constructor). No copy.
template <class Target, class A>
Target retype(const A& a, const shape<Target::rank>& extents) {
  static_assert(std::is_same_v<typename Target::spec, typename A::spec> ||
                    Target::rank != A::rank,
                "internal (a typeshard bug): retype between different specs");
  return Target(adopt_shards, a.device_mesh(), extents, a.shared_shards());
}
template <class Target, class A>
Target retype(const A& a) {
  if constexpr (std::is_same_v<Target, A>)
    return a;
  else
    return retype<Target>(a, a.extents());
}

// Every device's block of an array of spec at.spec filled with `v`, on values.
template <class T, std::size_t Rank>
TYPESHARD_NOINLINE std::vector<buffer<T>> filled_blocks(const placement<Rank>& at,
                                                        const shape<Rank>& extents, T v) {
  std::vector<buffer<T>> out(at.mesh.size);
  at.b.run(at.devices, [&](std::size_t p) {
    const shape<Rank> local = local_shape_of(at.mesh, at.spec, extents, p);
    buffer<T> b(host_tensor<T, Rank>::element_count(local));
    for (std::size_t i = 0; i < b.size(); ++i) b.data()[i] = v;
    out[p] = std::move(b);
  });
  return out;
}

// An array of type A filled with `v` on every device (its local block).
template <class A>
A filled(const device_mesh<typename A::mesh_type>& m, const shape<A::rank>& extents,
         typename A::value_type v) {
  // On values (filled_blocks): one instantiation per element type and rank.
  return A(adopt_shards, m, extents,
           filled_blocks<typename A::value_type, A::rank>(
               placement_of<typename A::mesh_type, typename A::spec, A::rank>(m), extents, v));
}

// G from C, which has G's layout but fewer unreduced axes: each device keeps its block when
// its coordinate along every axis G adds is 0, else holds zeros (the sum over those axes is
// then C's value). Local, no communication.
template <class G, class C>
G embed(const C& c) {
  if constexpr (std::is_same_v<G, C>) {
    return c;
  } else {
    using M = typename G::mesh_type;
    using U = typename G::unreduced_type;
    std::vector<buffer<typename G::value_type>> out(M::size);
    for_each_position(c.device_mesh(), [&](std::size_t p) {
      const auto coords = M::coordinates(p);
      bool keep = true;
      for (std::size_t i = 0; i < U::size; ++i)
        if (!unreduced_has<typename C::unreduced_type>(U::axes[i]) &&
            coords[M::index_of(U::axes[i])] != 0)
          keep = false;
      const std::span<const typename G::value_type> in = c.local_data(p);
      buffer<typename G::value_type> b(in.size());
      for (std::size_t i = 0; i < in.size(); ++i) b.data()[i] = keep ? in[i] : 0;
      out[p] = std::move(b);
    });
    return G(adopt_shards, c.device_mesh(), c.extents(), std::move(out));
  }
}

// A backward result (any spec, any unreduced axes, the operand's extents) as the cotangent
// of an intermediate value of type A: resharded to A's spec, fully reduced (the plan
// chooses the collectives: psum, psum_scatter, all_gather, slice).
template <class A, class Raw>
cotangent_t<A> to_cotangent(Raw&& raw) {  // a dying raw is resharded in place (ops/reshard.hpp)
  return retype<cotangent_t<A>>(reshard<typename A::spec>(std::forward<Raw>(raw)));
}

// The unreduced axes of a parameter P's contribution from a backward result of type Raw.
template <class P, class Raw>
using contribution_unreduced_of =
    contribution_unreduced_t<typename Raw::unreduced_type, typename P::spec>;

// A backward result as a contribution to parameter P's gradient: P's spec, still unreduced
// over Raw's axes that P does not shard over (the others are reduce-scattered into P's
// layout).
template <class P, class Raw>
auto to_contribution(const Raw& raw) {
  using U = contribution_unreduced_of<P, Raw>;
  return retype<contribution_t<P, U>>(reshard_keeping<typename P::spec, U>(raw));
}

// a + b for two arrays of one type (two cotangents of one value, two contributions to one
// parameter: the same mesh, layout and extents): element-wise operator+'s fast path
// (zip_shards), without its checks and broadcasting for every type on the tape.
[[noreturn]] TYPESHARD_COLD inline void throw_add_same_extents_differ() {
  throw usage_error("typeshard: internal error (a typeshard bug, please report it): the "
                    "gradient tape adds arrays of one type but different extents");
}
template <class C>
C add_same(const C& a, const C& b) {
  if (a.extents() != b.extents()) throw_add_same_extents_differ();
  return zip_shards<C>(a, b, fn::plus);
}

// b[p] added into a[p] at every addressable position p (a float or double sum: the additions
// add_same makes, each rounded once). On values: one instantiation per element type.
template <class T>
TYPESHARD_NOINLINE void add_into_blocks(backend& be, std::span<const device_id> devices,
                                        std::vector<buffer<T>>& a,
                                        const std::vector<buffer<T>>& b) {
  be.run(devices, [&](std::size_t p) {
    T* x = a[p].data();
    const T* y = b[p].data();
    for (std::size_t i = 0, n = a[p].size(); i < n; ++i) x[i] += y[i];
  });
}

// sum = add_same(sum, c), written into sum's own blocks when no other array shares them
// (a gradient sum the tape holds alone: no new blocks per contribution).
template <class C>
void accumulate(C& sum, const C& c) {
  using T = typename C::value_type;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (sum.extents() != c.extents()) throw_add_same_extents_differ();
    if (sum.shared_shards().use_count() == 1 && sum.shared_shards() != c.shared_shards()) {
      const auto& m = sum.device_mesh();
      // The vector is never const (detail::share_blocks); sum alone holds it.
      add_into_blocks<T>(m.get_backend(), std::span<const device_id>(m.devices()),
                         const_cast<std::vector<buffer<T>>&>(*sum.shared_shards()),
                         *c.shared_shards());
      return;
    }
  }
  sum = add_same(sum, c);
}

// ---- the tape ------------------------------------------------------------------------------

struct grad_node {
  virtual ~grad_node() = default;
  virtual void backward() = 0;
  std::string (*describe)() = nullptr;  // the backward's plans, for ts::backward_plans
};

// An op's backward closure, owned and called once: std::function without what the tape never
// uses (copying, target_type), so each closure compiles a call and a delete, not a manager
// that clones it (copying every array it captures) and reports its typeid.
template <class Cot>
class pull_fn {
 public:
  pull_fn() = default;
  template <class F>
  pull_fn& operator=(F f) {
    reset();
    obj_ = new F(std::move(f));
    call_ = [](void* o, const Cot& g) { (*static_cast<F*>(o))(g); };
    destroy_ = [](void* o) { delete static_cast<F*>(o); };
    return *this;
  }
  pull_fn(const pull_fn&) = delete;
  pull_fn& operator=(const pull_fn&) = delete;
  ~pull_fn() { reset(); }

  explicit operator bool() const { return obj_ != nullptr; }
  void operator()(const Cot& g) const { call_(obj_, g); }
  void reset() {
    if (obj_) destroy_(obj_);
    obj_ = nullptr;
  }

 private:
  void* obj_ = nullptr;
  void (*call_)(void*, const Cot&) = nullptr;
  void (*destroy_)(void*) = nullptr;
};

template <class Cot>
struct value_node final : grad_node {
  std::optional<Cot> grad;
  pull_fn<Cot> pull;

  void add(const Cot& c) {
    if (grad)
      accumulate(*grad, c);
    else
      grad = c;
  }
  void backward() override {
    if (grad && pull) pull(*grad);
    grad.reset();  // free it as soon as it has been used
    pull.reset();
  }
};

// One unique address per type: the key of a parameter's contributions of that type.
template <class T>
inline constexpr char type_key = 0;

// A parameter's contributions, one sum per contribution type. Each sum is owned alone (a
// unique_ptr with a delete per type, not a shared_ptr's control block: a vtable, typeinfo
// and four functions per contribution type).
struct leaf_store {
  using part_ptr = std::unique_ptr<void, void (*)(void*)>;
  std::vector<std::pair<const void*, part_ptr>> parts;

  template <class C>
  void add(const C& c) {
    for (auto& [key, part] : parts)
      if (key == &type_key<C>) {
        accumulate(*static_cast<C*>(part.get()), c);
        return;
      }
    parts.emplace_back(&type_key<C>,
                       part_ptr(new C(c), [](void* p) { delete static_cast<C*>(p); }));
  }
  template <class C>
  const C* find() const {
    for (const auto& [key, part] : parts)
      if (key == &type_key<C>) return static_cast<const C*>(part.get());
    return nullptr;
  }
};

struct grad_tape {
  std::vector<std::unique_ptr<grad_node>> nodes;
  std::vector<leaf_store> leaves;  // by argnum

  void backward() {
    for (std::size_t i = nodes.size(); i-- > 0;) nodes[i]->backward();
  }
};

}  // namespace typeshard::detail
