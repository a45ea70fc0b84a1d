// expect-abort: collective deadlock \(TYPESHARD_MPI_CHECK.*rank 0 waits in all_reduce over "x" \(group of ranks \[[0-9, ]*\]\) at [^ ]*abort_deadlock_early_exit\.cpp:28:.*rank 1 waits in the destruction of ts::mpi_devices
//
// A rank that returns from main early (issue 41): rank 1 leaves (destroying its
// mpi_devices) while the other ranks wait for it in a psum. With checks on, the leaving rank
// waits for every rank before MPI_Finalize and answers the watchdog, which reports the
// peers' pending psum and the finalizing rank within about twice the check timeout (here
// 0.5 s); the job exits non-zero instead of hanging.
#include <mpi.h>

#include <typeshard/backend/mpi.hpp>

#include <cstddef>
#include <vector>

namespace ts = typeshard;

int main(int argc, char** argv) {
  ts::mpi_devices devices{argc, argv};
  devices.check_collectives(true);
  devices.check_timeout(0.5);
  if (devices.process_index() == 1) return 0;  // leaves early
  std::vector<ts::device_id> all(devices.device_count());
  std::vector<std::size_t> members(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = members[i] = i;
  float x = 1.0f;
  static constexpr ts::detail::axis_name axes[] = {ts::detail::axis_name("x")};
  devices.run(all, [&](std::size_t i) {
    devices.all_reduce(ts::collective_group{members, i, axes}, ts::element_type_of<float>,
                       ts::reduce_op::sum, &x, &x, 1);
  });
  return 0;  // not reached: the watchdog aborts the job
}
