// benchmarks/compare_support/typeshard_main.cpp: the typeshard contender's entry point.
#include "typeshard_contender.hpp"

namespace compare {

ts::cpu_devices& devices() {
  static ts::cpu_devices d{8};
  return d;
}

}  // namespace compare

int main() {
  compare::registry r;
  compare::add_matmul_workloads(r);
  compare::add_model_workloads(r);
  compare::add_collective_workloads(r);
  return compare::serve(r);
}
