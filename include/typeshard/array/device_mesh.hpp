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
#include <atomic>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "../backend/backend.hpp"
#include "../core/config.hpp"
#include "../core/errors.hpp"
#include "../core/mesh.hpp"

namespace typeshard {

namespace detail {

// device_mesh's checks and strings are functions of values (the mesh's printed name, its
// size, the device list), compiled once per TU rather than once per mesh type.
[[noreturn]] TYPESHARD_COLD inline void throw_too_few_devices(const std::string& mesh,
                                                           std::size_t need, std::size_t have) {
  throw device_mesh_error(message({"typeshard: ", mesh, " needs ", need,
                                   " devices but the backend has ", have,
                                   "; create more devices or use a smaller mesh"}));
}

TYPESHARD_COLD inline void check_device_list(const backend& b,
                                             const std::vector<device_id>& devices,
                                             std::size_t need, const std::string& mesh) {
  if (devices.size() != need)
    throw device_mesh_error("typeshard: " + mesh + " needs exactly " + std::to_string(need) +
                            " devices, but the device list has " +
                            std::to_string(devices.size()) +
                            "; list one device per mesh position");
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] >= b.device_count())
      throw device_mesh_error("typeshard: device " + std::to_string(devices[i]) + " (entry " +
                              std::to_string(i) +
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

TYPESHARD_COLD inline std::string devices_string(const std::string& mesh,
                                                 const std::vector<device_id>& devices) {
  std::string out = mesh;
  out += " on devices [";
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (i) out += ", ";
    append_integer(out, devices[i]);
  }
  out += "]";
  return out;
}

// Two operands of `op` on different device meshes (printed as device_mesh::to_string).
[[noreturn]] TYPESHARD_COLD inline void throw_operands_on_different_devices(
    const char* op, const std::string& a, const std::string& b, const char* fix) {
  throw device_mesh_error(message({"typeshard: ", op,
                                   ": the operands live on different devices: ", a, " and ", b,
                                   "; ", fix}));
}

// What every copy of a device mesh shares: its device list and its backend's lifetime.
struct mesh_devices {
  std::vector<device_id> ids;
  std::shared_ptr<const std::atomic<bool>> backend_alive;
};

// A device mesh's device list, made once per mesh: on values (the mesh's size and its
// printed name, built only when a check needs it), so one copy serves every mesh type.
TYPESHARD_COLD inline std::shared_ptr<const mesh_devices> first_devices(
    backend& b, std::size_t size, std::string (*mesh)()) {
  b.check_default_mesh(size, mesh());
  if (b.device_count() < size) throw_too_few_devices(mesh(), size, b.device_count());
  std::vector<device_id> ids(size);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = i;
  return std::make_shared<const mesh_devices>(mesh_devices{std::move(ids), b.lifetime()});
}
TYPESHARD_COLD inline std::shared_ptr<const mesh_devices> listed_devices(
    backend& b, std::vector<device_id> devices, std::size_t size, std::string (*mesh)()) {
  check_device_list(b, devices, size, mesh());
  return std::make_shared<const mesh_devices>(mesh_devices{std::move(devices), b.lifetime()});
}

// A device mesh used after its backend was destroyed.
[[noreturn]] TYPESHARD_COLD TYPESHARD_NOINLINE inline void throw_backend_destroyed(
    const std::string& mesh) {
  throw usage_error(message(
      {"typeshard: ", mesh, " is used after its backend (the cpu_devices or mpi_devices it "
       "was made on) was destroyed; create the backend first and keep it alive for as long as "
       "any device mesh or array on it is used"}));
}

// What the operations that need both operands on one device mesh tell the user to do.
inline constexpr const char* move_to_other_devices_fix =
    "fix: move one onto the other's devices with ts::device_put(x, other.device_mesh()) (or "
    "ts::reshard<Spec>(x, mesh))";

}  // namespace detail

template <mesh_like Mesh>
class device_mesh {
 public:
  using mesh_type = Mesh;

  // The first Mesh::size devices of the backend, in order.
  explicit device_mesh(backend& b)
      : backend_(&b), devices_(detail::first_devices(b, Mesh::size, &Mesh::to_string)) {}

  // An explicit device list, in mesh row-major order: subsets, strides, custom orders.
  device_mesh(backend& b, std::vector<device_id> devices)
      : backend_(&b),
        devices_(detail::listed_devices(b, std::move(devices), Mesh::size, &Mesh::to_string)) {}
  device_mesh(backend& b, std::initializer_list<device_id> devices)
      : device_mesh(b, std::vector<device_id>(devices)) {}

  // The backend, which must still exist: a device mesh (and every array on it) does not own
  // its backend, and reaching one that was destroyed is a usage_error, never a use after free.
  backend& get_backend() const {
    if (!devices_->backend_alive->load(std::memory_order_acquire))
      detail::throw_backend_destroyed(to_string());
    return *backend_;
  }
  const std::vector<device_id>& devices() const { return devices_->ids; }
  device_id device_at(std::size_t position) const { return devices_->ids[position]; }

  // Two device meshes are the same when they use the same backend and devices in the same
  // order; only then can arrays on them meet in one operation.
  friend bool operator==(const device_mesh& a, const device_mesh& b) {
    return a.backend_ == b.backend_ && a.devices_->ids == b.devices_->ids;
  }

  // "Mesh('x': 2, 'y': 2) on devices [0, 1, 2, 3]".
  std::string to_string() const {
    return detail::devices_string(Mesh::to_string(), devices_->ids);
  }

 private:
  backend* backend_;
  std::shared_ptr<const detail::mesh_devices> devices_;
};

namespace detail {

// Operands of one operation must be on the same devices (the operations' run-time check):
// one instantiation per mesh type, out of line.
template <mesh_like M>
TYPESHARD_NOINLINE void check_same_device_mesh(const device_mesh<M>& a, const device_mesh<M>& b,
                                               const char* op, const char* fix) {
  if (!(a == b)) throw_operands_on_different_devices(op, a.to_string(), b.to_string(), fix);
}

}  // namespace detail

}  // namespace typeshard
