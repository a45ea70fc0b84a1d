// tests/mpi/support.hpp: what the Catch2 programs of tests/mpi share (not a test itself).
//
// Include it first, in exactly one file per program, with CATCH_CONFIG_RUNNER defined (it
// defines main). Every rank runs every test case, in the same order (SPMD):
// - main owns MPI through ts::mpi_devices (mpi_test::devices()) and runs Catch2;
// - a failed assertion on any rank prints its details with the rank and aborts the whole
//   job (MPI_Abort): Catch2 would otherwise let that rank leave the test case while its
//   peers wait for it in the next collective, and the test would hang;
// - shared_seed() is one random seed, the same on every rank (rank 0's, broadcast).
#pragma once

// A rank killed by mpirun (after another rank aborted) must not report SIGTERM as a failure
// of its own last assertion.
#define CATCH_CONFIG_NO_POSIX_SIGNALS
// Catch2's implementation is compiled here (CATCH_CONFIG_RUNNER), and g++ 12 at -O3 warns
// falsely inside it (-Wrestrict on std::string::insert in Session::runInternal, GCC PR 105329);
// the warning is silenced for that header only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include <catch2/catch.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include <mpi.h>

#include <cstdio>
#include <random>
#include <sstream>
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

struct abort_on_failure : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;

  bool assertionEnded(const Catch::AssertionStats& stats) override {
    const Catch::AssertionResult& r = stats.assertionResult;
    if (r.isOk()) return true;
    std::ostringstream out;
    out << "FAILED on rank " << rank() << " of " << size() << ": " << r.getSourceInfo()
        << "\n  test case: " << currentTestCaseInfo->name;
    if (r.hasExpression())
      out << "\n  " << r.getExpressionInMacro() << "\n  with expansion: "
          << r.getExpandedExpression();
    if (r.hasMessage()) out << "\n  " << r.getMessage();
    for (const Catch::MessageInfo& m : stats.infoMessages) out << "\n  with message: " << m.message;
    std::fprintf(stderr, "%s\n", out.str().c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return true;
  }
};

}  // namespace mpi_test

using mpi_test_abort_on_failure = mpi_test::abort_on_failure;  // the macro pastes the name
CATCH_REGISTER_LISTENER(mpi_test_abort_on_failure)

int main(int argc, char** argv) {
  typeshard::mpi_devices devices{argc, argv};
  mpi_test::devices_pointer() = &devices;
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  const int failed = session.run();
  // Every rank reports; the job fails if any rank does (mpirun's exit status).
  return failed == 0 ? 0 : 1;
}
