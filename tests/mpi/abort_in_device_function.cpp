// expect-abort: typeshard: rank 1 of [0-9]+: the function running on device 1 threw: boom on device 1
//
// An exception in a per-device function on one rank, while its peer waits for it inside an
// MPI collective (psum): MPI cannot release the peer, so the backend prints the error with
// the rank and aborts the job. The test passes when the job fails with that message; a hang
// is stopped by CTest's timeout and fails.
#include <mpi.h>

#include <typeshard/backend/mpi.hpp>
#include <typeshard/typeshard.hpp>

#include <stdexcept>

namespace ts = typeshard;
using mesh_2 = ts::mesh<ts::axis("x", 2)>;

int main(int argc, char** argv) {
  ts::mpi_devices devices{argc, argv};
  ts::device_mesh<mesh_2> m{devices, {0, 1}};  // ranks 2 and 3 (under -np 4) stay idle
  const auto a = ts::device_put<ts::spec<"x">>(m, ts::arange<float>(8));
  const auto f = ts::shard_map<mesh_2, ts::spec<"x">, ts::spec<ts::none>>(
      [](const ts::shard_context<mesh_2>& here, const auto& x) {
        if (here.device() == 1) throw std::runtime_error("boom on device 1");
        return ts::psum<"x">(x);  // device 0 waits here for device 1
      });
  const auto sum = f(a);  // ranks outside the mesh take no part
  (void)sum;
  // Ranks outside the mesh wait too (a barrier rank 1 never reaches), so that the abort
  // finds every rank blocked, as in a real job: Open MPI 4.1's mpirun can hang or crash when
  // an abort meets ranks inside MPI_Finalize, which would make this test flaky.
  MPI_Barrier(MPI_COMM_WORLD);
  return 0;
}
