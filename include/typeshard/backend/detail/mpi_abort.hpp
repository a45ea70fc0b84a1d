// typeshard/backend/detail/mpi_abort.hpp: how the MPI backend ends the job on a failure it
// cannot report to the other ranks (see backend/mpi.hpp, "Failures"): it prints the rank and
// the reason, then calls MPI_Abort. Internal: do not rely on anything here.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace typeshard::detail {

// What a rank prints before aborting the job: which rank, and why.
[[noreturn]] inline void mpi_abort_job(const std::string& message) {
  int rank = -1, size = 0, initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  std::fprintf(stderr,
               "typeshard: rank %d of %d: %s\ntypeshard: rank %d aborts the MPI job "
               "(MPI_Abort): other ranks may be waiting for it in a collective, and MPI "
               "cannot release them\n",
               rank, size, message.c_str(), rank);
  std::fflush(stderr);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

// The message of the exception being handled.
inline std::string current_exception_message() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception not derived from std::exception";
  }
}

// std::terminate while mpi_devices owns MPI (an exception escaped main, say): abort the
// job with the message, instead of leaving the other ranks blocked until mpirun notices.
inline void mpi_terminate_handler() {
  std::string what = "std::terminate was called";
  if (std::current_exception()) what = "uncaught exception: " + current_exception_message();
  mpi_abort_job(what);
}

}  // namespace typeshard::detail
