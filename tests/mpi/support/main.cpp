// tests/mpi/support/main.cpp: main and Catch2's implementation for the Catch2 programs of
// tests/mpi (those that include ../support.hpp), compiled once as the library
// typeshard_mpi_catch_main instead of in every program (issue 13: Catch2's implementation is
// about 12 s of g++ time per TU).
//
// A rank killed by mpirun (after another rank aborted) must not report SIGTERM as a failure
// of its own last assertion.
#define CATCH_CONFIG_NO_POSIX_SIGNALS
#define CATCH_CONFIG_RUNNER
#define TYPESHARD_MPI_TEST_MAIN  // support.hpp: this is the one file that may define the runner
// g++ 12 at -O3 warns falsely inside Catch2's implementation (-Wrestrict on
// std::string::insert in Session::runInternal, GCC PR 105329): silenced for that header only.
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
#include <sstream>

#include "../support.hpp"

namespace mpi_test {

// A failed assertion on any rank aborts the whole job, after printing where and why.
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
