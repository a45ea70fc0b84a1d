// tests/unit/support/roundtrip_reference.hpp: the device_put / to_host property test's
// machinery, shared by the tests/unit/sharded_array_roundtrip_*.cpp files (split by mesh so
// that each compiles quickly).
//
// For valid specs of ranks 1 to 3 on a mesh (support/foundation.hpp; all of them, or every
// Stride-th: device_put, to_host and sharded_array cost ~0.3 s of compile time per spec, too
// much for all 544 in reasonable translation units; layout, which decides where every element
// goes, is checked for all of them by layout_properties_*.cpp), with corner-case
// and random extents (even, uneven, smaller than the shard count, 0), on cpu_devices{8} with
// the default device order and with a random subset of the devices in a random order:
//   - to_host(device_put<Spec>(m, host)) has host's extents and exactly host's bytes (the
//     data is random bit patterns: NaNs with payloads, negative zeros, denormals);
//   - addressable_shards() lists every mesh position once, in mesh order, each on the device
//     the device mesh puts there, with the layout's index, local extents and replica id, and
//     its data is, element for element, the host data at its index (brute force);
//   - local_data(p) is the shard's data, and shard.to_host() copies it.
// The element type rotates with the spec number: float, double, int.
//
// Only put_and_observe<Mesh, Spec, Rank, T> is instantiated per spec; it records what it saw
// in plain vectors and the checks are ordinary functions (see layout_reference.hpp for why).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <typeshard/typeshard.hpp>

#include "foundation.hpp"

namespace ts_test {

struct shard_record {
  ts::device_id device = 0;
  std::string platform;
  std::size_t mesh_position = 0;
  std::vector<ts::slice> index;
  std::vector<std::size_t> shape;
  std::vector<unsigned char> data;           // the shard's bytes
  std::size_t replica_id = 0;
  std::vector<ts::slice> expected_index;     // layout::index for its position
  std::size_t expected_replica = 0;          // layout::replica_index for its position
  bool local_data_is_shard_data = false;     // local_data(p) holds the same elements
  bool to_host_matches = false;              // shard.to_host() has its shape and bytes
};

struct roundtrip_record {
  std::string what;  // mesh, spec, element type, for messages
  std::size_t element_size = 0;
  std::vector<std::size_t> extents;
  std::vector<unsigned char> host;           // what went in
  std::vector<std::size_t> back_extents;
  std::vector<unsigned char> back;           // what to_host gave back
  std::vector<std::size_t> array_extents;    // sharded_array::extents()
  std::size_t array_size = 0;                // sharded_array::size()
  std::vector<ts::device_id> mesh_devices;   // device_mesh::devices()
  std::vector<shard_record> shards;
};

inline void fill_random_bytes(unsigned char* out, std::size_t n, std::mt19937_64& rng) {
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<unsigned char>(rng() >> 56);
}

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else return "int";
}

// "mesh (x: 2, y: 2), spec ([x], [], [y z]), float", built at run time from the constexpr
// arrays of the mesh and the padded spec (not Mesh::to_string: that would be compiled again
// for every spec).
inline std::string describe_types(const ts::axis* axes, std::size_t mesh_rank,
                                  const ts::dim_spec* dims, std::size_t rank, const char* type) {
  std::string out = "mesh (";
  for (std::size_t i = 0; i < mesh_rank; ++i)
    out.append(i ? ", " : "").append(axes[i].name.view()).append(": ").append(
        std::to_string(axes[i].size));
  out += "), spec (";
  for (std::size_t d = 0; d < rank; ++d) {
    out += d ? ", [" : "[";
    for (std::size_t a = 0; a < dims[d].count; ++a)
      out.append(a ? " " : "").append(dims[d].axes[a].view());
    out += "]";
  }
  return out + "), " + type;
}

// What the array's shards say about themselves: compiled once per element type and rank.
template <class T, std::size_t Rank>
void record_shards(const std::vector<ts::shard<T, Rank>>& shards, roundtrip_record& r) {
  for (const ts::shard<T, Rank>& s : shards) {
    shard_record sr;
    sr.device = s.device.id;
    sr.platform = std::string(s.device.platform);
    sr.mesh_position = s.mesh_position;
    sr.index.assign(s.index.begin(), s.index.end());
    sr.shape.assign(s.shape.begin(), s.shape.end());
    sr.data.assign(reinterpret_cast<const unsigned char*>(s.data.data()),
                   reinterpret_cast<const unsigned char*>(s.data.data() + s.data.size()));
    sr.replica_id = s.replica_id;
    const ts::host_tensor<T, Rank> copy = s.to_host();
    sr.to_host_matches = copy.extents() == s.shape && copy.size() == s.data.size() &&
                         (copy.size() == 0 ||
                          std::memcmp(copy.data(), s.data.data(), copy.size() * sizeof(T)) == 0);
    r.shards.push_back(std::move(sr));
  }
}

template <class T, std::size_t Rank>
void record_host(const ts::host_tensor<T, Rank>& t, std::vector<std::size_t>& extents,
                 std::vector<unsigned char>& bytes) {
  extents.assign(t.extents().begin(), t.extents().end());
  bytes.assign(reinterpret_cast<const unsigned char*>(t.data()),
               reinterpret_cast<const unsigned char*>(t.data() + t.size()));
}

template <class T, std::size_t Rank>
ts::host_tensor<T, Rank> random_host(const std::vector<std::size_t>& extents, std::mt19937_64& rng) {
  ts::shape<Rank> global{};
  std::copy(extents.begin(), extents.end(), global.begin());
  ts::host_tensor<T, Rank> host(global);
  fill_random_bytes(reinterpret_cast<unsigned char*>(host.data()), host.size() * sizeof(T), rng);
  return host;
}

// The only code compiled per spec: put, get back, and the layout's answers per position.
template <class Mesh, class Spec, std::size_t Rank, class T>
roundtrip_record put_and_observe(ts::backend& devices, const std::vector<ts::device_id>* order,
                                 const std::vector<std::size_t>& extents, std::mt19937_64& rng) {
  using L = ts::layout<Mesh, Spec, Rank>;
  roundtrip_record r;
  r.what = describe_types(Mesh::axes.data(), Mesh::rank, L::spec_type::dims.data(), Rank, type_name<T>());
  r.element_size = sizeof(T);
  r.extents = extents;
  const ts::host_tensor<T, Rank> host = random_host<T, Rank>(extents, rng);
  std::vector<std::size_t> unused;
  record_host(host, unused, r.host);

  const ts::device_mesh<Mesh> m = order ? ts::device_mesh<Mesh>(devices, *order)
                                        : ts::device_mesh<Mesh>(devices);
  r.mesh_devices = m.devices();
  const auto a = ts::device_put<Spec>(m, host);
  record_host(ts::to_host(a), r.back_extents, r.back);
  r.array_extents.assign(a.extents().begin(), a.extents().end());
  r.array_size = a.size();
  record_shards(a.addressable_shards(), r);
  for (shard_record& sr : r.shards) {
    const ts::index_slices<Rank> ix = L::index(host.extents(), sr.mesh_position);
    sr.expected_index.assign(ix.begin(), ix.end());
    sr.expected_replica = L::replica_index(sr.mesh_position);
    const auto local = a.local_data(sr.mesh_position);
    sr.local_data_is_shard_data =
        local.size() * sizeof(T) == sr.data.size() &&
        (local.empty() || std::memcmp(local.data(), sr.data.data(), sr.data.size()) == 0);
  }
  return r;
}

inline std::string describe(const roundtrip_record& r) {
  std::string out = r.what + ", shape (";
  for (std::size_t d = 0; d < r.extents.size(); ++d) out += (d ? ", " : "") + std::to_string(r.extents[d]);
  out += "), devices [";
  for (std::size_t i = 0; i < r.mesh_devices.size(); ++i)
    out += (i ? ", " : "") + std::to_string(r.mesh_devices[i]);
  return out + "]";
}

inline void check(const roundtrip_record& r, const std::vector<ts::device_id>& expected_devices) {
  INFO(describe(r));
  const std::size_t rank = r.extents.size();
  const std::size_t es = r.element_size;

  // ---- the round trip ----
  REQUIRE(r.back_extents == r.extents);
  REQUIRE(r.array_extents == r.extents);
  REQUIRE(r.array_size * es == r.host.size());
  REQUIRE(r.back.size() == r.host.size());
  REQUIRE(r.back == r.host);  // the same bytes
  REQUIRE(r.mesh_devices == expected_devices);

  // ---- the shards ----
  REQUIRE(r.shards.size() == expected_devices.size());  // all addressable on cpu_devices
  std::vector<std::size_t> strides(rank, 1);
  for (std::size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * r.extents[d];
  for (std::size_t k = 0; k < r.shards.size(); ++k) {
    const shard_record& s = r.shards[k];
    CAPTURE(k, s.device);
    REQUIRE(s.mesh_position == k);  // mesh order, each position once
    REQUIRE(s.device == expected_devices[k]);
    REQUIRE(s.platform == "cpu");
    REQUIRE(s.index == s.expected_index);
    REQUIRE(s.replica_id == s.expected_replica);
    REQUIRE(s.local_data_is_shard_data);
    REQUIRE(s.to_host_matches);
    std::size_t elements = 1;
    for (std::size_t d = 0; d < rank; ++d) {
      REQUIRE(s.shape[d] == s.index[d].size());
      REQUIRE(s.index[d].stop <= r.extents[d]);
      elements *= s.shape[d];
    }
    REQUIRE(s.data.size() == elements * es);
    // Element by element: the shard's j-th element (row-major over its shape) is the host's
    // element at index start + (j's multi-index).
    std::vector<std::size_t> i(rank, 0);
    for (std::size_t j = 0; j < elements; ++j) {
      std::size_t offset = 0;
      for (std::size_t d = 0; d < rank; ++d) offset += (s.index[d].start + i[d]) * strides[d];
      if (std::memcmp(s.data.data() + j * es, r.host.data() + offset * es, es) != 0) {
        CAPTURE(j, i, offset);
        FAIL("the shard's element differs from the host data at its index");
      }
      for (std::size_t d = rank; d-- > 0;) {
        if (++i[d] < s.shape[d]) break;
        i[d] = 0;
      }
    }
  }
}

// One spec to test: how to put and observe, and the shards per dimension (to draw extents).
struct roundtrip_case {
  roundtrip_record (*put)(ts::backend&, const std::vector<ts::device_id>*,
                          const std::vector<std::size_t>&, std::mt19937_64&);
  std::size_t mesh_size;
  std::vector<std::size_t> shards;
};

template <class Mesh, std::size_t Rank, std::size_t Stride>
void collect_roundtrip_specs(std::vector<roundtrip_case>& cases) {
  for_each_spec_sampled<Mesh, Rank, Stride>([&]<class Spec, std::size_t J>() {
    using T = std::conditional_t<J % 3 == 0, float, std::conditional_t<J % 3 == 1, double, int>>;
    cases.push_back({&put_and_observe<Mesh, Spec, Rank, T>, Mesh::size, {}});
    for (std::size_t d = 0; d < Rank; ++d)
      cases.back().shards.push_back(ts::layout<Mesh, Spec, Rank>::shards_along(d));
  });
}

// The number of specs check_roundtrips<Stride> samples on a mesh of k axes.
constexpr std::size_t sampled_specs(std::size_t specs_of_rank_1, std::size_t specs_of_rank_2,
                                    std::size_t specs_of_rank_3, std::size_t stride) {
  std::size_t n = 0;
  const std::size_t counts[3] = {specs_of_rank_1, specs_of_rank_2, specs_of_rank_3};
  for (std::size_t rank = 1; rank <= 3; ++rank)
    for (std::size_t i = rank % stride; i < counts[rank - 1]; i += stride) ++n;
  return n;
}

// check_roundtrips<Stride>(Meshes{}): every Stride-th valid spec of ranks 1 to 3 on each
// mesh (all of them for Stride 1); returns the number of specs checked.
template <std::size_t Stride, class... Meshes>
std::size_t check_roundtrips(mesh_list<Meshes...> meshes) {
  std::vector<roundtrip_case> cases;
  for_each_mesh(meshes, [&]<class Mesh>() {
    collect_roundtrip_specs<Mesh, 1, Stride>(cases);
    collect_roundtrip_specs<Mesh, 2, Stride>(cases);
    collect_roundtrip_specs<Mesh, 3, Stride>(cases);
  });
  INFO(seed_message());
  std::mt19937_64 rng(seed());
  ts::cpu_devices devices{8};
  for (const roundtrip_case& c : cases) {
    const std::size_t rank = c.shards.size();
    std::vector<std::vector<std::size_t>> shapes{std::vector<std::size_t>(rank, 0), c.shards};
    for (int trial = 0; trial < 6; ++trial)
      shapes.push_back(random_extents(rng, c.shards, rank == 3 ? 600 : 3000));
    std::vector<ts::device_id> first(c.mesh_size);
    std::iota(first.begin(), first.end(), ts::device_id{0});
    for (const auto& extents : shapes) {
      // The default device order...
      check(c.put(devices, nullptr, extents, rng), first);
      // ...and a random subset of the 8 devices in a random order.
      std::vector<ts::device_id> order(8);
      std::iota(order.begin(), order.end(), ts::device_id{0});
      std::shuffle(order.begin(), order.end(), rng);
      order.resize(c.mesh_size);
      check(c.put(devices, &order, extents, rng), order);
    }
  }
  return cases.size();
}

}  // namespace ts_test
