// tests/mpi/support.hpp: what the Catch2 programs of tests/mpi share (not a test itself).
//
// Include it first. Every rank runs every test case, in the same order (SPMD):
// - main (tests/mpi/support/main.cpp, compiled once and linked into every program that
//   includes this header) owns MPI through ts::mpi_devices (mpi_test::devices()) and runs
//   Catch2;
// - a failed assertion on any rank prints its details with the rank and aborts the whole
//   job (MPI_Abort, the listener in main.cpp): Catch2 would otherwise let that rank leave the
//   test case while its peers wait for it in the next collective, and the test would hang;
// - shared_seed() is one random seed, the same on every rank (rank 0's, broadcast).
#pragma once

#if defined(CATCH_CONFIG_RUNNER) && !defined(TYPESHARD_MPI_TEST_MAIN)
#error "tests/mpi: main and Catch2's runner come from support/main.cpp (linked for you); remove #define CATCH_CONFIG_RUNNER"
#endif

#include <catch2/catch.hpp>

#include <mpi.h>

#include <cstdio>
#include <random>
#include <string>

#include <typeshard/backend/mpi.hpp>
#include <typeshard/typeshard.hpp>

namespace mpi_test {

namespace ts = typeshard;

inline ts::mpi_devices*& devices_pointer() {
  static ts::mpi_devices* d = nullptr;
  return d;
}
inline ts::mpi_devices& devices() { return *devices_pointer(); }
inline int rank() { return static_cast<int>(devices().process_index()); }
inline int size() { return static_cast<int>(devices().process_count()); }

// A random seed drawn on rank 0 and broadcast: every rank generates the same data.
inline unsigned shared_seed() {
  unsigned seed = std::random_device{}();
  MPI_Bcast(&seed, 1, MPI_UNSIGNED, 0, MPI_COMM_WORLD);
  return seed;
}

}  // namespace mpi_test
