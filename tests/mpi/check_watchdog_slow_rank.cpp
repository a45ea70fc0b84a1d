// With checks on and a short check timeout (0.2 s), a rank that computes for longer than the
// timeout before joining its collectives is slow, not deadlocked: the watchdog's queries go
// unanswered until it arrives, no deadlock is reported, and every result is right (issue 41).
// Also: many checked collectives over crossing-free groups in a row, and a clean exit (the
// finalize barrier).
#include <mpi.h>

#include <typeshard/backend/mpi.hpp>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace ts = typeshard;

int main(int argc, char** argv) {
  ts::mpi_devices devices{argc, argv};
  devices.check_collectives(true);
  devices.check_timeout(0.2);
  std::vector<ts::device_id> all(devices.device_count());
  std::vector<std::size_t> members(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = members[i] = i;
  static constexpr ts::detail::axis_name axes[] = {ts::detail::axis_name("x")};
  const auto n = static_cast<float>(all.size());
  for (int round = 0; round < 3; ++round) {
    // The slow rank rotates; it computes (here: sleeps, the scenario itself) for 0.7 s.
    if (devices.process_index() == static_cast<std::size_t>(round) % all.size())
      std::this_thread::sleep_for(std::chrono::milliseconds(700));
    float x = 1.0f;
    devices.run(all, [&](std::size_t i) {
      for (int k = 0; k < 50; ++k) {
        x = 1.0f;
        devices.all_reduce(ts::collective_group{members, i, axes}, ts::element_type_of<float>,
                           ts::reduce_op::sum, &x, &x, 1);
      }
    });
    if (x != n) {
      std::fprintf(stderr, "check_watchdog_slow_rank: rank %zu got %g, want %g\n",
                   devices.process_index(), static_cast<double>(x), static_cast<double>(n));
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  // The last rank leaves later than the others: they wait in the finalize barrier, which is
  // not a deadlock either.
  if (devices.process_index() + 1 == all.size())
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
  return 0;
}
