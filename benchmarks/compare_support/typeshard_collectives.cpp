// benchmarks/compare_support/typeshard_collectives.cpp: all_gather, psum and psum_scatter
// through ts::shard_map on a 1-D mesh ("i") of 2 or 8 devices, as a user writes them.
//
// S (the `mib` parameter) is the array each device ends with (all_gather) or starts from
// (psum, psum_scatter), float32:
//   all_gather    in [S/4 elements] P('i') (S/n bytes a device)  -> out P(None), S a device
//   psum          in [n * S/4] P('i') (S a device)                -> out P(None), S a device
//   psum_scatter  in [n * S/4] P('i') (S a device)                -> out P('i'), S/n a device
// The timed call includes what a user pays: the shard_map dispatch and the output blocks'
// allocation.
#include <optional>

#include "typeshard_contender.hpp"

namespace compare {
namespace {

template <std::size_t N>
using mesh_n = ts::mesh<ts::axis("i", N)>;
using P_i = ts::spec<"i">;
using P_rep = ts::spec<ts::none>;

enum class op { all_gather, psum, psum_scatter };

template <op Op, std::size_t N>
auto program() {
  if constexpr (Op == op::all_gather)
    return ts::shard_map<mesh_n<N>, P_i, P_rep>(
        [](const auto& x) { return ts::all_gather<"i">(x, 0); });
  else if constexpr (Op == op::psum)
    return ts::shard_map<mesh_n<N>, P_i, P_rep>([](const auto& x) { return ts::psum<"i">(x); });
  else
    return ts::shard_map<mesh_n<N>, P_i, P_i>(
        [](const auto& x) { return ts::psum_scatter<"i">(x, 0); });
}

template <op Op, std::size_t N>
class collective final : public instance {
 public:
  explicit collective(const params& p) {
    if (p.get("devices") != N) throw std::runtime_error("device count mismatch");
    const std::size_t per_device = p.get("mib") * (std::size_t{1} << 20) / sizeof(float);
    const std::size_t global = Op == op::all_gather ? per_device : per_device * N;
    // Each device makes (and first touches) its own block.
    x_.emplace(ts::device_put<P_i>(mesh_, ts::shape<1>{global}, [](const auto& index) {
      ts::host_tensor<float, 1> t({index[0].size()});
      fill(t.data(), t.size(), 1, index[0].start);
      return t;
    }));
  }
  void run() override {
    out_.reset();
    out_.emplace(program_(*x_));
  }
  std::vector<double> check() override { return sample_array(*out_); }

 private:
  using program_t = decltype(program<Op, N>());
  using in_t = decltype(ts::device_put<P_i>(std::declval<const ts::device_mesh<mesh_n<N>>&>(),
                                            std::declval<const ts::host_tensor<float, 1>&>()));
  using out_t = decltype(std::declval<const program_t&>()(std::declval<const in_t&>()));
  ts::device_mesh<mesh_n<N>> mesh_{devices()};
  program_t program_ = program<Op, N>();
  std::optional<in_t> x_;
  std::optional<out_t> out_;
};

template <op Op>
factory make() {
  return [](const params& p) -> std::unique_ptr<instance> {
    if (p.get("devices") == 2) return std::make_unique<collective<Op, 2>>(p);
    if (p.get("devices") == 8) return std::make_unique<collective<Op, 8>>(p);
    throw std::runtime_error("collectives run on 2 or 8 devices");
  };
}

}  // namespace

void add_collective_workloads(registry& r) {
  r["all_gather"] = make<op::all_gather>();
  r["psum"] = make<op::psum>();
  r["psum_scatter"] = make<op::psum_scatter>();
}

}  // namespace compare
