// expect-abort: typeshard: rank [0-9]+ of [0-9]+: the function running on device [0-9]+ threw: typeshard: the devices of a collective group called different collectives.*rank 1 called all_reduce at [^ ]*abort_checked_mismatch\.cpp:28 \(signature
//
// With collective checks on (TYPESHARD_MPI_CHECK=1, here check_collectives(true)), members
// that call the same collective with different sizes are caught before MPI sees the call,
// as the thread pool catches them; inside a per-device function that aborts the job.
#include <mpi.h>

#include <typeshard/backend/mpi.hpp>
#include <typeshard/typeshard.hpp>

#include <vector>

namespace ts = typeshard;

int main(int argc, char** argv) {
  ts::mpi_devices devices{argc, argv};
  devices.check_collectives(true);
  const std::vector<ts::device_id> all_devices = [&] {
    std::vector<ts::device_id> d(devices.device_count());
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = i;
    return d;
  }();
  std::vector<std::size_t> members(all_devices.size());
  for (std::size_t i = 0; i < members.size(); ++i) members[i] = i;
  std::vector<float> x(4, 1.0f);
  devices.run(all_devices, [&](std::size_t i) {
    const std::size_t n = i == 1 ? 3 : 4;  // rank 1 disagrees on the size
    devices.all_reduce(ts::collective_group{members, i}, ts::element_type_of<float>,
                       ts::reduce_op::sum, x.data(), x.data(), n);
  });
  MPI_Barrier(MPI_COMM_WORLD);  // not reached: every rank sees the mismatch and aborts
  return 0;
}
