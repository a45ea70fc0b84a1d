// expect-abort: typeshard: rank 1 of [0-9]+: an exception is leaving the scope of ts::mpi_devices
//
// An exception thrown on one rank and caught only outside the scope of ts::mpi_devices: the
// destructor runs during unwinding, where MPI_Finalize would wait for the other ranks
// (which wait for this one in to_host), so it aborts the job with a message instead.
#include <mpi.h>

#include <typeshard/backend/mpi.hpp>
#include <typeshard/typeshard.hpp>

#include <cstdio>
#include <stdexcept>

namespace ts = typeshard;
using mesh_2 = ts::mesh<ts::axis("x", 2)>;

int main(int argc, char** argv) {
  try {
    ts::mpi_devices devices{argc, argv};
    ts::device_mesh<mesh_2> m{devices, {0, 1}};
    const auto a = ts::device_put<ts::spec<"x">>(m, ts::arange<int>(6));
    if (devices.process_index() == 1) throw std::runtime_error("rank 1 gives up");
    if (devices.process_index() == 0) {
      const auto back = ts::to_host(a);  // waits here for rank 1
      std::printf("not reached: %zu\n", back.size());
    }
    // Ranks outside the mesh wait too (a barrier rank 1 never reaches), so that the abort
    // finds every rank blocked, as in a real job: Open MPI 4.1's mpirun can hang or crash when
    // an abort meets ranks inside MPI_Finalize, which would make this test flaky.
    MPI_Barrier(MPI_COMM_WORLD);
  } catch (const std::exception& e) {
    std::printf("not reached either: %s\n", e.what());
  }
  return 0;
}
