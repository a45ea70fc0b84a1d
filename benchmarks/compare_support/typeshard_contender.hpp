// benchmarks/compare_support/typeshard_contender.hpp: the typeshard contender of
// benchmarks/compare, split over several translation units (so they build in parallel).
// Every workload runs on one pool of 8 simulated devices (ts::cpu_devices, like JAX's
// --xla_force_host_platform_device_count=8); meshes take its first 2, 4 or 8 devices.
#pragma once

#include <map>
#include <string>
#include <typeshard/kernels/gemm.hpp>
#include <typeshard/typeshard.hpp>

#include "protocol.hpp"

namespace compare {

namespace ts = typeshard;

ts::cpu_devices& devices();

using registry = std::map<std::string, factory>;
void add_matmul_workloads(registry& r);      // typeshard_matmul.cpp
void add_model_workloads(registry& r);       // typeshard_models.cpp
void add_collective_workloads(registry& r);  // typeshard_collectives.cpp
void add_transformer_workload(registry& r);  // typeshard_transformer.cpp

// What every device's GEMM runs, for the report: "gemm: typeshard avx512; ".
inline std::string gemm_info() {
  return "gemm: " + ts::kernels::gemm_kernel_name() + "; ";
}

// The global result of an array, sampled at the check positions.
template <class Array>
std::vector<double> sample_array(const Array& a) {
  const auto host = ts::to_host(a);
  return sample(host.data(), host.size());
}

}  // namespace compare
