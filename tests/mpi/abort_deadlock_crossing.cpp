// expect-abort: collective deadlock \(TYPESHARD_MPI_CHECK.*rank 0 waits in all_reduce over "x" \(group of ranks \[0, 2\]\) at [^ ]*abort_deadlock_crossing\.cpp:31: that group's collective #2.*rank 1 waits in all_reduce over "y" \(group of ranks \[0, 1\]\) at [^ ]*abort_deadlock_crossing\.cpp:32:.*rank 2 waits in all_reduce over "y".*rank 3 waits in all_reduce over "x" \(group of ranks \[1, 3\]\) at [^ ]*abort_deadlock_crossing\.cpp:31:
// ranks: 4
//
// Collectives called in crossing orders over different groups (issue 41): on a (2, 2) mesh,
// ranks 0 and 3 psum over "x" and then over "y", ranks 1 and 2 over "y" and then over "x".
// Every rank waits for a peer that waits in another group: with checks on, the watchdog
// reports every rank's pending collective (its group, its call site: the line of the psum,
// the group's and the rank's collective number) within about twice the check timeout (here 0.5 s), and the job exits non-zero.
#include <mpi.h>

#include <typeshard/backend/mpi.hpp>
#include <typeshard/typeshard.hpp>

namespace ts = typeshard;
using mesh_2x2 = ts::mesh<ts::axis("x", 2), ts::axis("y", 2)>;
using xy = ts::spec<"x", "y">;

int main(int argc, char** argv) {
  ts::mpi_devices devices{argc, argv};
  devices.check_collectives(true);
  devices.check_timeout(0.5);
  ts::device_mesh<mesh_2x2> m{devices};
  const auto a = ts::device_put<xy>(m, ts::host_tensor<float, 2>({2, 2}, 1.0f));
  // Once in the same order everywhere (the groups' communicators exist afterwards)...
  const auto once = ts::shard_map<mesh_2x2, xy, xy>(
      [&](const auto& b) { return ts::psum<"y">(ts::psum<"x">(b)); })(a);
  if (!(ts::to_host(once) == ts::host_tensor<float, 2>({2, 2}, 4.0f))) return 2;
  // ...then in crossing orders.
  const bool x_first = devices.process_index() == 0 || devices.process_index() == 3;
  const auto r = ts::shard_map<mesh_2x2, xy, xy>([&](const auto& b) {
    if (x_first) return ts::psum<"y">(ts::psum<"x">(b));
    return ts::psum<"x">(ts::psum<"y">(b));
  })(a);
  (void)r;
  return 0;  // not reached: the watchdog aborts the job
}
