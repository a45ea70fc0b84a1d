// benchmarks/compare_support/typeshard_main.cpp: the typeshard contender's entry point.
#include <cstdlib>
#include <string>

#include "typeshard_contender.hpp"

namespace compare {

// 8 devices; at most as many GEMMs at once as there are cores (cpu_devices' default), unless
// TYPESHARD_COMPARE_KERNEL_SLOTS says otherwise (8: every device's GEMM at once, time-sliced,
// as before kernel slots existed: for measuring what the slots bring).
ts::cpu_devices& devices() {
  static ts::cpu_devices d = [] {
    const char* slots = std::getenv("TYPESHARD_COMPARE_KERNEL_SLOTS");
    if (slots) return ts::cpu_devices(8, std::stoul(slots));
    return ts::cpu_devices(8);
  }();
  return d;
}

}  // namespace compare

int main() {
  compare::registry r;
  compare::add_matmul_workloads(r);
  compare::add_model_workloads(r);
  compare::add_collective_workloads(r);
  compare::add_transformer_workload(r);
  return compare::serve(r);
}
