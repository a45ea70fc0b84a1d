// typeshard/array/device_mesh.hpp: a mesh bound to concrete devices of a backend.
//
//   ts::cpu_devices devices{8};
//   ts::device_mesh<mesh_2x2> m{devices};                 // devices 0..3, row-major
//   ts::device_mesh<mesh_2x2> half{devices, {4, 5, 6, 7}}; // the other half
//   ts::device_mesh<mesh_1d> odd{devices, {1, 3, 5, 7}};   // a strided subset
//
// Position p of the mesh (row-major over its axes) runs on devices()[p]. Like JAX's
// Mesh(np.array(devices).reshape(...), names).
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "../backend/backend.hpp"
#include "../core/errors.hpp"
#include "../core/mesh.hpp"

namespace typeshard {

template <mesh_type Mesh>
class device_mesh {
 public:
  using mesh_type = Mesh;

  // The first Mesh::size devices of the backend, in order.
  explicit device_mesh(backend& b) : backend_(&b) {
    b.check_default_mesh(Mesh::size, Mesh::to_string());
    if (b.device_count() < Mesh::size)
      throw device_mesh_error("typeshard: " + Mesh::to_string() + " needs " +
                              std::to_string(Mesh::size) + " devices but the backend has " +
                              std::to_string(b.device_count()) +
                              "; create more devices or use a smaller mesh");
    std::vector<device_id> ids(Mesh::size);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = i;
    devices_ = std::make_shared<const std::vector<device_id>>(std::move(ids));
  }

  // An explicit device list, in mesh row-major order: subsets, strides, custom orders.
  device_mesh(backend& b, std::vector<device_id> devices) : backend_(&b) {
    check(b, devices);
    devices_ = std::make_shared<const std::vector<device_id>>(std::move(devices));
  }
  device_mesh(backend& b, std::initializer_list<device_id> devices)
      : device_mesh(b, std::vector<device_id>(devices)) {}

  backend& get_backend() const { return *backend_; }
  const std::vector<device_id>& devices() const { return *devices_; }
  device_id device_at(std::size_t position) const { return (*devices_)[position]; }

  // Two device meshes are the same when they use the same backend and devices in the same
  // order; only then can arrays on them meet in one operation.
  friend bool operator==(const device_mesh& a, const device_mesh& b) {
    return a.backend_ == b.backend_ && *a.devices_ == *b.devices_;
  }

  // "Mesh('x': 2, 'y': 2) on devices [0, 1, 2, 3]".
  std::string to_string() const {
    std::string out = Mesh::to_string() + " on devices [";
    for (std::size_t i = 0; i < devices_->size(); ++i) {
      if (i) out += ", ";
      out += std::to_string((*devices_)[i]);
    }
    return out + "]";
  }

 private:
  static void check(const backend& b, const std::vector<device_id>& devices) {
    if (devices.size() != Mesh::size)
      throw device_mesh_error("typeshard: " + Mesh::to_string() + " needs exactly " +
                              std::to_string(Mesh::size) + " devices, but the device list has " +
                              std::to_string(devices.size()) +
                              "; list one device per mesh position");
    for (std::size_t i = 0; i < devices.size(); ++i) {
      if (devices[i] >= b.device_count())
        throw device_mesh_error("typeshard: device " + std::to_string(devices[i]) +
                                " (entry " + std::to_string(i) +
                                " of the device list) does not exist: the backend has " +
                                std::to_string(b.device_count()) + " devices, 0 to " +
                                std::to_string(b.device_count() - 1));
      for (std::size_t j = 0; j < i; ++j)
        if (devices[j] == devices[i])
          throw device_mesh_error("typeshard: device " + std::to_string(devices[i]) +
                                  " appears twice in the device list (entries " +
                                  std::to_string(j) + " and " + std::to_string(i) +
                                  "); each mesh position needs its own device");
    }
  }

  backend* backend_;
  std::shared_ptr<const std::vector<device_id>> devices_;
};

}  // namespace typeshard
