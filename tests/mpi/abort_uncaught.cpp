// expect-abort: typeshard: rank 1 of [0-9]+: uncaught exception: typeshard: only rank 1 fails
//
// An exception outside any per-device function that only one rank throws, and nobody
// catches, while the other ranks go on into a collective (to_host): mpi_devices' terminate
// handler prints it with the rank and aborts the job at once, rather than leaving the peers
// blocked until mpirun notices the dead process.
#include <mpi.h>

#include <typeshard/backend/mpi.hpp>
#include <typeshard/typeshard.hpp>

#include <cstdio>

namespace ts = typeshard;
using mesh_2 = ts::mesh<ts::axis("x", 2)>;

int main(int argc, char** argv) {
  ts::mpi_devices devices{argc, argv};
  ts::device_mesh<mesh_2> m{devices, {0, 1}};
  const auto a = ts::device_put<ts::spec<"x">>(m, ts::arange<int>(6));
  if (devices.process_index() == 1) throw ts::usage_error("typeshard: only rank 1 fails here");
  if (devices.process_index() == 0) {
    const auto back = ts::to_host(a);  // waits here for rank 1
    std::printf("not reached: %zu\n", back.size());
  }
  // Ranks outside the mesh wait too (a barrier rank 1 never reaches), so that the abort
  // finds every rank blocked, as in a real job: Open MPI 4.1's mpirun can hang or crash when
  // an abort meets ranks inside MPI_Finalize, which would make this test flaky.
  MPI_Barrier(MPI_COMM_WORLD);
  return 0;
}
