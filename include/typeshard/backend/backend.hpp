// typeshard/backend/backend.hpp: what a backend is.
//
// A backend owns devices and runs per-device functions on them. typeshard's runtime
// (device_put, elementwise ops, collectives, matmul) talks only to this interface, so
// the same program runs on the thread pool (cpu_devices) or on MPI ranks.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "../detail/function_ref.hpp"

namespace typeshard {

using device_id = std::size_t;

// device: one device of a backend, as JAX shows it.
struct device {
  device_id id = 0;
  std::string_view platform = "cpu";

  // "CPU 0": the label visualize draws.
  std::string label() const {
    std::string p(platform);
    for (char& c : p) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    return p + " " + std::to_string(id);
  }
  // "CpuDevice(id=0)", as JAX prints a device.
  std::string to_string() const {
    std::string p(platform);
    if (!p.empty() && p[0] >= 'a' && p[0] <= 'z') p[0] = static_cast<char>(p[0] - 'a' + 'A');
    return p + "Device(id=" + std::to_string(id) + ")";
  }
  friend bool operator==(const device&, const device&) = default;
};

class backend {
 public:
  virtual ~backend() = default;

  // Total number of devices, addressable by this process or not.
  virtual std::size_t device_count() const = 0;

  // Whether this process holds the device's memory and runs its functions (all devices on
  // the thread pool; one per rank on MPI).
  virtual bool is_addressable(device_id d) const = 0;

  // "cpu".
  virtual std::string_view platform() const = 0;

  device describe(device_id d) const { return {d, platform()}; }

  // Runs body(i) for every i whose devices[i] is addressable, each on its device,
  // concurrently, and returns when all have returned. The devices must be distinct. If
  // bodies throw, the others are released from any collective they wait in, all are
  // joined, and the first failure (by position in `devices`) is rethrown as a
  // device_error that names the device. Not callable from inside a body (usage_error).
  virtual void run(std::span<const device_id> devices,
                   detail::function_ref<void(std::size_t)> body) = 0;
};

}  // namespace typeshard
